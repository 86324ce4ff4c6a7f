package handoff

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The forwarder closes the window the bulk copy leaves open for clients
// that keep their connections (pymemcache's HashClient, libmemcached, the
// npm client given names): they look a slot's name up only when they
// connect, so they keep writing to the leaving Pod until its memcached
// stops, after the copy and its done marker. A write the source takes
// after the copy read its key would never reach the successor, which
// would serve the copied, older value (issue #27).
//
// So, for a hand-off whose source leaves (Replaced, Removed), a
// connection to the source asks for `watch mutations deletions` before
// the key dump starts, and every key the source logs as stored or
// deleted from then on is handed on again: read from the source (mg) and
// written to where the bulk copy sends that key in set mode (it is newer
// than anything the copy put there, or than what it read), or, when the
// last event was a deletion, deleted there. It runs while the bulk copy
// runs (so that what piles up is bounded by the lag, not by the copy's
// length) and after the done marker, which it never holds up, until the
// source's memcached closes the watch (it stopped), the hand-off's entry
// leaves the status, or maxForward passes.
//
// Moved and Grown sources stay and keep serving their other keys, and a
// Grown copy deletes from its source what it copied: forwarding its
// mutations would forward those deletions too. They get none.
//
// The race this accepts: a client that moved to the successor writes a
// key there a few milliseconds after the forwarder read the same key's
// older value from the source, and the forwarder's set lands after it;
// the successor keeps the older value. Both writers wrote the key within
// the forwarder's lag, as two clients racing on one key would without a
// hand-off.
//
// What memcached does not log is not forwarded: incr, decr and touch
// (memcached 1.6.45 logs stores and deletions only). A watcher that falls
// behind is told how many events it lost (skipped=N): counted, and those
// keys stay as the bulk copy left them.

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
	// wake has a value while keys wait.
	wake chan struct{}
}

func newPendingKeys(max int) *pendingKeys {
	return &pendingKeys{max: max, last: map[dumpKey]watchKind{}, wake: make(chan struct{}, 1)}
}

// add records k's event; false when the set is full and k not in it.
func (p *pendingKeys) add(k dumpKey, kind watchKind) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.last[k]; !ok {
		if len(p.order) >= p.max {
			return false
		}
		p.order = append(p.order, k)
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
	// there; gone were no longer on the source when read (deleted or
	// evicted since: a deletion event follows, or nothing is newer);
	// homeless had no destination.
	stored, bytes, deleted, gone, homeless atomic.Int64
	// dropped overflowed the pending keys; lost, memcached's skipped
	// events and the keys pending when the source closed.
	dropped, lost atomic.Int64
}

// forwarder hands on the mutations of a source that leaves.
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
		pending: newPendingKeys(maxKeys), watch: c, closed: make(chan struct{})}
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
				continue
			}
			if !f.pending.add(ev.key, ev.kind) {
				f.counts.dropped.Add(1)
			}
		}
	}
}

// stop ends the watch.
func (f *forwarder) stop() {
	f.watch.close()
	<-f.closed
}

// run forwards the pending keys until the watch ends and the keys logged
// before its end are forwarded, ctx ends or maxForward passes. A source
// that no longer answers ends it too: it stopped.
func (f *forwarder) run(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, maxForward)
	defer cancel()
	go func() {
		select {
		case <-ctx.Done():
			f.watch.close()
		case <-f.closed:
		}
	}()
	var src *conn
	dests := map[string]*conn{}
	defer func() {
		if src != nil {
			src.close()
		}
		for _, d := range dests {
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
		var err error
		if src == nil {
			if src, err = dial(ctx, f.dial, f.source, f.timeout, getBufs); err != nil {
				f.gone(k, err)
				return
			}
		}
		if err := f.forward(ctx, src, dests, k, kind); err != nil {
			var ce *connError
			if errors.As(err, &ce) && ce.addr == f.source {
				f.gone(k, err)
				return
			}
			// A destination that failed: this key is lost, the others
			// may yet go.
			f.counts.lost.Add(1)
			f.log.Debug("could not forward a mutation", "key", k.key, "error", err)
			if d, ok := dests[destAddr(err)]; ok {
				d.close()
				delete(dests, destAddr(err))
			}
		}
	}
}

// gone counts what is left when the source stopped answering.
func (f *forwarder) gone(k dumpKey, err error) {
	f.counts.lost.Add(1 + int64(f.pending.len()))
	f.log.Debug("the source no longer answers: forwarding ends", "key", k.key, "error", err)
}

func destAddr(err error) string {
	var ce *connError
	if errors.As(err, &ce) {
		return ce.addr
	}
	var pe *protocolError
	if errors.As(err, &pe) {
		return pe.addr
	}
	return ""
}

// forward hands one key on: deleted where its last event deleted it,
// else its current item from the source, written in set mode.
func (f *forwarder) forward(ctx context.Context, src *conn, dests map[string]*conn, k dumpKey, kind watchKind) error {
	to, ok := f.route(k.key)
	if !ok {
		f.counts.homeless.Add(1)
		return nil
	}
	d, ok := dests[to.addr]
	if !ok {
		var err error
		if d, err = dial(ctx, f.dial, to.addr, f.timeout, destBufs); err != nil {
			return err
		}
		dests[to.addr] = d
	}
	b := ""
	if k.binary {
		b = " b"
	}
	if kind == watchDeleted {
		answer, err := d.do("md "+k.key+b, nil)
		switch {
		case err != nil:
			return err
		case answer == "HD" || answer == "NF":
			f.counts.deleted.Add(1)
			return nil
		}
		return &protocolError{addr: d.addr, msg: fmt.Sprintf("md %s answered %q", k.key, answer)}
	}
	src.w.WriteString("mg " + k.key + b + " k v f t\r\n")
	if err := src.flush(); err != nil {
		return err
	}
	it, err := readItem(src, k)
	if err != nil {
		return err
	}
	if it == nil {
		f.counts.gone.Add(1)
		return nil
	}
	ttl, live := remainingTTL(it.ttl, f.now())
	if !live {
		f.counts.gone.Add(1)
		return src.discard(it.size)
	}
	header := fmt.Sprintf("ms %s %d%s T%d F%s\r\n", k.key, it.size, b, ttl, it.flags)
	d.nc.SetWriteDeadline(time.Now().Add(f.timeout + bytesTime(it.size)))
	d.w.WriteString(header)
	if err := src.copyValue(d.w, it.size); err != nil {
		// The destination's connection holds a cut ms: closed, and
		// memcached drops it.
		d.close()
		delete(dests, to.addr)
		return src.fail(err)
	}
	d.w.WriteString("\r\n")
	if err := d.flush(); err != nil {
		return err
	}
	answer, err := d.line()
	switch {
	case err != nil:
		return err
	case string(answer) == "HD":
		f.counts.stored.Add(1)
		f.counts.bytes.Add(it.size)
		return nil
	case bytes.HasPrefix(answer, []byte("SERVER_ERROR ")):
		f.counts.lost.Add(1)
		return nil
	}
	return &protocolError{addr: d.addr, msg: fmt.Sprintf("ms %s answered %q", k.key, answer)}
}

// logValues are the counts, for the log.
func (f *forwarder) logValues() []any {
	c := &f.counts
	return []any{"forwarded", c.stored.Load(), "forwarded_bytes", c.bytes.Load(), "forwarded_deletes", c.deleted.Load(),
		"forward_gone", c.gone.Load(), "forward_homeless", c.homeless.Load(), "forward_dropped", c.dropped.Load(), "forward_lost", c.lost.Load()}
}
