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
// it is, for the reports. When an item goes nowhere, stay says that it
// is not this hand-off's to move (a Grown source's item whose key hashes
// to no added slot), rather than homeless.
type destination struct {
	addr, pod string
	stay      bool
}

// route says where an item goes (its key as the dump gives it); ok false
// when it has no home (its slot is not Serving, or is the source's) or
// stays (d.stay).
type route func(key string) (d destination, ok bool)

// counts are a copy's, read while it runs.
type counts struct {
	// items and bytes were handed on; skipped, already on their
	// destination (newer there).
	items, bytes, skipped atomic.Int64
	// gone were no longer on the source when read (or had no time left);
	// homeless had no Serving slot to go to; refused, the destination
	// said no (refusal); reserved are the operator's own keys
	// (contract.ReservedKeyPrefix), which the dump skips.
	gone, homeless, refused, reserved atomic.Int64
	// stayed were not this hand-off's to move; removed, deleted from
	// the source once their destination held them (copier.remove);
	// changed, left on the source because they were written there since
	// the copy read them.
	stayed, removed, changed atomic.Int64
	// pace is what pacing by the destinations' flush to disk did.
	pace paceCounts

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
	// remove deletes each item from the source once its destination
	// holds it (stored, or held already: NS), if it is still the item
	// read: md with the CAS mg returned, so that a write the source took
	// since is kept. For a source that stays and keeps serving its other
	// keys (Grown), where a copy left behind would come back: a later
	// copy in add mode (a scale-down's Removed, back to this source)
	// would find it and keep it in place of the newer value, and clients
	// would read it.
	remove bool
	// beforeGet, in tests, runs before a batch is asked for;
	// beforeRemove before an item is deleted from the source.
	beforeGet    func([]dumpKey)
	beforeRemove func(key string)
	// pace paces the copy into destinations with extstore (pace.go):
	// defaultPace when nil.
	pace *paceRule
}

// removal is an item to delete from the source: its key, and the CAS it
// had when the copy read it.
type removal struct {
	key    string
	binary bool
	cas    uint64
}

// pending is what a destination's reader expects next: the answer to an
// ms of size bytes, or (mn) the MN that closes a batch.
type pending struct {
	size int64
	mn   bool
	// item is the source's item, to remove once stored (copier.remove).
	item *removal
}

// destWriter is the copy's connection to one destination, on which it
// writes batches of ms, and the reader of its answers.
type destWriter struct {
	*conn
	pod     string
	pending chan pending
	// batch are this batch's items, handed to the reader once flushed,
	// so that it never waits for an answer to what was not sent.
	batch []pending
	done  chan error
	// removals takes the items the destination now holds, to delete
	// from the source (copier.remove; nil otherwise).
	removals chan<- removal
	// pacer keeps the copy from outrunning a destination's flush to
	// disk (pace.go); nil for a destination without extstore.
	pacer *pacer
}

// once runs one attempt of the copy: the key dump on one connection,
// pipelined mg batches on a second to the source, and the items written
// in add mode (ME) to each destination on a connection of its own, each
// batch closed by mn. On ctx's end it stops between items and closes
// every batch; on an error it closes every connection at once, so a
// destination never sees more than whole ms commands (memcached drops an
// item whose value a closed connection cut).
//
// The order of its clean-up matters, and is the order of its defers, last
// first: finish ends the destinations' writers (and the remover) and takes
// the first failure as the attempt's error; then the dump's and the mg
// writer's goroutines are waited for; then the source's connections close.
func (cp *copier) once(ctx context.Context) (err error) {
	a := &attempt{cp: cp, writers: map[string]*destWriter{}}
	a.ctx, a.cancel = context.WithCancelCause(ctx)
	defer a.cancel(nil)

	if a.dumpConn, err = dial(a.ctx, cp.dial, cp.source, cp.timeout, dumpBufs); err != nil {
		return err
	}
	defer a.dumpConn.close()
	if a.getConn, err = dial(a.ctx, cp.dial, cp.source, cp.timeout, getBufs); err != nil {
		return err
	}
	defer a.getConn.close()
	if err := startDump(a.dumpConn); err != nil {
		return err
	}

	defer a.wg.Wait()
	if err := a.startRemover(); err != nil {
		return err
	}
	asked := a.askItems(a.readKeys())
	defer a.finish(&err)
	return a.copyItems(asked)
}

// attempt is one attempt of a copy (copier.once): its connections to the
// source, the goroutines that feed it, the writers to its destinations,
// and the first failure, which ends them all.
type attempt struct {
	cp     *copier
	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup

	// dumpConn lists the source's keys; getConn reads their items.
	dumpConn, getConn *conn
	// writers are the destinations' connections, by address.
	writers map[string]*destWriter
	// removals takes the items to delete from the source (copier.remove;
	// nil otherwise), and removeDone says how the remover ended.
	removals   chan removal
	removeDone chan error
	// header is the ms line being written, reused.
	header []byte

	// failure is the first error: it ends every goroutine, their
	// connections closed, the destinations' too (toClose), whatever is
	// being written to them.
	failure atomic.Pointer[error]
	mu      sync.Mutex
	toClose []*conn
}

// fail ends the attempt on its first error: its context, and every
// connection at once.
func (a *attempt) fail(err error) {
	if err != nil && a.failure.CompareAndSwap(nil, &err) {
		a.cancel(err)
		a.dumpConn.close()
		a.getConn.close()
		a.mu.Lock()
		for _, c := range a.toClose {
			c.close()
		}
		a.mu.Unlock()
	}
}

// track has fail close c.
func (a *attempt) track(c *conn) {
	a.mu.Lock()
	a.toClose = append(a.toClose, c)
	a.mu.Unlock()
}

// startRemover, with remove, opens a connection of its own to the source
// and deletes on it what the destinations hold (removeAll).
func (a *attempt) startRemover() error {
	cp := a.cp
	if !cp.remove {
		return nil
	}
	rc, err := dial(a.ctx, cp.dial, cp.source, cp.timeout, destBufs)
	if err != nil {
		return err
	}
	a.track(rc)
	a.removals, a.removeDone = make(chan removal, 4*(cp.batch+1)), make(chan error, 1)
	go func() {
		defer rc.close()
		err := cp.removeAll(rc, a.removals)
		if err != nil {
			a.fail(err)
			// The destinations' readers never block on a remover
			// that stopped.
			for range a.removals {
			}
		}
		a.removeDone <- err
	}()
	return nil
}

// readKeys reads the key dump, a batch at a time, until it ends.
func (a *attempt) readKeys() <-chan []dumpKey {
	keys := make(chan []dumpKey, 4)
	a.wg.Go(func() {
		defer close(keys)
		if err := readDump(a.ctx, a.dumpConn, a.cp.batch, keys, func() { a.cp.counts.reserved.Add(1) }); err != nil && a.ctx.Err() == nil {
			a.fail(err)
		}
	})
	return keys
}

// askItems writes the mg of each batch of keys to the source, running
// ahead of the reader (copyItems) by up to two batches.
func (a *attempt) askItems(keys <-chan []dumpKey) <-chan []dumpKey {
	asked := make(chan []dumpKey, 2)
	a.wg.Go(func() {
		defer close(asked)
		var line []byte
		for batch := range keys {
			if a.cp.beforeGet != nil {
				a.cp.beforeGet(batch)
			}
			for _, k := range batch {
				line = append(line[:0], "mg "...)
				line = append(line, k.key...)
				if k.binary {
					line = append(line, " b"...)
				}
				// u: no LRU bump, so a source that stays (Moved,
				// Grown) keeps its order; c: the CAS, to remove it as
				// read.
				line = append(line, " k v f t u"...)
				if a.cp.remove {
					line = append(line, " c"...)
				}
				line = append(line, "\r\n"...)
				a.getConn.w.Write(line)
			}
			if err := a.getConn.flush(); err != nil {
				a.fail(err)
				return
			}
			select {
			case asked <- batch:
			case <-a.ctx.Done():
				return
			}
		}
	})
	return asked
}

// copyItems reads the items asked for, batch by batch, and writes each
// to its destination, closing every destination's batch at the end of
// each. It stops between items when the context ends.
func (a *attempt) copyItems(asked <-chan []dumpKey) error {
	for batch := range asked {
		for _, k := range batch {
			if a.ctx.Err() != nil {
				break
			}
			if err := a.copyItem(k); err != nil {
				a.fail(err)
				return err
			}
		}
		if err := a.closeBatches(); err != nil {
			a.fail(err)
			return err
		}
		if a.ctx.Err() != nil {
			break
		}
	}
	if p := a.failure.Load(); p != nil {
		return *p
	}
	// Stopped early: the source's connections may close at once (the
	// destinations' batches are closed by now).
	a.dumpConn.close()
	a.getConn.close()
	return context.Cause(a.ctx)
}

// copyItem reads k's item from the source and writes it, as an ms in add
// mode, into the batch of the destination route gives it. An item gone
// from the source, out of time, not this hand-off's to move or with no
// home is read past, and counted.
func (a *attempt) copyItem(k dumpKey) error {
	cp := a.cp
	item, err := readItem(a.getConn, k)
	if err != nil {
		return err
	}
	if item == nil {
		cp.counts.gone.Add(1)
		return nil
	}
	to, ok := cp.route(k.key)
	ttl, live := remainingTTL(item.ttl, cp.now)
	switch {
	case !live:
		cp.counts.gone.Add(1)
	case !ok && to.stay:
		cp.counts.stayed.Add(1)
	case !ok:
		cp.counts.homeless.Add(1)
	}
	if !live || !ok {
		return a.getConn.discard(item.size)
	}
	d, err := a.writerFor(to)
	if err != nil {
		return err
	}
	if d.pacer != nil {
		if err := d.pacer.before(a.ctx, item.size); err != nil {
			return err
		}
	}
	h := append(a.header[:0], "ms "...)
	h = append(h, k.key...)
	h = append(h, ' ')
	h = strconv.AppendInt(h, item.size, 10)
	if k.binary {
		h = append(h, " b"...)
	}
	h = append(h, " T"...)
	h = strconv.AppendInt(h, ttl, 10)
	h = append(h, " F"...)
	h = append(h, item.flags...)
	a.header = append(h, " ME\r\n"...)
	// Only an item that does not fit in what is left of the buffer makes
	// a syscall, which the deadline bounds.
	if int64(len(a.header))+item.size+2 > int64(d.w.Available()) {
		d.nc.SetWriteDeadline(time.Now().Add(cp.timeout + bytesTime(item.size)))
	}
	d.w.Write(a.header)
	if err := a.getConn.copyValue(d.w, item.size); err != nil {
		return a.getConn.fail(err)
	}
	d.w.WriteString("\r\n")
	p := pending{size: item.size}
	if cp.remove {
		p.item = &removal{key: k.key, binary: k.binary, cas: item.cas}
	}
	d.batch = append(d.batch, p)
	return nil
}

// closeBatches closes each destination's batch with mn, flushes it, and
// hands its reader the answers to expect.
func (a *attempt) closeBatches() error {
	for _, d := range a.writers {
		if len(d.batch) == 0 {
			continue
		}
		d.w.WriteString("mn\r\n")
		if err := d.flush(); err != nil {
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
	return nil
}

// writerFor is the writer to a destination, dialled, with its reader
// started, the first time an item goes there.
func (a *attempt) writerFor(to destination) (*destWriter, error) {
	if d, ok := a.writers[to.addr]; ok {
		return d, nil
	}
	cp := a.cp
	c, err := dial(a.ctx, cp.dial, to.addr, cp.timeout, destBufs)
	if err != nil {
		return nil, err
	}
	pc, err := a.pacerFor(c, to.addr)
	if err != nil {
		c.close()
		return nil, err
	}
	d := &destWriter{conn: c, pod: to.pod, pending: make(chan pending, 4*(cp.batch+1)), done: make(chan error, 1), removals: a.removals, pacer: pc}
	a.writers[to.addr] = d
	a.track(c)
	if a.failure.Load() != nil {
		c.close()
	}
	go func() {
		err := d.read(cp.counts)
		if err != nil {
			a.fail(err)
			// The writer never blocks on a reader that stopped.
			for range d.pending {
			}
		}
		d.done <- err
	}()
	return d, nil
}

// finish ends the destinations' writers: a clean end closes every batch
// and waits for the answers; a failure has closed nothing yet, and closes
// every connection without writing another byte. Then it waits for the
// remover, and makes the first failure the attempt's error (*err).
func (a *attempt) finish(err *error) {
	for _, d := range a.writers {
		close(d.pending)
		if a.failure.Load() != nil {
			d.close()
		}
	}
	for _, d := range a.writers {
		if derr := <-d.done; derr != nil {
			a.fail(derr)
		}
		d.close()
		if d.pacer != nil {
			d.pacer.close()
		}
	}
	// The readers are done: every removal they will ask for is in.
	if a.removals != nil {
		close(a.removals)
		if rerr := <-a.removeDone; rerr != nil {
			a.fail(rerr)
		}
	}
	if p := a.failure.Load(); p != nil {
		*err = *p
	}
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
func (d *destWriter) read(c *counts) error {
	// handed: c knows of d.pod already (handedTo takes a lock).
	handed := false
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
			if !handed {
				c.handedTo(d.pod)
				handed = true
			}
			d.remove(p)
		case string(l) == "NS":
			// Newer there: the source's is older still, and goes too.
			c.skipped.Add(1)
			d.remove(p)
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

// remove asks for p's item to be deleted from the source, with remove.
func (d *destWriter) remove(p pending) {
	if d.removals != nil && p.item != nil {
		d.removals <- *p.item
	}
}

// removeAll deletes the items it is given from the source on c, each only
// if it is still the item the copy read (md with its CAS), a batch at a
// time closed by mn: HD deleted, EX written since (kept: the newer value
// is there, for clients that have not switched yet), NF gone since.
func (cp *copier) removeAll(c *conn, items <-chan removal) error {
	var line []byte
	n := 0
	answers := func() error {
		c.w.WriteString("mn\r\n")
		if err := c.flush(); err != nil {
			return err
		}
		for {
			l, err := c.line()
			if err != nil {
				return err
			}
			switch string(l) {
			case "HD":
				cp.counts.removed.Add(1)
			case "EX":
				cp.counts.changed.Add(1)
			case "NF":
			case "MN":
				return nil
			default:
				return &protocolError{addr: c.addr, msg: fmt.Sprintf("answered an md with %q", l)}
			}
		}
	}
	for it := range items {
		if cp.beforeRemove != nil {
			cp.beforeRemove(it.key)
		}
		line = append(line[:0], "md "...)
		line = append(line, it.key...)
		if it.binary {
			line = append(line, " b"...)
		}
		line = append(line, " C"...)
		line = strconv.AppendUint(line, it.cas, 10)
		line = append(line, "\r\n"...)
		c.w.Write(line)
		n++
		// A batch ends when it is full or nothing more waits.
		if n >= cp.batch || len(items) == 0 {
			if err := answers(); err != nil {
				return err
			}
			n = 0
		}
	}
	if n > 0 {
		return answers()
	}
	return nil
}

// item is an mg answer's head: the value follows on the connection.
type item struct {
	size  int64
	flags []byte
	ttl   []byte
	// cas, when asked for (c).
	cas uint64
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
		case 'c':
			cas, err := strconv.ParseUint(string(tok[1:]), 10, 64)
			if err != nil {
				return bad()
			}
			it.cas = cas
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
// now is read only for a TTL over 30 days: a clock read per item is a
// syscall on some virtual machines.
func remainingTTL(t []byte, now func() time.Time) (ttl int64, live bool) {
	if string(t) == "-1" {
		return 0, true
	}
	left, err := strconv.ParseInt(string(t), 10, 64)
	if err != nil || left <= 0 || left > 1<<31 {
		return 0, false
	}
	if left > maxRelativeTTL {
		return now().Unix() + left, true
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
