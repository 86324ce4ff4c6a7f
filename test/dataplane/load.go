package dataplane

import (
	"bufio"
	"context"
	"fmt"
	"io"
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
//
// Every value it writes begins with a number that rises with each write,
// and it remembers, per key, the highest number a write of it was
// acknowledged with. A get that returns a lower number than the one known
// when the get was sent is stale: the cache served a value older than
// one it had acknowledged (Counts.Stale).
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
	// Rate is the requests a second of all the workers together; 0 is
	// as many as they can, each sending its next request once the last is
	// answered. A closed loop takes every core it can get: on a machine
	// that runs other tests beside it, a rate measures the same thing for
	// a fraction of the CPU.
	Rate int

	hits, misses, errors, stale atomic.Int64
	// written is, per key, the highest write acknowledged; seq numbers
	// the writes.
	written []atomic.Int64
	seq     atomic.Int64
	stop    context.CancelFunc
	wg      sync.WaitGroup
}

// value is the value of write n: n, a colon, and padding to ValueSize.
func (l *Load) value(n int64) string {
	v := strconv.FormatInt(n, 10) + ":"
	if pad := l.ValueSize - len(v); pad > 0 {
		v += strings.Repeat("v", pad)
	}
	return v
}

// acknowledged records that write n of key i was stored.
func (l *Load) acknowledged(i int, n int64) {
	for {
		cur := l.written[i].Load()
		if cur >= n || l.written[i].CompareAndSwap(cur, n) {
			return
		}
	}
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
	if l.written == nil {
		l.written = make([]atomic.Int64, l.Keys)
	}
	for i := range l.Keys {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		n := l.seq.Add(1)
		if err := c.set(Key(i), l.value(n)); err != nil {
			return fmt.Errorf("filling %s: %w", Key(i), err)
		}
		l.acknowledged(i, n)
	}
	return nil
}

// Start runs the load until Stop.
func (l *Load) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	l.stop = cancel
	if l.written == nil {
		l.written = make([]atomic.Int64, l.Keys)
	}
	for w := range l.Workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			pace := l.pacer(ctx)
			var c *textConn
			for pace() {
				if c == nil {
					var err error
					if c, err = dialText(l.Addr); err != nil {
						l.errors.Add(1)
						time.Sleep(50 * time.Millisecond)
						continue
					}
				}
				i := rng.IntN(l.Keys)
				var err error
				if rng.Float64() < l.SetShare {
					// Each key is written by one worker only, so its
					// writes are stored in the order they are numbered.
					i = i - i%l.Workers + w
					if i >= l.Keys {
						i = w % l.Keys
					}
					key := Key(i)
					n := l.seq.Add(1)
					if err = c.set(key, l.value(n)); err == nil {
						l.acknowledged(i, n)
					}
				} else {
					key := Key(i)
					known := l.written[i].Load()
					var got int64
					if got, err = c.get(key); err == nil {
						switch {
						case got < 0:
							l.misses.Add(1)
						case got < known:
							l.stale.Add(1)
							l.hits.Add(1)
						default:
							l.hits.Add(1)
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

// Sweep reads every key of the key space once through Addr, on a
// connection of its own, and returns what it read, counted as the workers
// count (a stale read is one older than the write acknowledged when the
// get was sent), apart from the load's counts: a check that no key is
// stale, where the load's random reads only sample them.
func (l *Load) Sweep(ctx context.Context) (Counts, error) {
	c, err := dialText(l.Addr)
	if err != nil {
		return Counts{}, err
	}
	defer c.Close()
	if l.written == nil {
		l.written = make([]atomic.Int64, l.Keys)
	}
	var out Counts
	for i := range l.Keys {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		known := l.written[i].Load()
		got, err := c.get(Key(i))
		switch {
		case err != nil:
			return out, fmt.Errorf("sweeping %s: %w", Key(i), err)
		case got < 0:
			out.Misses++
		case got < known:
			out.Stale++
			out.Hits++
		default:
			out.Hits++
		}
	}
	return out, nil
}

// pacer returns what a worker calls before each request: it waits for
// the worker's next turn under Rate and says whether the load still runs.
// A worker that falls behind (a slow answer, a dial) goes on from now
// rather than sending the requests it missed at once.
func (l *Load) pacer(ctx context.Context) func() bool {
	if l.Rate <= 0 {
		return func() bool { return ctx.Err() == nil }
	}
	every := time.Duration(float64(time.Second) * float64(l.Workers) / float64(l.Rate))
	next := time.Now()
	return func() bool {
		now := time.Now()
		if wait := next.Sub(now); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return false
			case <-t.C:
			}
		} else if -wait > time.Second {
			next = now
		}
		next = next.Add(every)
		return ctx.Err() == nil
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
// since the load started; Stale, the hits that returned a value older
// than one already acknowledged (counted in Hits too).
type Counts struct{ Hits, Misses, Errors, Stale int64 }

// Counts reads the counts so far.
func (l *Load) Counts() Counts {
	return Counts{Hits: l.hits.Load(), Misses: l.misses.Load(), Errors: l.errors.Load(), Stale: l.stale.Load()}
}

// Sub is the counts between two readings.
func (c Counts) Sub(before Counts) Counts {
	return Counts{Hits: c.Hits - before.Hits, Misses: c.Misses - before.Misses, Errors: c.Errors - before.Errors, Stale: c.Stale - before.Stale}
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

// get returns the number the value begins with (see Load.value), 0 for a
// value without one, or -1 for a miss.
func (c *textConn) get(key string) (int64, error) {
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c, "get %s\r\n", key); err != nil {
		return -1, err
	}
	got := int64(-1)
	for {
		l, err := c.line()
		if err != nil {
			return -1, err
		}
		switch {
		case l == "END":
			return got, nil
		case strings.HasPrefix(l, "VALUE "):
			f := strings.Fields(l)
			n, err := strconv.Atoi(f[len(f)-1])
			if err != nil || n < 0 {
				return -1, fmt.Errorf("get %s: %q", key, l)
			}
			data := make([]byte, n+2)
			if _, err := io.ReadFull(c.r, data); err != nil {
				return -1, err
			}
			got = 0
			if num, _, ok := strings.Cut(string(data[:n]), ":"); ok {
				got, _ = strconv.ParseInt(num, 10, 64)
			}
		default:
			return -1, fmt.Errorf("get %s: %s", key, l)
		}
	}
}
