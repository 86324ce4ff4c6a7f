package dataplane

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Load is a steady read and write load on a memcached address (the proxy,
// or one server): workers that get random keys of a key space and, a share
// of the time, set one. A miss is not filled in (no read-through): the
// hit ratio is then the share of the key space the cache still holds,
// which is what a rollout loses or keeps.
type Load struct {
	// Addr is where requests go.
	Addr string
	// Keys is the key space: key-0 … key-(Keys-1).
	Keys int
	// ValueSize is the bytes of each value.
	ValueSize int
	// SetShare is the share of requests that are sets (0.05: 5 %).
	SetShare float64
	// Workers is the connections, each a worker.
	Workers int

	hits, misses, errors atomic.Int64
	stop                 context.CancelFunc
	wg                   sync.WaitGroup
}

// Key is the i-th key of the key space.
func Key(i int) string { return "key-" + strconv.Itoa(i) }

// Fill sets every key of the key space once, through Addr.
func (l *Load) Fill(ctx context.Context) error {
	c, err := dialText(l.Addr)
	if err != nil {
		return err
	}
	defer c.Close()
	value := strings.Repeat("v", l.ValueSize)
	for i := range l.Keys {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := c.set(Key(i), value); err != nil {
			return fmt.Errorf("filling %s: %w", Key(i), err)
		}
	}
	return nil
}

// Start runs the load until Stop.
func (l *Load) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	l.stop = cancel
	value := strings.Repeat("w", l.ValueSize)
	for w := range l.Workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			var c *textConn
			for ctx.Err() == nil {
				if c == nil {
					var err error
					if c, err = dialText(l.Addr); err != nil {
						l.errors.Add(1)
						time.Sleep(50 * time.Millisecond)
						continue
					}
				}
				key := Key(rng.IntN(l.Keys))
				var err error
				if rng.Float64() < l.SetShare {
					err = c.set(key, value)
				} else {
					var hit bool
					if hit, err = c.get(key); err == nil {
						if hit {
							l.hits.Add(1)
						} else {
							l.misses.Add(1)
						}
					}
				}
				if err != nil {
					// An error (a Pod gone, the proxy's "backend
					// failure") is neither a hit nor a miss: count it,
					// and dial again.
					l.errors.Add(1)
					c.Close()
					c = nil
				}
			}
			if c != nil {
				c.Close()
			}
		}()
	}
}

// Stop ends the load and waits for its workers.
func (l *Load) Stop() {
	if l.stop != nil {
		l.stop()
	}
	l.wg.Wait()
}

// Counts are the gets that hit and missed, and the requests that failed,
// since the load started.
type Counts struct{ Hits, Misses, Errors int64 }

// Counts reads the counts so far.
func (l *Load) Counts() Counts {
	return Counts{Hits: l.hits.Load(), Misses: l.misses.Load(), Errors: l.errors.Load()}
}

// Sub is the counts between two readings.
func (c Counts) Sub(before Counts) Counts {
	return Counts{Hits: c.Hits - before.Hits, Misses: c.Misses - before.Misses, Errors: c.Errors - before.Errors}
}

// HitRatio is hits over the gets answered (hits and misses); errors
// count as misses, since the client got no item.
func (c Counts) HitRatio() float64 {
	total := c.Hits + c.Misses + c.Errors
	if total == 0 {
		return 0
	}
	return float64(c.Hits) / float64(total)
}

// textConn is a connection speaking memcached's text protocol.
type textConn struct {
	net.Conn
	r *bufio.Reader
}

func dialText(addr string) (*textConn, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	return &textConn{Conn: c, r: bufio.NewReaderSize(c, 64<<10)}, nil
}

func (c *textConn) line() (string, error) {
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	l, err := c.r.ReadString('\n')
	return strings.TrimRight(l, "\r\n"), err
}

func (c *textConn) set(key, value string) error {
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c, "set %s 0 0 %d\r\n%s\r\n", key, len(value), value); err != nil {
		return err
	}
	l, err := c.line()
	if err != nil {
		return err
	}
	if l != "STORED" {
		return fmt.Errorf("set %s: %s", key, l)
	}
	return nil
}

func (c *textConn) get(key string) (bool, error) {
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c, "get %s\r\n", key); err != nil {
		return false, err
	}
	hit := false
	for {
		l, err := c.line()
		if err != nil {
			return false, err
		}
		switch {
		case l == "END":
			return hit, nil
		case strings.HasPrefix(l, "VALUE "):
			f := strings.Fields(l)
			n, err := strconv.Atoi(f[len(f)-1])
			if err != nil || n < 0 {
				return false, fmt.Errorf("get %s: %q", key, l)
			}
			if _, err := c.r.Discard(n + 2); err != nil {
				return false, err
			}
			hit = true
		default:
			return false, fmt.Errorf("get %s: %s", key, l)
		}
	}
}
