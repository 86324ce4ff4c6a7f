package handoff

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/example/memcached-operator/sync/contract"
)

// maxForward bounds a forwarder whose source never stops: no preStop
// waits longer (v1alpha1.MaxHandoffSeconds), and a Replaced or Removed
// entry leaves the status once its Pod is gone, which ends it sooner.
const maxForward = 2 * time.Hour

// watchKind is what a watch line tells.
type watchKind int

const (
	// watchOther is a line that names no mutation of an item: the OK
	// that starts the stream, a store that did not store, another type.
	watchOther watchKind = iota
	watchStored
	watchDeleted
	// watchSkipped is memcached telling the watcher it lost n events.
	watchSkipped
	// watchRecheck is no watch line: a key the forwarder deleted on its
	// destination while the bulk copy ran, queued again when the copy
	// ends (forwarder.copyEnded). Its destination loses it unless the
	// source holds it again (a store since, logged and forwarded in its
	// turn).
	watchRecheck
)

// watchEvent is one parsed watch line: the key as the meta protocol
// takes it (base64 and binary when the raw key is not printable), or the
// events lost.
type watchEvent struct {
	kind    watchKind
	key     dumpKey
	skipped int64
}

// parseWatchLine reads a line of `watch mutations deletions` (logger.c,
// _logger_parse_ise and _logger_parse_ide):
//
//	ts=T gid=G type=item_store key=K status=stored cmd=set ttl=0 clsid=1 cfd=20 size=3
//	ts=T gid=G type=deleted key=K cmd=delete clsid=1 size=3
//	skipped=N
//
// K is the raw key URI-encoded (every byte but ASCII letters, digits and
// -._~ as %XX), so it holds no space, and a binary key comes through
// whole.
func parseWatchLine(l []byte) (watchEvent, error) {
	if n, ok := bytes.CutPrefix(l, []byte("skipped=")); ok {
		v, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil || v < 0 {
			return watchEvent{}, fmt.Errorf("a watch line %q", l)
		}
		return watchEvent{kind: watchSkipped, skipped: v}, nil
	}
	var typ, key, status []byte
	for _, f := range bytes.Split(l, []byte(" ")) {
		name, value, ok := bytes.Cut(f, []byte("="))
		if !ok {
			continue
		}
		switch string(name) {
		case "type":
			typ = value
		case "key":
			key = value
		case "status":
			status = value
		}
	}
	var kind watchKind
	switch {
	case string(typ) == "item_store" && string(status) == "stored":
		kind = watchStored
	case string(typ) == "deleted":
		kind = watchDeleted
	default:
		return watchEvent{kind: watchOther}, nil
	}
	raw, err := uriDecode(key)
	if err != nil || len(raw) == 0 || len(raw) > maxKeyLength {
		return watchEvent{}, fmt.Errorf("a watch line %q: the key", l)
	}
	return watchEvent{kind: kind, key: metaKey(raw)}, nil
}

// maxKeyLength is memcached's longest key.
const maxKeyLength = 250

// uriDecode undoes memcached's uriencode: %XX is the byte XX.
func uriDecode(s []byte) ([]byte, error) {
	if bytes.IndexByte(s, '%') < 0 {
		return s, nil
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			out = append(out, s[i])
			continue
		}
		if i+2 >= len(s) {
			return nil, errors.New("a cut %XX")
		}
		b, err := strconv.ParseUint(string(s[i+1:i+3]), 16, 8)
		if err != nil {
			return nil, err
		}
		out = append(out, byte(b))
		i += 2
	}
	return out, nil
}

// metaKey is a raw key as meta commands take it: as it is when every
// byte is printable ASCII other than a space, else base64 with b.
func metaKey(raw []byte) dumpKey {
	for _, c := range raw {
		if c <= ' ' || c > '~' {
			return dumpKey{key: base64.StdEncoding.EncodeToString(raw), binary: true}
		}
	}
	return dumpKey{key: string(raw)}
}

// pendingKeys are the keys logged and not yet forwarded, each once, in
// the order first logged, with its last event's kind; at most max, the
// rest dropped (counted). Forwarding reads the key's current state from
// the source, so one entry stands for any number of writes.
type pendingKeys struct {
	mu    sync.Mutex
	max   int
	order []dumpKey
	last  map[dumpKey]watchKind
	// added counts the keys ever put in order: take hands them out in
	// that order, so once the forwarder finished n keys, it finished the
	// first n added (forwarder.catchUp).
	added int64
	// wake has a value while keys wait.
	wake chan struct{}
}

func newPendingKeys(max int) *pendingKeys {
	return &pendingKeys{max: max, last: map[dumpKey]watchKind{}, wake: make(chan struct{}, 1)}
}

// add records k's event; false when the set is full and k not in it. A
// recheck leaves a pending store or deletion as it is: either settles
// the key on the destination from the source's state after the copy.
func (p *pendingKeys) add(k dumpKey, kind watchKind) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.last[k]; !ok {
		if len(p.order) >= p.max {
			return false
		}
		p.order = append(p.order, k)
		p.added++
	} else if kind == watchRecheck {
		return true
	}
	p.last[k] = kind
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return true
}

// take removes and returns the oldest key. It is removed before the
// forwarder reads the source, so that a write logged after the read adds
// it again.
func (p *pendingKeys) take() (dumpKey, watchKind, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.order) == 0 {
		return dumpKey{}, watchOther, false
	}
	k := p.order[0]
	p.order[0] = dumpKey{}
	p.order = p.order[1:]
	kind := p.last[k]
	delete(p.last, k)
	return k, kind, true
}

func (p *pendingKeys) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.order)
}

// forwardCounts are a forwarder's.
type forwardCounts struct {
	// stored and bytes were written to a destination; deleted, deleted
	// there (forwarded deletions, and keys the source no longer held
	// when read); gone were no longer on the source when read (deleted or
	// evicted since); homeless had no destination.
	stored, bytes, deleted, gone, homeless atomic.Int64
	// dropped overflowed the pending keys (or the keys to check again
	// after the copy); lost, memcached's skipped events, the keys whose
	// forwarding failed and the keys pending when the source closed.
	dropped, lost atomic.Int64
	// cleared are lost keys deleted on their destination (clear).
	cleared atomic.Int64
}

// forwarder hands on the mutations of a source that leaves (the package
// doc says why, and what it accepts).
type forwarder struct {
	source  string
	route   route
	dial    Dialer
	timeout time.Duration
	now     func() time.Time
	log     *slog.Logger
	pending *pendingKeys
	counts  forwardCounts

	watch *conn
	// closed is closed when the watch ends (the source closed it, or
	// the forwarder stops).
	closed chan struct{}
	// watchErr is why it ended.
	watchErr error
	// ended is closed when run returns.
	ended chan struct{}
	// finished counts the keys run took and is done with (forwarded,
	// failed or homeless), for catchUp.
	finished atomic.Int64

	// src is run's connection to the source, nil until dialled and
	// after it failed or lost its place in the stream.
	src *conn

	mu sync.Mutex
	// copying holds until copyEnded: while the bulk copy runs, a key
	// the forwarder deletes on a destination may still be in its
	// read-ahead (read from the source, not yet written), and the copy's
	// add would put the deleted value back. Those keys are kept in
	// recheck (at most pending.max; counted dropped past that) and queued
	// again when it ends.
	copying bool
	recheck map[dumpKey]bool
	// mark is the key catchUp stores on the source to find where the
	// watch stream stood; marked takes the number of keys added to
	// pending when the reader met it.
	mark   string
	marked chan int64
}

// errNoWatch is a source that refused `watch` (-W, too many watchers):
// the copy goes on without forwarding.
var errNoWatch = errors.New("the source refused to watch its mutations")

// startForward asks the source for its mutations and returns once it
// watches: every write it takes from then on is logged to the forwarder.
func startForward(ctx context.Context, cp *copier, maxKeys int, log *slog.Logger) (*forwarder, error) {
	c, err := dial(ctx, cp.dial, cp.source, cp.timeout, dumpBufs)
	if err != nil {
		return nil, err
	}
	answer, err := c.do("watch mutations deletions", nil)
	if err != nil {
		c.close()
		return nil, err
	}
	if answer != "OK" {
		c.close()
		return nil, fmt.Errorf("%w: %s answered %q", errNoWatch, cp.source, answer)
	}
	f := &forwarder{source: cp.source, route: cp.route, dial: cp.dial, timeout: cp.timeout, now: cp.now, log: log,
		pending: newPendingKeys(maxKeys), watch: c, closed: make(chan struct{}), ended: make(chan struct{}),
		copying: true, recheck: map[dumpKey]bool{}}
	go f.read()
	return f, nil
}

// read takes the watch's lines into the pending keys until the
// connection ends.
func (f *forwarder) read() {
	defer close(f.closed)
	defer f.watch.close()
	for {
		// The stream may be quiet for long: no deadline, the forwarder
		// closes the connection to stop it.
		f.watch.nc.SetReadDeadline(time.Time{})
		l, err := f.watch.r.ReadSlice('\n')
		if err != nil {
			f.watchErr = err
			return
		}
		ev, err := parseWatchLine(bytes.TrimSuffix(l[:len(l)-1], []byte{'\r'}))
		if err != nil {
			f.watchErr = &protocolError{addr: f.source, msg: err.Error()}
			return
		}
		switch ev.kind {
		case watchSkipped:
			f.counts.lost.Add(ev.skipped)
		case watchStored, watchDeleted:
			if ev.key.reserved() {
				if ev.kind == watchStored {
					f.sawMark(ev.key)
				}
				continue
			}
			if !f.pending.add(ev.key, ev.kind) {
				f.counts.dropped.Add(1)
			}
		}
	}
}

// sawMark tells catchUp, when k is its mark, how many keys were added to
// pending by then: every event logged before the mark's store.
func (f *forwarder) sawMark(k dumpKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mark == "" || k.key != f.mark {
		return
	}
	f.mark = ""
	f.pending.mu.Lock()
	n := f.pending.added
	f.pending.mu.Unlock()
	f.marked <- n
}

// stop ends the watch.
func (f *forwarder) stop() {
	f.watch.close()
	<-f.closed
}

// copyEnded is told that the bulk copy wrote its last item: the keys
// deleted on a destination meanwhile are queued again (watchRecheck), so
// that a deletion the copy undid is applied after it.
func (f *forwarder) copyEnded() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.copying = false
	for k := range f.recheck {
		if !f.pending.add(k, watchRecheck) {
			f.counts.dropped.Add(1)
		}
	}
	f.recheck = nil
}

// deletedThere notes a key the forwarder deleted on its destination.
func (f *forwarder) deletedThere(k dumpKey) {
	f.counts.deleted.Add(1)
	f.checkAfterCopy(k)
}

// checkAfterCopy keeps k, deleted on its destination, to be checked again
// once the bulk copy ended, if it still runs (see copying).
func (f *forwarder) checkAfterCopy(k dumpKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.copying || f.recheck[k] {
		return
	}
	if len(f.recheck) >= f.pending.max {
		f.counts.dropped.Add(1)
		return
	}
	f.recheck[k] = true
}

// maxCatchUp bounds how long the done marker waits for the forwarder to
// hand on what the source logged before the copy ended (catchUp): a
// forwarder that falls behind must not hold the source's stop up. It is
// contract.MaxCatchUp, which fits in the preStop's bound with the
// hand-off's other timings.
const maxCatchUp = contract.MaxCatchUp

// markKey is catchUp's mark: a reserved key (never copied nor
// forwarded), of this forwarder alone.
func markKey(now time.Time) string {
	return contract.ReservedKeyPrefix + "handoff/forwarded-" + strconv.FormatInt(now.UnixNano(), 36)
}

// catchUp waits, at most wait, until the forwarder handed on every key
// the source logged before catchUp began, so that the done marker, which
// lets the source's memcached stop within a second, does not cut off the
// writes still queued. It stores a mark on the source through c and
// waits for the watch to bring it back, twice: memcached's logger thread
// gathers each worker thread's lines in turn, so a line another thread
// logged before the first mark may follow it in the same pass, but not a
// second mark stored once the first came back. By then every earlier
// event is in pending, in order, and the forwarder is caught up once it
// finished that many keys. It tells whether it caught up; it never fails
// the hand-off.
func (f *forwarder) catchUp(c *conn, wait time.Duration) (bool, error) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	defer func() {
		f.mu.Lock()
		f.mark = ""
		f.mu.Unlock()
	}()
	var n int64
	for range 2 {
		key := markKey(time.Now())
		marked := make(chan int64, 1)
		f.mu.Lock()
		f.mark, f.marked = key, marked
		f.mu.Unlock()
		if ok, err := c.store(key, []byte("1"), "T60"); err != nil || !ok {
			return false, err
		}
		select {
		case n = <-marked:
		case <-f.ended:
			return false, nil
		case <-deadline.C:
			return false, nil
		}
	}
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for f.finished.Load() < n {
		select {
		case <-poll.C:
		case <-f.ended:
			return false, nil
		case <-deadline.C:
			return false, nil
		}
	}
	return true, nil
}

// run forwards the pending keys until the watch ends and the keys logged
// before its end are forwarded, ctx ends or maxForward passes. A source
// that no longer answers ends it too: it stopped.
func (f *forwarder) run(ctx context.Context) {
	defer close(f.ended)
	ctx, cancel := context.WithTimeout(ctx, maxForward)
	defer cancel()
	go func() {
		select {
		case <-ctx.Done():
			f.watch.close()
		case <-f.closed:
		}
	}()
	conns := map[string]*conn{}
	defer func() {
		if f.src != nil {
			f.src.close()
			f.src = nil
		}
		for _, d := range conns {
			d.close()
		}
	}()
	for {
		k, kind, ok := f.pending.take()
		if !ok {
			select {
			case <-f.pending.wake:
				continue
			case <-f.closed:
				if f.pending.len() > 0 {
					continue
				}
				return
			case <-ctx.Done():
				return
			}
		}
		if ctx.Err() != nil {
			f.counts.lost.Add(1 + int64(f.pending.len()))
			return
		}
		if f.src == nil {
			var err error
			if f.src, err = dial(ctx, f.dial, f.source, f.timeout, getBufs); err != nil {
				f.gone(ctx, conns, k, err)
				return
			}
		}
		if err := f.forward(ctx, conns, k, kind); err != nil {
			// This key is lost; forward closed the connection that
			// failed, and the next key dials it again: a source that
			// stopped refuses, and forwarding ends there.
			f.counts.lost.Add(1)
			f.log.Debug("could not forward a mutation", "key", k.key, "error", err)
			f.clear(ctx, conns, k)
		}
		f.finished.Add(1)
	}
}

// gone ends forwarding when the source stopped answering: the keys still
// pending are lost (their last writes died with the source's memcached)
// and cleared from their destinations. A client that keeps its connection
// writes until the source stops, so on a loaded machine the forwarder is
// behind by up to every key written in its last few milliseconds.
func (f *forwarder) gone(ctx context.Context, conns map[string]*conn, k dumpKey, err error) {
	f.log.Debug("the source no longer answers: forwarding ends", "key", k.key, "error", err)
	for ok := true; ok; k, _, ok = f.pending.take() {
		f.counts.lost.Add(1)
		f.clear(ctx, conns, k)
		f.finished.Add(1)
	}
}

// clear deletes a lost key on its destination, which may hold an older
// value of it (the bulk copy's, or an earlier forward's) that a client
// would read as current: a miss instead, the same as the key evicted.
// A destination that fails too leaves it (counted lost, not cleared).
func (f *forwarder) clear(ctx context.Context, conns map[string]*conn, k dumpKey) {
	to, ok := f.route(k.key)
	if !ok {
		return
	}
	d, err := f.connTo(ctx, conns, to.addr)
	if err == nil {
		err = f.deleteThere(conns, d, k)
	}
	if err != nil {
		f.log.Debug("could not clear a lost key on its destination", "key", k.key, "error", err)
		return
	}
	f.counts.cleared.Add(1)
	// The bulk copy may still hold the key in its read-ahead.
	f.checkAfterCopy(k)
}

// connTo is the open connection to the destination addr, dialled if there
// is none.
func (f *forwarder) connTo(ctx context.Context, conns map[string]*conn, addr string) (*conn, error) {
	if d, ok := conns[addr]; ok {
		return d, nil
	}
	d, err := dial(ctx, f.dial, addr, f.timeout, destBufs)
	if err != nil {
		return nil, err
	}
	conns[addr] = d
	return d, nil
}

// deleteThere deletes k on d (absent is as good); a connection that
// fails, or answers out of step, is closed and dropped from conns.
func (f *forwarder) deleteThere(conns map[string]*conn, d *conn, k dumpKey) error {
	b := ""
	if k.binary {
		b = " b"
	}
	answer, err := d.do("md "+k.key+b, nil)
	if err == nil && answer != "HD" && answer != "NF" {
		err = &protocolError{addr: d.addr, msg: fmt.Sprintf("md %s answered %q", k.key, answer)}
	}
	if err != nil {
		d.close()
		delete(conns, d.addr)
		return d.fail(err)
	}
	return nil
}

// errWriter passes writes on and keeps the first error, so that a copy
// between two connections tells which one failed.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	n, err := e.w.Write(p)
	if err != nil && e.err == nil {
		e.err = err
	}
	return n, err
}

// forward hands one key on: deleted where its last event deleted it,
// else its current item from the source, written in set mode, or, if the
// source no longer holds it, deleted there too. A recheck deletes it
// there unless the source holds it.
//
// Deleting where the source lost a key may delete a value a client that
// moved wrote to the successor since: the successor then misses the key
// (the client reads it again from its origin), where keeping it could
// serve a value the source's clients deleted after it was copied.
//
// A connection that fails, or whose answers no longer make sense, is
// closed: the destination's is dropped from conns, the source's (f.src)
// set to nil, so that the next key finds both in step.
func (f *forwarder) forward(ctx context.Context, conns map[string]*conn, k dumpKey, kind watchKind) error {
	to, ok := f.route(k.key)
	if !ok {
		f.counts.homeless.Add(1)
		return nil
	}
	d, err := f.connTo(ctx, conns, to.addr)
	if err != nil {
		return err
	}
	kf := &keyForward{f: f, conns: conns, addr: to.addr, dest: d, src: f.src, k: k}
	if k.binary {
		kf.b = " b"
	}
	switch kind {
	case watchDeleted:
		return kf.del()
	case watchRecheck:
		return kf.recheck()
	}
	return kf.copyItem()
}

// keyForward is one key being forwarded (forwarder.forward): the key, and
// the connections to its source and its destination, each closed when it
// fails.
type keyForward struct {
	f     *forwarder
	conns map[string]*conn
	addr  string // the destination's
	dest  *conn
	src   *conn
	k     dumpKey
	b     string // " b" for a binary key
}

// destFailed closes the destination's connection and drops it from conns.
func (kf *keyForward) destFailed(err error) error {
	kf.dest.close()
	delete(kf.conns, kf.addr)
	return kf.dest.fail(err)
}

// srcFailed closes the source's connection, for the next key to dial.
func (kf *keyForward) srcFailed(err error) error {
	kf.src.close()
	kf.f.src = nil
	return fmt.Errorf("the source: %w", kf.src.fail(err))
}

// del deletes the key on its destination.
func (kf *keyForward) del() error {
	if err := kf.f.deleteThere(kf.conns, kf.dest, kf.k); err != nil {
		return err
	}
	kf.f.deletedThere(kf.k)
	return nil
}

// recheck deletes, after the bulk copy, a key the forwarder deleted while
// it ran, unless the source holds it again.
func (kf *keyForward) recheck() error {
	answer, err := kf.src.do("mg "+kf.k.key+kf.b, nil)
	switch {
	case err != nil:
		return kf.srcFailed(err)
	case answer == "EN":
		return kf.del()
	case answer == "HD":
		// Stored again since: that store was logged, and is
		// forwarded in its turn.
		return nil
	}
	return kf.srcFailed(&protocolError{addr: kf.src.addr, msg: fmt.Sprintf("mg %s answered %q", kf.k.key, answer)})
}

// copyItem reads the key's current item from the source and writes it to
// its destination in set mode, or deletes it there when the source no
// longer holds it.
func (kf *keyForward) copyItem() error {
	f, src, d, k := kf.f, kf.src, kf.dest, kf.k
	src.w.WriteString("mg " + k.key + kf.b + " k v f t\r\n")
	if err := src.flush(); err != nil {
		return kf.srcFailed(err)
	}
	it, err := readItem(src, k)
	if err != nil {
		return kf.srcFailed(err)
	}
	if it == nil {
		f.counts.gone.Add(1)
		return kf.del()
	}
	ttl, live := remainingTTL(it.ttl, f.now)
	if !live {
		f.counts.gone.Add(1)
		if err := src.discard(it.size); err != nil {
			return kf.srcFailed(err)
		}
		return kf.del()
	}
	header := fmt.Sprintf("ms %s %d%s T%d F%s\r\n", k.key, it.size, kf.b, ttl, it.flags)
	d.nc.SetWriteDeadline(time.Now().Add(f.timeout + bytesTime(it.size)))
	d.w.WriteString(header)
	dw := &errWriter{w: d.w}
	if err := src.copyValue(dw, it.size); err != nil {
		// Both connections stopped mid-value: the destination's holds a
		// cut ms (closed, memcached drops it), the source's the rest of
		// the value.
		src.close()
		f.src = nil
		if dw.err != nil {
			return kf.destFailed(dw.err)
		}
		return kf.srcFailed(err)
	}
	d.w.WriteString("\r\n")
	if err := d.flush(); err != nil {
		return kf.destFailed(err)
	}
	answer, err := d.line()
	switch {
	case err != nil:
		return kf.destFailed(err)
	case string(answer) == "HD":
		f.counts.stored.Add(1)
		f.counts.bytes.Add(it.size)
		return nil
	case bytes.HasPrefix(answer, []byte("SERVER_ERROR ")):
		// Refused (too large, out of memory): counted lost by run.
		return fmt.Errorf("%s: ms %s answered %q", d.addr, k.key, answer)
	}
	return kf.destFailed(&protocolError{addr: d.addr, msg: fmt.Sprintf("ms %s answered %q", k.key, answer)})
}

// logValues are the counts, for the log.
func (f *forwarder) logValues() []any {
	c := &f.counts
	return []any{"forwarded", c.stored.Load(), "forwarded_bytes", c.bytes.Load(), "forwarded_deletes", c.deleted.Load(),
		"forward_gone", c.gone.Load(), "forward_homeless", c.homeless.Load(), "forward_dropped", c.dropped.Load(), "forward_lost", c.lost.Load(), "forward_cleared", c.cleared.Load()}
}

// forward starts forwarding a leaving source's writes (forward.go), on
// ctx: the hand-off's, so that it outlives the bulk copy and its done
// marker, and ends with the entry. A source that will not be watched
// (started with -W, or with too many watchers) is copied without: the
// writes it takes after the copy reads their keys are not handed on, as
// before forwarding.
func (r *Runner) forward(ctx context.Context, log *slog.Logger, cp *copier, leaving bool) (*forwarder, <-chan struct{}) {
	if !leaving || r.hooks.noForward {
		return nil, nil
	}
	fw, err := startForward(ctx, cp, r.opts.ForwardKeys, log)
	if err != nil {
		log.Warn("could not watch the source's writes: those it takes after the copy reads their keys will not be handed on", "error", err)
		return nil, nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fw.run(ctx)
	}()
	return fw, done
}
