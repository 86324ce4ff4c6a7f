package handoff

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// maxRelativeTTL is the largest TTL memcached takes as seconds from now:
// above 30 days it reads T as a Unix time.
const maxRelativeTTL = 30 * 24 * 60 * 60

// destination is where an item goes: a memcached's address, and the Pod
// it is, for the reports.
type destination struct {
	addr, pod string
}

// route says where an item goes (its key as the dump gives it); ok false
// when it has no home (its slot is not Serving, or is the source's).
type route func(key string) (d destination, ok bool)

// counts are a copy's, read while it runs.
type counts struct {
	items, bytes, skipped         atomic.Int64
	gone, homeless, refused, kept atomic.Int64

	mu sync.Mutex
	// refusal is the first answer a destination refused an item with.
	refusal string
	// to are the Pods items were handed to.
	to map[string]bool
	// observed* were told the Observer.
	observedItems, observedBytes int64
}

func (c *counts) refuse(answer string) {
	c.refused.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refusal == "" {
		c.refusal = answer
	}
}

func (c *counts) handedTo(pod string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.to == nil {
		c.to = map[string]bool{}
	}
	c.to[pod] = true
}

// copier copies every item of one memcached to where route says.
type copier struct {
	source  string
	route   route
	dial    Dialer
	timeout time.Duration
	batch   int
	now     func() time.Time
	counts  *counts
	// beforeGet, in tests, runs before a batch is asked for.
	beforeGet func([]dumpKey)
}

// pending is what a destination's reader expects next: the answer to an
// ms of size bytes, or (mn) the MN that closes a batch.
type pending struct {
	size int64
	mn   bool
}

// dest is a connection to one destination and the reader of its answers.
type dest struct {
	*conn
	pod     string
	pending chan pending
	// batch are this batch's items, handed to the reader once flushed,
	// so that it never waits for an answer to what was not sent.
	batch []pending
	done  chan error
}

// once runs one attempt of the copy: the key dump on one connection,
// pipelined mg batches on a second to the source, and the items written
// in add mode (ME) to each destination on a connection of its own, each
// batch closed by mn. On ctx's end it stops between items and closes
// every batch; on an error it closes every connection at once, so a
// destination never sees more than whole ms commands (memcached drops an
// item whose value a closed connection cut).
func (cp *copier) once(ctx context.Context) (err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	dumpConn, err := dial(ctx, cp.dial, cp.source, cp.timeout, dumpBufs)
	if err != nil {
		return err
	}
	defer dumpConn.close()
	getConn, err := dial(ctx, cp.dial, cp.source, cp.timeout, getBufs)
	if err != nil {
		return err
	}
	defer getConn.close()
	if err := startDump(dumpConn); err != nil {
		return err
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	// A failure anywhere ends every goroutine: their connections close,
	// the destinations' too, whatever is being written to them.
	var failure atomic.Pointer[error]
	var connsMu sync.Mutex
	destConns := []*conn{}
	fail := func(err error) {
		if err != nil && failure.CompareAndSwap(nil, &err) {
			cancel(err)
			dumpConn.close()
			getConn.close()
			connsMu.Lock()
			for _, c := range destConns {
				c.close()
			}
			connsMu.Unlock()
		}
	}

	keys := make(chan []dumpKey, 4)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(keys)
		if err := readDump(ctx, dumpConn, cp.batch, keys, func() { cp.counts.kept.Add(1) }); err != nil && ctx.Err() == nil {
			fail(err)
		}
	}()

	// The mg writer runs ahead of the reader by up to two batches.
	asked := make(chan []dumpKey, 2)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(asked)
		var line []byte
		for batch := range keys {
			if cp.beforeGet != nil {
				cp.beforeGet(batch)
			}
			for _, k := range batch {
				line = append(line[:0], "mg "...)
				line = append(line, k.key...)
				if k.binary {
					line = append(line, " b"...)
				}
				// u: no LRU bump, so a source that stays (Moved) keeps
				// its order.
				line = append(line, " k v f t u\r\n"...)
				getConn.w.Write(line)
			}
			if err := getConn.flush(); err != nil {
				fail(err)
				return
			}
			select {
			case asked <- batch:
			case <-ctx.Done():
				return
			}
		}
	}()

	dests := map[string]*dest{}
	defer func() {
		// A clean end closes every batch and waits for the answers; a
		// failure has closed nothing yet, and closes every connection
		// without writing another byte.
		for _, d := range dests {
			close(d.pending)
			if failure.Load() != nil {
				d.close()
			}
		}
		for _, d := range dests {
			if derr := <-d.done; derr != nil {
				fail(derr)
			}
			d.close()
		}
		if p := failure.Load(); p != nil {
			err = *p
		}
	}()
	destFor := func(to destination) (*dest, error) {
		if d, ok := dests[to.addr]; ok {
			return d, nil
		}
		c, err := dial(ctx, cp.dial, to.addr, cp.timeout, destBufs)
		if err != nil {
			return nil, err
		}
		d := &dest{conn: c, pod: to.pod, pending: make(chan pending, 4*(cp.batch+1)), done: make(chan error, 1)}
		dests[to.addr] = d
		connsMu.Lock()
		destConns = append(destConns, c)
		connsMu.Unlock()
		if failure.Load() != nil {
			c.close()
		}
		go func() {
			err := d.read(cp.counts)
			if err != nil {
				fail(err)
				// The writer never blocks on a reader that stopped.
				for range d.pending {
				}
			}
			d.done <- err
		}()
		return d, nil
	}

	var header []byte
	for batch := range asked {
		for _, k := range batch {
			if ctx.Err() != nil {
				break
			}
			item, err := readItem(getConn, k)
			if err != nil {
				fail(err)
				return err
			}
			if item == nil {
				cp.counts.gone.Add(1)
				continue
			}
			to, ok := cp.route(k.key)
			ttl, live := remainingTTL(item.ttl, cp.now())
			switch {
			case !live:
				cp.counts.gone.Add(1)
			case !ok:
				cp.counts.homeless.Add(1)
			}
			if !live || !ok {
				if err := getConn.discard(item.size); err != nil {
					fail(err)
					return err
				}
				continue
			}
			d, err := destFor(to)
			if err != nil {
				fail(err)
				return err
			}
			header = append(header[:0], "ms "...)
			header = append(header, k.key...)
			header = append(header, ' ')
			header = strconv.AppendInt(header, item.size, 10)
			if k.binary {
				header = append(header, " b"...)
			}
			header = append(header, " T"...)
			header = strconv.AppendInt(header, ttl, 10)
			header = append(header, " F"...)
			header = append(header, item.flags...)
			header = append(header, " ME\r\n"...)
			d.nc.SetWriteDeadline(time.Now().Add(cp.timeout + bytesTime(item.size)))
			d.w.Write(header)
			if err := getConn.copyValue(d.w, item.size); err != nil {
				err = getConn.fail(err)
				fail(err)
				return err
			}
			d.w.WriteString("\r\n")
			d.batch = append(d.batch, pending{size: item.size})
		}
		for _, d := range dests {
			if len(d.batch) == 0 {
				continue
			}
			d.w.WriteString("mn\r\n")
			if err := d.flush(); err != nil {
				fail(err)
				return err
			}
			// Never dropped: the reader takes every answer in order, of
			// what was flushed, so it keeps up.
			for _, p := range d.batch {
				d.pending <- p
			}
			d.pending <- pending{mn: true}
			d.batch = d.batch[:0]
		}
		if ctx.Err() != nil {
			break
		}
	}
	if p := failure.Load(); p != nil {
		return *p
	}
	// Stopped early: the source's connections may close at once (the
	// destinations' batches are closed by now).
	dumpConn.close()
	getConn.close()
	return context.Cause(ctx)
}

// maxBusy bounds the attempts while the crawler is busy.
const maxBusy = 30

// run copies, trying again from the start (the dump cannot resume) after
// a connection failure, up to retries times, and while the crawler is
// busy, with a backoff from 100 ms to 2 s. An item a failed attempt
// stored counts as already there in the next.
func (cp *copier) run(ctx context.Context, retries int) error {
	busy, failures := 0, 0
	for {
		err := cp.once(ctx)
		var wait time.Duration
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return context.Cause(ctx)
		case errors.Is(err, errBusy):
			busy++
			if busy > maxBusy {
				return fmt.Errorf("%s: the LRU crawler stayed busy (another lru_crawler crawl or dump runs) through %d attempts", cp.source, busy)
			}
			wait = min(100*time.Millisecond<<min(busy-1, 5), 2*time.Second)
		case isRetryable(err):
			failures++
			if failures > retries {
				return fmt.Errorf("%w (after %d attempts)", err, failures)
			}
			wait = min(200*time.Millisecond<<min(failures-1, 5), 2*time.Second)
		default:
			return err
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// read takes a destination's answers as they come: HD for an item stored,
// NS for one it already held (add mode), an error line for one it
// refused, MN at the end of each batch.
func (d *dest) read(c *counts) error {
	for p := range d.pending {
		l, err := d.line()
		if err != nil {
			return err
		}
		switch {
		case p.mn && string(l) == "MN":
		case p.mn:
			return &protocolError{addr: d.addr, msg: fmt.Sprintf("answered %q where MN closes a batch", l)}
		case string(l) == "HD":
			c.items.Add(1)
			c.bytes.Add(p.size)
			c.handedTo(d.pod)
		case string(l) == "NS":
			c.skipped.Add(1)
		case bytes.HasPrefix(l, []byte("SERVER_ERROR ")):
			// Too large for its -I, out of memory under -M: the item
			// is not there, and the copy goes on.
			c.refuse(string(l))
		default:
			return &protocolError{addr: d.addr, msg: fmt.Sprintf("answered an ms with %q", l)}
		}
	}
	return nil
}

// item is an mg answer's head: the value follows on the connection.
type item struct {
	size  int64
	flags []byte
	ttl   []byte
}

// readItem reads the answer to mg <key> k v f t u: nil for a miss (the
// item went since the dump: expired, evicted or deleted).
func readItem(c *conn, k dumpKey) (*item, error) {
	l, err := c.line()
	if err != nil {
		return nil, err
	}
	if bytes.Equal(l, []byte("EN")) || bytes.HasPrefix(l, []byte("EN ")) {
		// A miss, with the key (k) after it.
		return nil, nil
	}
	bad := func() (*item, error) {
		return nil, &protocolError{addr: c.addr, msg: fmt.Sprintf("mg %s answered %q", k.key, l)}
	}
	f := bytes.Split(l, []byte(" "))
	if len(f) < 2 || string(f[0]) != "VA" {
		if bytes.HasPrefix(l, []byte("SERVER_ERROR")) {
			// "refcount overflow during fetch": nothing followed.
			return nil, nil
		}
		return bad()
	}
	size, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil || size < 0 {
		return bad()
	}
	it := &item{size: size}
	var key []byte
	for _, tok := range f[2:] {
		if len(tok) == 0 {
			continue
		}
		switch tok[0] {
		case 'k':
			key = tok[1:]
		case 'f':
			it.flags = tok[1:]
		case 't':
			it.ttl = tok[1:]
		}
	}
	if string(key) != k.key || !digits(it.flags) || it.ttl == nil {
		return bad()
	}
	return it, nil
}

func digits(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// remainingTTL turns mg's t (seconds left, -1 for none) into ms's T: 0
// for none, the seconds when at most 30 days, else the Unix time it ends
// (memcached reads a larger T so). live is false when nothing is left.
func remainingTTL(t []byte, now time.Time) (ttl int64, live bool) {
	if string(t) == "-1" {
		return 0, true
	}
	left, err := strconv.ParseInt(string(t), 10, 64)
	if err != nil || left <= 0 || left > 1<<31 {
		return 0, false
	}
	if left > maxRelativeTTL {
		return now.Unix() + left, true
	}
	return left, true
}

// isRetryable tells whether a failed attempt may be tried again: the
// connection failed or the crawler was busy, not a memcached that said no
// or an answer that made no sense.
func isRetryable(err error) bool {
	var ce *connError
	return errors.Is(err, errBusy) || errors.As(err, &ce)
}
