package handoff

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
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
	// ClientMove is how long clients take to move to a slot's new owner
	// (the proxies switch their pool within a second), which a copy waits
	// as its reason's settle says, once the slot table gives clients the
	// keys' new place, while the source's writes are still forwarded: a
	// Replaced or Removed copy before the done marker
	// (copyJob.markDoneAfterSwitch), a Moved, Grown or Refill copy before
	// its forwarding ends (and a Grown one's second pass:
	// copyJob.removeAfterListed). 0: no wait (the agent's
	// --handoff-settle defaults to contract.ClientMove). It is not
	// contract.Settle, the hook's wait for a Pod's event to settle.
	ClientMove time.Duration
	// Now is the clock the copies are timed and reported by (time.Now).
	// Connection deadlines, timers and the forwarder's marker names are
	// the runtime's and read the wall clock.
	Now func() time.Time
	// ForwardKeys bounds the keys a leaving source logged as written and
	// the forwarder has not handed on yet (10,000: about 3.4 MB at
	// memcached's longest keys); the rest are dropped and counted.
	ForwardKeys int
	// ReportLinger is how long a report stays after its entry left the
	// status (contract.ReportLinger).
	ReportLinger time.Duration
	// ProxyConfirm bounds the wait for every proxy to confirm a switch
	// (contract.ProxyConfirm).
	ProxyConfirm time.Duration
}

// Clients is what the followed status says of the Memcached's clients,
// for a copy's wait once the table moved them to the keys' new place
// (Runner.waitClients). A Runner that was never given one waits
// ClientMove, as every client's clock.
type Clients struct {
	// Proxies: the proxy tier is on. Its clients have moved once every
	// proxy confirmed loading the table version that moved them
	// (ProxyVersions), asked of the proxy itself by the agent beside it,
	// or Options.ProxyConfirm passed.
	Proxies bool
	// Clock: clients that confirm nothing follow the tables too (Auto
	// Discovery's poll, stable names' DNS): they get ClientMove, their
	// documented wait.
	Clock bool
	// Versions are each zone's table version ("" without zones), and
	// ProxyVersions what every proxy has loaded of it
	// (status.slotTable.proxyVersion).
	Versions, ProxyVersions map[string]int64
}

// testHooks let a test watch or change what a copy does. They are not
// Options: production never sets them, and its Runner's are zero; a test
// sets them on a Runner before giving it work (newHookedRunner).
type testHooks struct {
	// beforeGet runs before each batch is read from the source.
	beforeGet func([]dumpKey)
	// keepGrown leaves a Grown copy's items on its source, to show what
	// removing them prevents.
	keepGrown bool
	// beforeRemove runs before an item is deleted from the source.
	beforeRemove func(key string)
	// noForward forwards no mutation, to show what forwarding prevents.
	noForward bool
	// afterForward is told a forwarder's counts once it ends.
	afterForward func(*forwardCounts)
	// pace replaces defaultPace: another rule, or none.
	pace *paceRule
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
	if o.ProxyConfirm == 0 {
		o.ProxyConfirm = contract.ProxyConfirm
	}
	if o.ReportLinger == 0 {
		o.ReportLinger = contract.ReportLinger
	}
	return o
}

// Runner runs the copies the status asks for, each once, and no other.
type Runner struct {
	opts     Options
	hooks    testHooks
	reporter Reporter
	observer Observer
	logger   *slog.Logger

	// tables are the slot tables of the last status, by zone ("" without
	// zones): every route reads its hand-off's zone's as it changes (a
	// Replaced slot's holder, where a Removed, Moved or Grown item's key
	// hashes).
	tables atomic.Pointer[map[string][]v1alpha1.Slot]
	// changed is closed, and replaced, when tables change (waitSwitch).
	changed atomic.Pointer[chan struct{}]
	// clients is what the last status said of the clients (UpdateClients);
	// nil until one did.
	clients atomic.Pointer[Clients]

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
	r := &Runner{
		opts: opts.withDefaults(), reporter: reporter, observer: observer, logger: logger,
		ctx: ctx, cancel: cancel,
		jobs: map[string]*job{}, next: map[string]v1alpha1.Handoff{}, reported: map[string][]string{},
	}
	changed := make(chan struct{})
	r.changed.Store(&changed)
	return r
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

// Update takes a status: its hand-offs and slot table. It starts the
// copies it asks for that have not run, cancels those whose entry is gone
// or changed, and forgets the reports of Pods no longer listed. It never
// blocks on a copy.
func (r *Runner) Update(handoffs []v1alpha1.Handoff, table []v1alpha1.Slot) {
	r.UpdateZones(handoffs, map[string][]v1alpha1.Slot{"": table})
}

// UpdateClients records what a status says of the clients, before
// UpdateZones gives the Runner that status's tables (which wakes the
// waits).
func (r *Runner) UpdateClients(c Clients) { r.clients.Store(&c) }

// UpdateZones is Update for a status with a slot table per zone
// (MemcachedStatus.Tables): each hand-off routes by its zone's.
func (r *Runner) UpdateZones(handoffs []v1alpha1.Handoff, tables map[string][]v1alpha1.Slot) {
	t := make(map[string][]v1alpha1.Slot, len(tables))
	for zone, table := range tables {
		t[zone] = slices.Clone(table)
	}
	r.tables.Store(&t)
	next := make(chan struct{})
	close(*r.changed.Swap(&next))
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
			// It lingers (ReportLinger), and stays if reported again
			// meanwhile: another job of the Pod reports under it.
			select {
			case <-r.ctx.Done():
				return
			case <-time.After(r.opts.ReportLinger):
			}
			for _, key := range keys {
				r.mu.Lock()
				again := slices.Contains(r.reported[pod], key)
				r.mu.Unlock()
				if again {
					continue
				}
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

// run does one hand-off, to its end, as its reason's entry (reasons)
// says.
func (r *Runner) run(ctx context.Context, h v1alpha1.Handoff) {
	log := r.logger.With("pod", h.Pod, "reason", string(h.Reason))
	source := net.JoinHostPort(h.IP, strconv.Itoa(r.opts.Port))
	if h.IP == "" {
		r.failed(ctx, log, h, r.opts.Now(), &counts{}, errors.New("the hand-off names no address for its Pod"))
		return
	}
	rs, ok := reasons[h.Reason]
	switch {
	case !ok:
		// wanted lets none through.
		return
	case rs.route == nil:
		r.markOnly(ctx, log, h, source)
		return
	}
	rt, err := rs.route(r, h)
	if err != nil {
		r.failed(ctx, log, h, r.opts.Now(), &counts{}, err)
		return
	}
	r.copy(ctx, log, h, rs, source, rt)
}

// markOnly sets the done marker on a source with nothing to copy
// (NoSlot): its preStop may stop waiting at once.
func (r *Runner) markOnly(ctx context.Context, log *slog.Logger, h v1alpha1.Handoff, source string) {
	var c *conn
	start := r.opts.Now()
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
		r.report(ctx, h, v1alpha1.HandoffProgress{State: v1alpha1.HandoffDone, Seconds: int64(r.opts.Now().Sub(start).Seconds())})
		log.Info("nothing to hand on: done marker set")
	}
}
