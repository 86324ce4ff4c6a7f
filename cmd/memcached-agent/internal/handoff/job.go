package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/example/memcached-operator/cmd/internal/program"
	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
)

// copy takes the source's lock (waiting while another agent holds it,
// ending if that one finishes), copies while renewing it, marks the
// source and reports: copyJob's phases, in order, as the reason's entry
// rs says.
//
// A source whose done marker waits for clients to leave it
// (settleBeforeDone: Replaced) gets it once the copy ended, this agent's
// or the other's, and the slot serves its successor (markDoneAfterSwitch);
// its writes are forwarded until then, and after, until it stops.
func (r *Runner) copy(ctx context.Context, log *slog.Logger, h v1alpha1.Handoff, rs reason, source string, rt route) {
	j := &copyJob{r: r, ctx: ctx, log: log, h: h, rs: rs, id: jobID(h), source: source}
	defer j.closeControl()
	held, done := j.lock()
	if !held {
		if done {
			j.markDoneAfterSwitch()
		}
		return
	}
	err := j.bulkCopy(rt)
	if err == nil {
		err = j.removeAfterListed(rt)
	}
	if err == nil {
		err = j.finish()
	}
	j.conclude(err)
	if err == nil {
		j.markDoneAfterSwitch()
	}
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
	// rs is h's reason's entry (reasons).
	rs reason
	// id names the copy on the source (jobID).
	id     string
	source string
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
	// fwStopped: the forwarder was stopped before the copy ended
	// (removeAfterListed), with nothing left to catch up.
	fwStopped bool
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

// lock takes the source's lock, waiting while another agent holds it:
// held. It is not held when nothing is left to copy: the copy finished
// (done: another agent's, whose last report it sends again), taking the
// lock failed (reported), or ctx ended.
func (j *copyJob) lock() (held, done bool) {
	waitingFor := ""
	for {
		done, held, holder, last, err := j.lookAndLock()
		switch {
		case j.ctx.Err() != nil:
			return false, false
		case err != nil:
			j.r.failed(j.ctx, j.log, j.h, j.r.opts.Now(), &counts{}, fmt.Errorf("taking the copy's lock: %w", err))
			return false, false
		case done:
			j.log.Info("another agent handed the items on")
			if last != nil {
				// The copier's own report, again: it may have died
				// before it sent it.
				j.r.report(j.ctx, j.h, *last)
			}
			return false, true
		case held:
			return true, false
		}
		if holder != waitingFor && holder != "" {
			waitingFor = holder
			j.log.Info("another agent copies; waiting for it to finish, or for its lock to expire", "holder", holder)
		}
		select {
		case <-time.After(j.r.opts.LockTTL / 5):
		case <-j.ctx.Done():
			return false, false
		}
	}
}

// lookAndLock looks, on the control connection, whether the copy is
// finished (with its last report), and otherwise takes the lock or learns
// who holds it.
func (j *copyJob) lookAndLock() (done, held bool, holder string, last *v1alpha1.HandoffProgress, err error) {
	self, ttl := j.r.opts.Self, j.r.opts.LockTTL
	err = j.control(func(c *conn) (err error) {
		if done, last, err = finished(c, j.id, j.rs.leaving); err != nil || done {
			return err
		}
		if held, holder, err = tryLock(c, self, ttl); err != nil || !held {
			return err
		}
		// It may have finished between the look and the lock.
		if done, last, err = finished(c, j.id, j.rs.leaving); done {
			unlock(c, self)
		}
		return err
	})
	return done, held, holder, last, err
}

// bulkCopy copies the source's items, holding the lock: beside the copy
// it renews the lock (which stops the copy when lost) and reports the
// progress, and a leaving source's writes are forwarded from before the
// dump. A Pod a Refill fills is emptied first, when it held the slot
// before (emptyFilled).
func (j *copyJob) bulkCopy(rt route) error {
	r, h := j.r, j.h
	j.start, j.cnt = r.opts.Now(), &counts{}
	j.log.Info("handing items on", "from", j.source, "to", h.To, "to_ip", h.ToIP)
	r.report(j.ctx, h, progress(v1alpha1.HandoffCopying, j.cnt, 0, ""))

	copyCtx, stopCopy := context.WithCancelCause(j.ctx)
	defer stopCopy(nil)
	var wg sync.WaitGroup
	wg.Go(func() { r.holdLock(copyCtx, stopCopy, j.source, j.log) })
	// A copy that removes what it handed on only once clients moved
	// (settleBeforeRemove) removes nothing now.
	later := j.rs.settle == settleBeforeRemove
	cp := &copier{source: j.source, route: rt, dial: r.opts.Dial, timeout: r.opts.Timeout, batch: r.opts.Batch, now: r.opts.Now, counts: j.cnt,
		remove: j.rs.remove && !later && !r.hooks.keepGrown, beforeGet: r.hooks.beforeGet, beforeRemove: r.hooks.beforeRemove,
		pace: r.hooks.pace}
	err := j.emptyFilled(copyCtx)
	if err == nil {
		// A leaving source's writes are forwarded from before the dump
		// until it stops (forward.go), and those of a source whose
		// clients go on reading it until the copy ended
		// (settleBeforeRemove), until they moved: watching starts here,
		// so that every write it takes after the copy reads a key is
		// logged; after the flush, which would empty what was forwarded.
		j.fw, j.fwDone = r.forward(j.ctx, j.log, cp, j.rs.leaving || later)
		// The copy's time counts from here, without the flush.
		j.start = r.opts.Now()
		wg.Go(func() { r.reportCopying(copyCtx, h, j.start, j.cnt) })
		err = cp.run(copyCtx, r.opts.Retries)
	}
	stopCopy(nil)
	wg.Wait()
	r.handed(j.cnt)
	j.took = r.opts.Now().Sub(j.start)
	j.done = progress(v1alpha1.HandoffDone, j.cnt, j.took, summary(j.cnt))
	return err
}

// emptyFilled empties the Pod a Refill fills (its reason's flush) when the
// entry says it held the slot before (Handoff.Flush): it was unreachable
// or its memcached restarted, and what it kept may be older than what the
// other zones were written or told to delete meanwhile. Adding the
// source's items on top would leave those. Its slot is down in its zone
// until the copy ended (the hook's Filling slot with no From), so no
// client reads it meanwhile, nor writes to it: what it holds once the
// copy ended is the source's items and writes. (A Pod that was Ready
// longer than the fill's bound before it took the slot is listed at once:
// then the flush costs it misses, which the copy fills, never an older
// value.) Only the agent that holds the source's lock empties it, once,
// before its copy.
func (j *copyJob) emptyFilled(ctx context.Context) error {
	if !j.rs.flush || !j.h.Flush {
		return nil
	}
	ip := j.h.ToIP
	var c *conn
	defer func() {
		if c != nil {
			c.close()
		}
	}()
	addr := net.JoinHostPort(ip, strconv.Itoa(j.r.opts.Port))
	err := withControl(ctx, j.r.opts.Dial, addr, j.r.opts.Timeout, j.r.opts.Retries, &c, func(c *conn) error {
		reply, err := c.do("flush_all", nil)
		if err == nil && reply != "OK" {
			err = &protocolError{addr: addr, msg: "flush_all answered " + reply}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("emptying %s before filling it: %w", j.h.To, err)
	}
	j.log.Info("emptied the Pod to fill: it held the slot before", "to", j.h.To, "to_ip", ip)
	return nil
}

// finish marks a copy that ended well finished on the source (and, for a
// leaving one, sets DoneKey, which ends its preStop), before the lock
// goes: the agent that waits sees one or the other. Deletions the copy
// may have undone are applied again first, and the marker waits (up to
// maxCatchUp) for the forwarder to hand on the writes the source logged
// before now.
func (j *copyJob) finish() error {
	if j.fw != nil && !j.fwStopped {
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
	// A source whose clients leave it only once the copy ended gets
	// its done marker after they did (markDoneAfterSwitch).
	now := j.rs.leaving && j.rs.settle != settleBeforeDone
	if err := j.control(func(c *conn) error { return markFinished(c, j.id, now, j.done) }); err != nil {
		return fmt.Errorf("marking the copy finished: %w", err)
	}
	return nil
}

// removeAfterListed ends a copy whose source stays and whose clients go on
// reading it until the copy ended (settleBeforeRemove: Grown, Moved,
// Refill). The first pass copied without removing; it reports Copied, and
// the hook gives clients the keys' new places once every such copy of the
// cell has (Grown: the added slots listed; Moved: the old slot unlisted;
// Refill: the slot listed in the filled Pod's zone); then
// clients get ClientMove to follow, and the forwarder (which handed the
// source's writes on meanwhile) catches up and stops. For a reason that
// removes (Grown), the copy then runs again, removing from the source
// every item its destination holds (copier.remove: the items the first
// pass handed on answer NS there, and go; one written on the source since
// it was read stays): the forwarder stopped first, since it would hand the
// removals on as deletions. It holds the source's lock throughout.
func (j *copyJob) removeAfterListed(rt route) error {
	if j.rs.settle != settleBeforeRemove {
		return nil
	}
	r := j.r
	r.report(j.ctx, j.h, progress(v1alpha1.HandoffCopied, j.cnt, j.took, ""))
	ctx, stop := context.WithCancelCause(j.ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop(nil)
	wg.Go(func() { r.holdLock(ctx, stop, j.source, j.log) })
	at, err := r.waitSwitch(ctx, j.h, j.rs)
	if err != nil {
		return err
	}
	if err := r.waitClients(ctx, j.log, "clients are given the keys' new places: waiting for them to move", j.h.Zone, at); err != nil {
		return err
	}
	if j.fw != nil {
		j.fw.copyEnded()
		cerr := j.control(func(c *conn) error {
			_, err := j.fw.catchUp(c, maxCatchUp)
			return err
		})
		if cerr != nil {
			j.log.Debug("removing before the forwarder caught up", "error", cerr)
		}
		j.fw.stop()
		<-j.fwDone
		j.fwStopped = true
	}
	if !j.rs.remove {
		j.done = progress(v1alpha1.HandoffDone, j.cnt, j.took, summary(j.cnt))
		return nil
	}
	start, cnt := r.opts.Now(), &counts{}
	cp := &copier{source: j.source, route: rt, dial: r.opts.Dial, timeout: r.opts.Timeout, batch: r.opts.Batch, now: r.opts.Now, counts: cnt,
		remove: !r.hooks.keepGrown, beforeGet: r.hooks.beforeGet, beforeRemove: r.hooks.beforeRemove}
	err = cp.run(ctx, r.opts.Retries)
	// What the second pass handed on was written on the source since the
	// first read it, and not forwarded: it counts as handed on.
	j.cnt.items.Add(cnt.items.Load())
	j.cnt.bytes.Add(cnt.bytes.Load())
	j.cnt.removed.Add(cnt.removed.Load())
	j.cnt.changed.Add(cnt.changed.Load())
	r.handed(j.cnt)
	j.took += r.opts.Now().Sub(start)
	j.done = progress(v1alpha1.HandoffDone, j.cnt, j.took, summary(j.cnt))
	return err
}

// markDoneAfterSwitch sets the done marker of a source whose clients
// leave it only once its copy ended (settleBeforeDone: Replaced), when
// they have: the hook serves the slot from the Pod the items went to
// once the copy's report reaches it (or the slot's bound passed), and
// the clients follow within ClientMove (the proxies within a second, Auto
// Discovery clients at their poll, stable names' clients at their
// lookup). Until then the source serves, and its writes are forwarded.
// Both agents may set it (the one that copied, and the one that found
// the copy done): setting it twice is setting it.
func (j *copyJob) markDoneAfterSwitch() {
	if j.rs.settle != settleBeforeDone {
		return
	}
	at, err := j.r.waitSwitch(j.ctx, j.h, j.rs)
	if err != nil {
		return
	}
	if j.r.waitClients(j.ctx, j.log, "the slot serves its new Pod: waiting for clients to move to it", j.h.Zone, at) != nil {
		return
	}
	if err := j.control(markDone); err != nil {
		if j.ctx.Err() == nil {
			j.log.Warn("could not set the done marker: the leaving Pod stops at its bound", "error", err)
		}
		return
	}
	j.log.Info("clients left the source: done marker set")
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
	if j.r.hooks.afterForward != nil {
		j.r.hooks.afterForward(&fw.counts)
	}
}

// reportCopying reports the copy's progress every ReportEvery until ctx
// ends. It runs apart from holdLock: a slow API server must not let the
// lock expire.
func (r *Runner) reportCopying(ctx context.Context, h v1alpha1.Handoff, start time.Time, cnt *counts) {
	program.Every(ctx, r.opts.ReportEvery, func() bool {
		r.handed(cnt)
		r.report(ctx, h, progress(v1alpha1.HandoffCopying, cnt, r.opts.Now().Sub(start), ""))
		return true
	})
}

// holdLock renews the copy's lock on the source every third of its TTL
// until ctx ends, and stops the copy (stop) when the lock is lost.
func (r *Runner) holdLock(ctx context.Context, stop context.CancelCauseFunc, source string, log *slog.Logger) {
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

// The operator's keys on a source, beside contract.DoneKey. None is ever
// copied (contract.ReservedKeyPrefix).
const (
	// LockKey is held (value: the agent's name) by the agent that copies
	// the source, with a TTL it renews while it copies.
	LockKey = contract.ReservedKeyPrefix + "handoff/lock"
	// CopiedKey holds the identity of the last copy that finished, a
	// line break and its last report (JSON), so that the other agent,
	// waiting for the lock, knows it has nothing left to do (a source
	// that stays, Moved or Grown, gets no DoneKey) and can send that
	// report again.
	CopiedKey = contract.ReservedKeyPrefix + "handoff/copied"
	// copiedTTL keeps CopiedKey on a source that stays (Moved, Grown) for
	// a day.
	copiedTTL = 24 * time.Hour
)

// errLockLost ends a copy whose lock another agent holds now (this one
// could not renew it in time).
var errLockLost = errors.New("the copy's lock was lost to another agent")

// ttlToken is a TTL as ms's T takes it: whole seconds, at least one.
func ttlToken(d time.Duration) string {
	return "T" + strconv.FormatInt(max(int64((d+time.Second-1)/time.Second), 1), 10)
}

// tryLock takes the lock if no one holds it (ms in add mode, atomic in
// memcached), and says who holds it otherwise. A lock in this agent's own
// name is a previous run of this agent's (a restarted container keeps its
// Pod's name; one process never runs two copies of a source): it is taken
// back at once rather than waited out.
func tryLock(c *conn, self string, ttl time.Duration) (held bool, holder string, err error) {
	ok, err := c.store(LockKey, []byte(self), "ME "+ttlToken(ttl))
	if err != nil || ok {
		return ok, self, err
	}
	v, _, found, err := c.get(LockKey)
	if err != nil {
		return false, "", err
	}
	if !found {
		// Released between the two: the next try takes it.
		return false, "", nil
	}
	if string(v) == self {
		if err := renewLock(c, self, ttl); err != nil {
			if errors.Is(err, errLockLost) {
				return false, "", nil
			}
			return false, "", err
		}
		return true, self, nil
	}
	return false, string(v), nil
}

// renewLock extends the lock if this agent still holds it: compare and
// swap on its cas, so that a lock taken over meanwhile is never extended.
// A lock that expired (a loaded machine held the renewals back past its
// TTL, memcached counting whole seconds) and that no other agent took
// meanwhile is taken back, as tryLock takes a free one: giving the copy up
// then would leave the hand-off to no one, and the leaving Pod's preStop
// would wait out its bound with its items unhanded.
func renewLock(c *conn, self string, ttl time.Duration) error {
	v, cas, found, err := c.get(LockKey)
	if err != nil {
		return err
	}
	if !found {
		ok, err := c.store(LockKey, []byte(self), "ME "+ttlToken(ttl))
		if err != nil {
			return err
		}
		if !ok {
			return errLockLost
		}
		return nil
	}
	if string(v) != self {
		return errLockLost
	}
	ok, err := c.store(LockKey, []byte(self), fmt.Sprintf("C%d %s", cas, ttlToken(ttl)))
	if err != nil {
		return err
	}
	if !ok {
		return errLockLost
	}
	return nil
}

// unlock deletes the lock if this agent still holds it.
func unlock(c *conn, self string) error {
	v, cas, found, err := c.get(LockKey)
	if err != nil || !found || string(v) != self {
		return err
	}
	return c.deleteCAS(LockKey, cas)
}

// finished tells whether the copy id is done on the source: CopiedKey
// says so, or (leaving, a source that gets the marker) DoneKey is there.
// From CopiedKey it also returns the copy's last report, which an agent
// that finds the copy done sends again: the copier may have died before
// sending it, and the hand-off of a source that stays (Moved, Grown)
// leaves the status only on that report.
func finished(c *conn, id string, leaving bool) (bool, *v1alpha1.HandoffProgress, error) {
	v, _, found, err := c.get(CopiedKey)
	if err != nil {
		return false, nil, err
	}
	if found {
		if got, report, _ := strings.Cut(string(v), "\n"); got == id {
			var p v1alpha1.HandoffProgress
			if json.Unmarshal([]byte(report), &p) != nil || p.State == "" {
				return true, nil, nil
			}
			return true, &p, nil
		}
	}
	if !leaving {
		return false, nil, nil
	}
	_, _, found, err = c.get(contract.DoneKey)
	return found, nil, err
}

// markFinished records the copy id as finished, with its report, and, for
// a leaving source, sets DoneKey, which its preStop waits for.
func markFinished(c *conn, id string, leaving bool, p v1alpha1.HandoffProgress) error {
	report, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if _, err := c.store(CopiedKey, []byte(id+"\n"+string(report)), ttlToken(copiedTTL)); err != nil {
		return err
	}
	if leaving {
		return markDone(c)
	}
	return nil
}

// markDone sets DoneKey, with no TTL: the source is leaving.
func markDone(c *conn) error {
	ok, err := c.store(contract.DoneKey, []byte("1"), "T0")
	if err == nil && !ok {
		err = &protocolError{addr: c.addr, msg: "did not store " + contract.DoneKey}
	}
	return err
}

// withControl runs f on a control connection to addr, dialling again and
// retrying f after a connection failure, up to retries times.
func withControl(ctx context.Context, d Dialer, addr string, timeout time.Duration, retries int, c **conn, f func(*conn) error) error {
	var err error
	for attempt := 0; attempt <= retries; attempt++ {
		if attempt > 0 {
			select {
			case <-time.After(min(200*time.Millisecond<<(attempt-1), 2*time.Second)):
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		if *c == nil {
			if *c, err = dial(ctx, d, addr, timeout, controlBufs); err != nil {
				continue
			}
		}
		if err = f(*c); err == nil || !isRetryable(err) {
			return err
		}
		(*c).close()
		*c = nil
	}
	return err
}

// report sends h's progress under its report key, and remembers that it
// did. A copy's last report (Done or Failed) is sent again until it goes
// through or ctx ends (the entry changed, the agent stops): the hand-off
// of a source that stays (Moved, Grown) leaves the status only once the
// hook reads it.
//
// A Replaced copy's report names the Pod it gives the items to (To): the
// hook moves the slot to it once that report says the copy ended.
func (r *Runner) report(ctx context.Context, h v1alpha1.Handoff, p v1alpha1.HandoffProgress) {
	key := contract.ReportKey(h)
	if to, _, ok := h.Successor(); ok {
		p.To = to
	}
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
	if s := cnt.pace.summary(); s != "" {
		parts = append(parts, s)
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
