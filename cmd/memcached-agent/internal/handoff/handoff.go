package handoff

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/example/memcached-operator/cmd/internal/program"
	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/sync/slots"
)

// Reporter takes the copies' progress: the agent writes it into the data
// of ConfigMap NAME-agent (or a file), where the hook reads it.
type Reporter interface {
	// Report is a copy's progress, under its report key
	// (contract.ReportKey: the source Pod's name, and a Moved one's slot,
	// a Grown one's first added slot and its Pod).
	Report(ctx context.Context, key string, p v1alpha1.HandoffProgress) error
	// Forget removes a report whose hand-off left the status.
	Forget(ctx context.Context, key string) error
	// Event tells users how a copy ended (an Event on the Memcached).
	Event(ctx context.Context, warning bool, reason, message string) error
}

// Observer is told what the copies do, for metrics.
type Observer interface {
	// Handed counts items and bytes handed on since the last call.
	Handed(items, bytes int64)
	// Ended is a copy that ended: done, failed or cancelled.
	Ended(result string, d time.Duration)
}

// The results an Observer is told.
const (
	ResultDone      = "done"
	ResultFailed    = "failed"
	ResultCancelled = "cancelled"
)

// Results are every result, for metrics that show each from the start.
var Results = []string{ResultDone, ResultFailed, ResultCancelled}

// Options tune the runner; the zero value of each field takes its
// default.
type Options struct {
	// Self names this agent in the lock (its Pod's name).
	Self string
	// Port is memcached's, 11211.
	Port int
	// Dial opens connections (a net.Dialer's by default).
	Dial Dialer
	// Timeout bounds each connection, read and write (10 s).
	Timeout time.Duration
	// Batch is the number of items per pipelined batch (100).
	Batch int
	// Retries is how often a copy starts again after a connection
	// failure (3).
	Retries int
	// LockTTL is the lock's TTL, renewed every third of it
	// (contract.LockTTL): how long an agent that died holds a copy up.
	LockTTL time.Duration
	// ReportEvery is the time between two progress reports (2 s).
	ReportEvery time.Duration
	// Settle is how long a copy waits after its entry appears, for the
	// clients to move to the slot's new owner (the proxies switch their
	// pool within a second): a write the leaving Pod took after the copy
	// read its key would never reach the new owner, which would serve the
	// older value. A write to the new owner is never overwritten (add
	// mode). 0: no wait (the agent's flag defaults to contract.ClientMove).
	Settle time.Duration
	// Now is the clock (time.Now).
	Now func() time.Time
	// ForwardKeys bounds the keys a leaving source logged as written and
	// the forwarder has not handed on yet (10,000: about 3.4 MB at
	// memcached's longest keys); the rest are dropped and counted.
	ForwardKeys int

	// beforeGet, in tests, runs before each batch is read from the
	// source.
	beforeGet func([]dumpKey)
	// keepGrown, in tests, leaves a Grown copy's items on its source,
	// to show what removing them prevents.
	keepGrown bool
	// beforeRemove, in tests, runs before an item is deleted from the
	// source.
	beforeRemove func(key string)
	// noForward, in tests, forwards no mutation, to show what forwarding
	// prevents.
	noForward bool
	// afterForward, in tests, is told a forwarder's counts once it ends.
	afterForward func(*forwardCounts)
}

func (o Options) withDefaults() Options {
	if o.Port == 0 {
		o.Port = contract.Port
	}
	if o.Dial == nil {
		o.Dial = (&net.Dialer{KeepAlive: 15 * time.Second}).DialContext
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Batch == 0 {
		o.Batch = 100
	}
	if o.Retries == 0 {
		o.Retries = 3
	}
	if o.LockTTL == 0 {
		o.LockTTL = contract.LockTTL
	}
	if o.ReportEvery == 0 {
		o.ReportEvery = 2 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ForwardKeys == 0 {
		o.ForwardKeys = 10000
	}
	return o
}

// Runner runs the copies the status asks for, each once, and no other.
type Runner struct {
	opts     Options
	reporter Reporter
	observer Observer
	logger   *slog.Logger

	// table is the slot table of the last status: every route reads it
	// as it changes (a Replaced slot's holder, where a Removed, Moved or
	// Grown item's key hashes).
	table atomic.Pointer[[]v1alpha1.Slot]

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// jobs are the hand-offs of this process by source Pod: running, or
	// ended (kept so that each runs once).
	jobs map[string]*job
	// next is a hand-off to start once the Pod's job ends (its entry
	// changed: one copy of a source at a time).
	next map[string]v1alpha1.Handoff
	// reported are, by Pod, the report keys (contract.ReportKey) this
	// process reported under.
	reported map[string][]string
	stopped  bool
}

// job is one hand-off.
type job struct {
	id     string
	cancel context.CancelFunc
	ended  bool
	// superseded: its entry changed or went while it ran.
	superseded bool
}

// New returns a Runner; Update gives it work, Stop ends it.
func New(opts Options, reporter Reporter, observer Observer, logger *slog.Logger) *Runner {
	ctx, cancel := context.WithCancel(context.Background())
	return &Runner{
		opts: opts.withDefaults(), reporter: reporter, observer: observer, logger: logger,
		ctx: ctx, cancel: cancel,
		jobs: map[string]*job{}, next: map[string]v1alpha1.Handoff{}, reported: map[string][]string{},
	}
}

// jobID identifies a hand-off: its source Pod, reason and destination.
// The same id is never run twice; another id for the same Pod replaces
// the one that runs.
func jobID(h v1alpha1.Handoff) string {
	slot := "-"
	if h.Slot != nil {
		slot = strconv.Itoa(int(*h.Slot))
	}
	return strings.Join([]string{string(h.Reason), h.Pod, h.IP, slot, h.To, h.ToIP}, " ")
}

// wanted tells whether a hand-off asks the agent for anything.
func wanted(h v1alpha1.Handoff) bool {
	switch h.Reason {
	case v1alpha1.HandoffReplaced, v1alpha1.HandoffRemoved, v1alpha1.HandoffMoved, v1alpha1.HandoffNoSlot:
		return h.Pod != ""
	case v1alpha1.HandoffGrown:
		// Listed unplanned until every added slot serves.
		return h.Pod != "" && h.Planned()
	}
	return false
}

// Update takes a status: its hand-offs and slot table. It starts the
// copies it asks for that have not run, cancels those whose entry is gone
// or changed, and forgets the reports of Pods no longer listed. It never
// blocks on a copy.
func (r *Runner) Update(handoffs []v1alpha1.Handoff, table []v1alpha1.Slot) {
	t := slices.Clone(table)
	r.table.Store(&t)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	want := map[string]v1alpha1.Handoff{}
	for _, h := range handoffs {
		if _, dup := want[h.Pod]; wanted(h) && !dup {
			want[h.Pod] = h
		}
	}
	for pod, j := range r.jobs {
		h, ok := want[pod]
		if ok && jobID(h) == j.id {
			continue
		}
		if !j.ended {
			j.cancel()
			j.superseded = true
		}
		if ok {
			r.next[pod] = h
		} else {
			delete(r.next, pod)
		}
		if j.ended {
			r.ended(pod)
		}
	}
	for pod, h := range want {
		if _, ok := r.jobs[pod]; !ok {
			r.start(h)
		}
	}
}

// ended moves on from a Pod's job that ended: to the hand-off that
// replaced it, or, if none, out of the runner, with its report.
func (r *Runner) ended(pod string) {
	delete(r.jobs, pod)
	if h, ok := r.next[pod]; ok {
		delete(r.next, pod)
		r.start(h)
		return
	}
	if keys := r.reported[pod]; len(keys) > 0 {
		delete(r.reported, pod)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			for _, key := range keys {
				retry(r.ctx, func(ctx context.Context) error { return r.reporter.Forget(ctx, key) }, func(err error) {
					r.logger.Warn("could not remove a hand-off's report", "pod", pod, "key", key, "error", err)
				})
			}
		}()
	}
}

// retry runs f, each attempt bounded to 10 s, until it succeeds or ctx
// ends, waiting 1 s, 2 s... up to 30 s between attempts, and tells failed
// of each failure.
func retry(ctx context.Context, f func(context.Context) error, failed func(error)) {
	for wait := time.Second; ; wait = min(2*wait, 30*time.Second) {
		attempt, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := f(attempt)
		cancel()
		if err == nil {
			return
		}
		failed(err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// start runs h; r.mu is held.
func (r *Runner) start(h v1alpha1.Handoff) {
	ctx, cancel := context.WithCancel(r.ctx)
	j := &job{id: jobID(h), cancel: cancel}
	r.jobs[h.Pod] = j
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer cancel()
		r.run(ctx, h)
		r.mu.Lock()
		defer r.mu.Unlock()
		j.ended = true
		// Its entry changed or went meanwhile: move on now. Otherwise it
		// stays, ended, so that it does not run again.
		if j.superseded && !r.stopped && r.jobs[h.Pod] == j {
			r.ended(h.Pod)
		}
	}()
}

// Stop cancels every copy and waits for them to release their locks.
func (r *Runner) Stop() {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
}

// report sends h's progress under its report key, and remembers that it
// did. A copy's last report (Done or Failed) is sent again until it goes
// through or ctx ends (the entry changed, the agent stops): the hand-off
// of a source that stays (Moved, Grown) leaves the status only once the
// hook reads it.
func (r *Runner) report(ctx context.Context, h v1alpha1.Handoff, p v1alpha1.HandoffProgress) {
	key := contract.ReportKey(h)
	r.mu.Lock()
	if !slices.Contains(r.reported[h.Pod], key) {
		r.reported[h.Pod] = append(r.reported[h.Pod], key)
	}
	r.mu.Unlock()
	send := func(ctx context.Context) error { return r.reporter.Report(ctx, key, p) }
	failed := func(err error) {
		r.logger.Warn("could not report a hand-off's progress", "pod", h.Pod, "key", key, "state", p.State, "error", err)
	}
	if p.State != v1alpha1.HandoffCopying {
		retry(ctx, send, failed)
		return
	}
	attempt, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := send(attempt); err != nil {
		failed(err)
	}
}

// run does one hand-off, to its end.
func (r *Runner) run(ctx context.Context, h v1alpha1.Handoff) {
	log := r.logger.With("pod", h.Pod, "reason", string(h.Reason))
	source := net.JoinHostPort(h.IP, strconv.Itoa(r.opts.Port))
	if h.IP == "" {
		r.failed(ctx, log, h, time.Now(), &counts{}, errors.New("the hand-off names no address for its Pod"))
		return
	}
	if h.Reason == v1alpha1.HandoffNoSlot {
		// Nothing to copy: the preStop may stop waiting at once.
		var c *conn
		start := time.Now()
		err := withControl(ctx, r.opts.Dial, source, r.opts.Timeout, r.opts.Retries, &c, markDone)
		if c != nil {
			c.close()
		}
		switch {
		case ctx.Err() != nil:
		case err != nil:
			r.report(ctx, h, v1alpha1.HandoffProgress{State: v1alpha1.HandoffFailed, Message: "setting the done marker: " + err.Error()})
			log.Warn("could not set the done marker", "error", err)
		default:
			r.report(ctx, h, v1alpha1.HandoffProgress{State: v1alpha1.HandoffDone, Seconds: int64(time.Since(start).Seconds())})
			log.Info("nothing to hand on: done marker set")
		}
		return
	}

	if r.opts.Settle > 0 {
		log.Debug("waiting for clients to move to the slot's new owner", "settle", r.opts.Settle)
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.opts.Settle):
		}
	}
	var rt route
	switch h.Reason {
	case v1alpha1.HandoffReplaced:
		_, successorIP, _ := h.Successor()
		if _, ok := h.TakenSlot(); !ok || successorIP == "" {
			r.failed(ctx, log, h, time.Now(), &counts{}, errors.New("the hand-off names no slot, or no address for the Pod that took it"))
			return
		}
		rt = r.holder(h)
	case v1alpha1.HandoffGrown:
		rt = r.added(h)
	default:
		rt = r.place(h)
	}
	r.copy(ctx, log, h, source, rt)
}

// holder routes a Replaced Pod's items to the Pod that holds its slot in
// the slot table as it is now, when that Pod is Serving and is not the
// source: after the settle, a status that landed since may name another
// holder (its entry then changes, and this copy is cancelled), and no item
// goes to a Pod the current table does not name.
func (r *Runner) holder(h v1alpha1.Handoff) route {
	taken, _ := h.TakenSlot()
	slot := int(taken)
	return func(string) (destination, bool) {
		table := *r.table.Load()
		if slot >= len(table) {
			return destination{}, false
		}
		s := table[slot]
		if s.State != v1alpha1.SlotServing || s.IP == "" || s.Pod == h.Pod || s.IP == h.IP {
			return destination{}, false
		}
		return destination{addr: net.JoinHostPort(s.IP, strconv.Itoa(r.opts.Port)), pod: s.Pod}, true
	}
}

// place routes Removed and Moved items: each to the slot its key hashes
// to in the slot table as it is now, as the proxy does (slots.Place over
// every slot, in order), when that slot is Serving and not the source.
func (r *Runner) place(h v1alpha1.Handoff) route {
	return func(key string) (destination, bool) {
		table := *r.table.Load()
		if len(table) == 0 {
			return destination{}, false
		}
		s := table[slots.Place([]byte(key), len(table))]
		if s.State != v1alpha1.SlotServing || s.IP == "" || s.Pod == h.Pod || s.IP == h.IP {
			return destination{}, false
		}
		return destination{addr: net.JoinHostPort(s.IP, strconv.Itoa(r.opts.Port)), pod: s.Pod}, true
	}
}

// added routes a Grown Pod's items: each whose key hashes, in the slot
// table as it is now, to a slot at or above the first one the scale-up
// added goes there when that slot is Serving. The others stay: with jump
// hash a scale-up moves keys to the added slots only, so an item whose
// key hashes to another old slot is one the source kept from an earlier
// change, which no client asks it for; copied in add mode, it could put
// an older value back in front of clients where the owner deleted or
// evicted the key.
func (r *Runner) added(h v1alpha1.Handoff) route {
	firstAdded, _ := h.FirstAdded()
	first := int(firstAdded)
	return func(key string) (destination, bool) {
		table := *r.table.Load()
		if len(table) == 0 {
			return destination{stay: true}, false
		}
		n := slots.Place([]byte(key), len(table))
		if n < first {
			return destination{stay: true}, false
		}
		s := table[n]
		if s.State != v1alpha1.SlotServing || s.IP == "" || s.Pod == h.Pod || s.IP == h.IP {
			return destination{}, false
		}
		return destination{addr: net.JoinHostPort(s.IP, strconv.Itoa(r.opts.Port)), pod: s.Pod}, true
	}
}

// copy takes the source's lock (waiting while another agent holds it,
// ending if that one finishes), copies while renewing it, marks the
// source and reports: copyJob's phases, in order.
func (r *Runner) copy(ctx context.Context, log *slog.Logger, h v1alpha1.Handoff, source string, rt route) {
	j := &copyJob{r: r, ctx: ctx, log: log, h: h, id: jobID(h), source: source,
		leaving: h.Reason != v1alpha1.HandoffMoved && h.Reason != v1alpha1.HandoffGrown}
	defer j.closeControl()
	if !j.lock() {
		return
	}
	err := j.bulkCopy(rt)
	if err == nil {
		err = j.finish()
	}
	j.conclude(err)
	j.endForwarding(err)
}

// copyJob is one hand-off's copy, as Runner.copy runs it: its source and
// the control connection to it (the lock, the markers), and once the lock
// is held, the copy's counts, its forwarder and how it ended.
type copyJob struct {
	r   *Runner
	ctx context.Context
	log *slog.Logger
	h   v1alpha1.Handoff
	// id names the copy on the source (jobID); leaving is a source that
	// gets DoneKey and is forwarded (Replaced, Removed).
	id      string
	leaving bool
	source  string
	// ctl is the control connection, nil until dialled and after it
	// failed.
	ctl *conn

	start time.Time
	cnt   *counts
	took  time.Duration
	// done is the report a copy that ends well sends, as the bulk copy
	// left it.
	done   v1alpha1.HandoffProgress
	fw     *forwarder
	fwDone <-chan struct{}
}

// control runs f on the control connection, dialled again after a
// connection failure (withControl).
func (j *copyJob) control(f func(*conn) error) error {
	return withControl(j.ctx, j.r.opts.Dial, j.source, j.r.opts.Timeout, j.r.opts.Retries, &j.ctl, f)
}

func (j *copyJob) closeControl() {
	if j.ctl != nil {
		j.ctl.close()
	}
}

// lock takes the source's lock, waiting while another agent holds it. It
// is false when nothing is left to do: the copy finished (another agent's,
// whose last report it sends again), taking the lock failed (reported), or
// ctx ended.
func (j *copyJob) lock() bool {
	waitingFor := ""
	for {
		done, held, holder, last, err := j.lookAndLock()
		switch {
		case j.ctx.Err() != nil:
			return false
		case err != nil:
			j.r.failed(j.ctx, j.log, j.h, time.Now(), &counts{}, fmt.Errorf("taking the copy's lock: %w", err))
			return false
		case done:
			j.log.Info("another agent handed the items on")
			if last != nil {
				// The copier's own report, again: it may have died
				// before it sent it.
				j.r.report(j.ctx, j.h, *last)
			}
			return false
		case held:
			return true
		}
		if holder != waitingFor && holder != "" {
			waitingFor = holder
			j.log.Info("another agent copies; waiting for it to finish, or for its lock to expire", "holder", holder)
		}
		select {
		case <-time.After(j.r.opts.LockTTL / 5):
		case <-j.ctx.Done():
			return false
		}
	}
}

// lookAndLock looks, on the control connection, whether the copy is
// finished (with its last report), and otherwise takes the lock or learns
// who holds it.
func (j *copyJob) lookAndLock() (done, held bool, holder string, last *v1alpha1.HandoffProgress, err error) {
	self, ttl := j.r.opts.Self, j.r.opts.LockTTL
	err = j.control(func(c *conn) (err error) {
		if done, last, err = finished(c, j.id, j.leaving); err != nil || done {
			return err
		}
		if held, holder, err = tryLock(c, self, ttl); err != nil || !held {
			return err
		}
		// It may have finished between the look and the lock.
		if done, last, err = finished(c, j.id, j.leaving); done {
			unlock(c, self)
		}
		return err
	})
	return done, held, holder, last, err
}

// bulkCopy copies the source's items, holding the lock: beside the copy
// it renews the lock (which stops the copy when lost) and reports the
// progress, and a leaving source's writes are forwarded from before the
// dump.
func (j *copyJob) bulkCopy(rt route) error {
	r, h := j.r, j.h
	j.start, j.cnt = r.opts.Now(), &counts{}
	j.log.Info("handing items on", "from", j.source, "to", h.To, "to_ip", h.ToIP)
	r.report(j.ctx, h, progress(v1alpha1.HandoffCopying, j.cnt, 0, ""))

	copyCtx, stopCopy := context.WithCancelCause(j.ctx)
	defer stopCopy(nil)
	var wg sync.WaitGroup
	wg.Go(func() { r.renewLock(copyCtx, stopCopy, j.source, j.log) })
	wg.Go(func() { r.reportCopying(copyCtx, h, j.start, j.cnt) })
	cp := &copier{source: j.source, route: rt, dial: r.opts.Dial, timeout: r.opts.Timeout, batch: r.opts.Batch, now: r.opts.Now, counts: j.cnt, beforeGet: r.opts.beforeGet,
		remove: h.Reason == v1alpha1.HandoffGrown && !r.opts.keepGrown, beforeRemove: r.opts.beforeRemove}
	// A leaving source's writes are forwarded from before the dump until
	// it stops (forward.go): watching starts here, so that every write it
	// takes after the copy reads a key is logged.
	j.fw, j.fwDone = r.forward(j.ctx, j.log, cp, j.leaving)
	err := cp.run(copyCtx, r.opts.Retries)
	stopCopy(nil)
	wg.Wait()
	r.handed(j.cnt)
	j.took = r.opts.Now().Sub(j.start)
	j.done = progress(v1alpha1.HandoffDone, j.cnt, j.took, summary(j.cnt))
	return err
}

// finish marks a copy that ended well finished on the source (and, for a
// leaving one, sets DoneKey, which ends its preStop), before the lock
// goes: the agent that waits sees one or the other. Deletions the copy
// may have undone are applied again first, and the marker waits (up to
// maxCatchUp) for the forwarder to hand on the writes the source logged
// before now.
func (j *copyJob) finish() error {
	if j.fw != nil {
		j.fw.copyEnded()
		var caught bool
		cerr := j.control(func(c *conn) (err error) {
			caught, err = j.fw.catchUp(c, maxCatchUp)
			return err
		})
		if cerr != nil || !caught {
			j.log.Debug("setting the done marker before the forwarder caught up", "pending", j.fw.pending.len(), "error", cerr)
		}
	}
	if err := j.control(func(c *conn) error { return markFinished(c, j.id, j.leaving, j.done) }); err != nil {
		return fmt.Errorf("marking the copy finished: %w", err)
	}
	return nil
}

// release releases the lock, on the way out (a cancelled context) too, so
// that the other agent need not wait for it to expire.
func (j *copyJob) release() {
	if j.ctl == nil {
		return
	}
	j.ctl.nc.SetDeadline(time.Now().Add(2 * time.Second))
	if err := unlock(j.ctl, j.r.opts.Self); err != nil {
		j.log.Debug("could not release the copy's lock", "error", err)
	}
}

// conclude tells how the copy ended: the observer, the report, an Event
// and the log. A lock lost to another agent is left to it.
func (j *copyJob) conclude(err error) {
	r, h, cnt := j.r, j.h, j.cnt
	switch {
	case err == nil:
		j.release()
		r.observer.Ended(ResultDone, j.took)
		p := j.done
		r.report(j.ctx, h, p)
		msg := fmt.Sprintf("handed on %d items (%.1f MiB) from %s to %s in %.1f s, %d already there",
			p.Items, float64(p.Bytes)/(1<<20), h.Pod, strings.Join(cnt.pods(h), ", "), j.took.Seconds(), p.Skipped)
		if p.Message != "" {
			msg += "; " + p.Message
		}
		r.event(j.ctx, j.log, false, "HandedOff", msg)
		j.log.Info("handed items on", "items", p.Items, "bytes", p.Bytes, "skipped", p.Skipped, "seconds", j.took.Seconds(),
			"gone", cnt.gone.Load(), "homeless", cnt.homeless.Load(), "refused", cnt.refused.Load(), "reserved", cnt.reserved.Load(),
			"stayed", cnt.stayed.Load(), "removed", cnt.removed.Load(), "changed", cnt.changed.Load())
	case errors.Is(err, errLockLost):
		r.observer.Ended(ResultCancelled, j.took)
		j.log.Warn("stopped copying: another agent holds the lock now")
	case j.ctx.Err() != nil:
		j.release()
		r.observer.Ended(ResultCancelled, j.took)
		j.log.Info("copy cancelled", "items", cnt.items.Load())
	default:
		j.release()
		r.failed(j.ctx, j.log, h, j.start, cnt, err)
	}
}

// endForwarding waits for the forwarder, if any, to end: at once when
// the copy did not end well (no copy to keep up to date: failed,
// cancelled, or another agent's now), else when the source stops or the
// entry goes. Then it counts and logs what was forwarded.
func (j *copyJob) endForwarding(err error) {
	fw := j.fw
	if fw == nil {
		return
	}
	if err != nil {
		fw.stop()
	}
	<-j.fwDone
	j.r.observer.Handed(fw.counts.stored.Load(), fw.counts.bytes.Load())
	j.log.Info("forwarded the source's writes until it stopped", fw.logValues()...)
	if j.r.opts.afterForward != nil {
		j.r.opts.afterForward(&fw.counts)
	}
}

// forward starts forwarding a leaving source's writes (forward.go), on
// ctx: the hand-off's, so that it outlives the bulk copy and its done
// marker, and ends with the entry. A source that will not be watched
// (started with -W, or with too many watchers) is copied without: the
// writes it takes after the copy reads their keys are not handed on, as
// before forwarding.
func (r *Runner) forward(ctx context.Context, log *slog.Logger, cp *copier, leaving bool) (*forwarder, <-chan struct{}) {
	if !leaving || r.opts.noForward {
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

// failed reports a copy that failed.
func (r *Runner) failed(ctx context.Context, log *slog.Logger, h v1alpha1.Handoff, start time.Time, cnt *counts, err error) {
	took := r.opts.Now().Sub(start)
	r.observer.Ended(ResultFailed, took)
	r.report(ctx, h, progress(v1alpha1.HandoffFailed, cnt, took, err.Error()))
	r.event(ctx, log, true, "HandoffFailed", fmt.Sprintf("handing on the items of %s (%s) failed after %d items: %v", h.Pod, h.Reason, cnt.items.Load(), err))
	log.Warn("hand-off failed", "error", err, "items", cnt.items.Load())
}

func (r *Runner) event(ctx context.Context, log *slog.Logger, warning bool, reason, msg string) {
	if err := r.reporter.Event(ctx, warning, reason, msg); err != nil {
		log.Warn("could not record an event", "reason", reason, "error", err)
	}
}

// reportCopying reports the copy's progress every ReportEvery until ctx
// ends. It runs apart from renewLock: a slow API server must not let the
// lock expire.
func (r *Runner) reportCopying(ctx context.Context, h v1alpha1.Handoff, start time.Time, cnt *counts) {
	program.Every(ctx, r.opts.ReportEvery, func() bool {
		r.handed(cnt)
		r.report(ctx, h, progress(v1alpha1.HandoffCopying, cnt, r.opts.Now().Sub(start), ""))
		return true
	})
}

// renewLock renews the copy's lock on the source every third of its TTL
// until ctx ends, and stops the copy (stop) when the lock is lost.
func (r *Runner) renewLock(ctx context.Context, stop context.CancelCauseFunc, source string, log *slog.Logger) {
	var c *conn
	defer func() {
		if c != nil {
			c.close()
		}
	}()
	program.Every(ctx, r.opts.LockTTL/3, func() bool {
		err := withControl(ctx, r.opts.Dial, source, r.opts.Timeout, 1, &c, func(c *conn) error {
			return renewLock(c, r.opts.Self, r.opts.LockTTL)
		})
		switch {
		case errors.Is(err, errLockLost):
			stop(errLockLost)
			return false
		case err != nil && ctx.Err() == nil:
			// The copy's own connections tell whether the source is
			// gone; the lock may yet be renewed.
			log.Debug("could not renew the copy's lock", "error", err)
		}
		return true
	})
}

// handed tells the observer what was handed on since the last call.
func (r *Runner) handed(cnt *counts) {
	items, bytes := cnt.items.Load(), cnt.bytes.Load()
	cnt.mu.Lock()
	di, db := items-cnt.observedItems, bytes-cnt.observedBytes
	cnt.observedItems, cnt.observedBytes = items, bytes
	cnt.mu.Unlock()
	if di > 0 || db > 0 {
		r.observer.Handed(di, db)
	}
}

func progress(state v1alpha1.HandoffState, cnt *counts, took time.Duration, msg string) v1alpha1.HandoffProgress {
	return v1alpha1.HandoffProgress{
		State: state, Items: cnt.items.Load(), Bytes: cnt.bytes.Load(), Skipped: cnt.skipped.Load(),
		Seconds: int64(took.Seconds()), Message: msg,
	}
}

// summary says what a finished copy left behind, if anything.
func summary(cnt *counts) string {
	var parts []string
	if n := cnt.homeless.Load(); n > 0 {
		parts = append(parts, fmt.Sprintf("%d items had no Serving slot to go to", n))
	}
	if n := cnt.refused.Load(); n > 0 {
		cnt.mu.Lock()
		first := cnt.refusal
		cnt.mu.Unlock()
		parts = append(parts, fmt.Sprintf("%d items refused by the destination (%s)", n, first))
	}
	if n := cnt.changed.Load(); n > 0 {
		parts = append(parts, fmt.Sprintf("%d items stayed on the source too: written there since the copy read them", n))
	}
	return strings.Join(parts, "; ")
}

// pods are the Pods items were handed to, sorted (the successor for
// Replaced, even when nothing was copied).
func (c *counts) pods(h v1alpha1.Handoff) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for p := range c.to {
		out = append(out, p)
	}
	if successor, _, ok := h.Successor(); ok && len(out) == 0 {
		out = append(out, successor)
	}
	slices.Sort(out)
	if len(out) == 0 {
		out = []string{"no Pod"}
	}
	return out
}
