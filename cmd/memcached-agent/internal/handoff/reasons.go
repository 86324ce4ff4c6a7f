package handoff

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/slots"
)

// reasons are what the agent does for each hand-off reason
// (v1alpha1.HandoffReason, which the hook sets: sync/slots.Handoffs), one
// entry per reason. Everything a reason changes in what the agent does is
// here: the Runner and its copyJob read the entry, and the reason itself
// only to name the copy (jobID, the report key, the log), so that a reader
// learns a reason here and a new reason is one entry.
// cmd/memcached-agent/README.md (Hand-offs) tells the same for users.
var reasons = map[v1alpha1.HandoffReason]reason{
	// A Ready Pod took the leaving Pod's slot: every item goes to it,
	// while clients are still served the leaving Pod (the hook's Filling
	// slot), whose writes are forwarded; it gets its done marker once
	// the slot serves the new Pod and clients moved.
	v1alpha1.HandoffReplaced: {asks: named, route: (*Runner).holder, leaving: true, settle: settleBeforeDone, left: successorServes},
	// The Pod's slot went in a scale-down: each item goes where its key
	// now hashes, while clients are still given its slot (the hook's
	// Removing slot), whose writes are forwarded; it gets its done marker
	// once the slot is no longer listed and clients moved.
	v1alpha1.HandoffRemoved: {asks: named, route: (*Runner).place, leaving: true, settle: settleBeforeDone, left: sourceUnlisted},
	// The Pod moved from a removed slot into a freed one, and stays: its
	// old slot's items go where their keys now hash, while clients are
	// still given its old slot (Removing), whose writes are forwarded,
	// until they left it.
	v1alpha1.HandoffMoved: {asks: named, route: (*Runner).place, settle: settleBeforeRemove, left: oldSlotUnlisted},
	// Slots were added; the Pod stays, and what it hands to them leaves it
	// once clients read them there: the added slots are Adding (not
	// listed) while the copy runs, the source's writes are forwarded, and
	// the items leave it in a second pass once the slots are listed.
	v1alpha1.HandoffGrown: {asks: planned, route: (*Runner).added, remove: true, settle: settleBeforeRemove, left: addedListed},
	// A Pod took the slot in another zone with no Pod to hand it over; the
	// source holds the same slot in its own zone, and stays. The slot is
	// down in that zone (the hook's Filling slot with no From: its reads
	// go to the other zones) while the copy runs, which starts at once,
	// once the Pod filled is emptied (flush), and the source's writes of
	// the slot's keys are forwarded; then Copied, and once the slot is
	// listed, clients get ClientMove to follow before the forwarding ends.
	v1alpha1.HandoffRefill: {asks: refilled, route: (*Runner).refill, flush: true, settle: settleBeforeRemove, left: refilledListed},
	// The leaving Pod held no slot: nothing to copy, the done marker at
	// once.
	v1alpha1.HandoffNoSlot: {asks: named, leaving: true},
	// The leaving Pod's slot waits for a Ready Pod to take it: nothing yet.
	v1alpha1.HandoffWaiting: {leaving: true},
}

// reason is what the agent does for the entries of one reason.
type reason struct {
	// asks tells whether an entry of the reason asks the agent for
	// anything yet, its Pod named; nil: never (Waiting). Another reason
	// (a newer hook's) asks for nothing either.
	asks func(v1alpha1.Handoff) bool
	// route says where the source's items go, each as the slot table is
	// when it is read: every route sends an item only to a Serving slot's
	// Pod that is not the source (Runner.dest). It fails on an entry that
	// names no destination. nil: nothing to copy, only the done marker
	// to set (NoSlot).
	route func(*Runner, v1alpha1.Handoff) (route, error)
	// leaving is a source whose memcached stops once the copy ends: it
	// gets the done marker (contract.DoneKey), which ends its preStop,
	// and its writes are forwarded from before the dump until it stops
	// (forward.go). A source that stays keeps serving its other keys and
	// gets neither: only CopiedKey tells the other agent the copy ended.
	leaving bool
	// remove deletes each item from the source once its destination
	// holds it, if it is still the item read (copier.remove): for a
	// source that stays and keeps serving, where a copy left behind could
	// come back older (Grown).
	remove bool
	// settle is when the copy waits Options.ClientMove for clients to
	// move to the slot's new owner.
	settle settle
	// flush empties the Pod the items go to before the copy when the
	// entry says it held the slot before (Handoff.Flush;
	// copyJob.emptyFilled).
	flush bool
	// left tells, for a reason that waits for clients once the hook
	// moved them (settleBeforeDone, settleBeforeRemove), whether the slot
	// table as it is now gives clients the new place of the source's
	// keys: then they get ClientMove to follow. It reads the table of
	// the entry's zone.
	left func(h v1alpha1.Handoff, table []v1alpha1.Slot) bool
}

// successorServes: a Replaced entry's slot serves the Pod the items went
// to (its Filling ended).
func successorServes(h v1alpha1.Handoff, t []v1alpha1.Slot) bool {
	slot, _ := h.TakenSlot()
	to, _, _ := h.Successor()
	return int(slot) < len(t) && t[slot].Pod == to && t[slot].State == v1alpha1.SlotServing
}

// sourceUnlisted: no slot clients are given serves a Removed entry's Pod
// (its Removing slot went).
func sourceUnlisted(h v1alpha1.Handoff, t []v1alpha1.Slot) bool {
	return !slices.ContainsFunc(v1alpha1.Listed(t), func(e v1alpha1.Slot) bool { return e.ServedIP() == h.IP })
}

// oldSlotUnlisted: a Moved entry's Pod holds no Removing slot any more.
func oldSlotUnlisted(h v1alpha1.Handoff, t []v1alpha1.Slot) bool {
	return !slices.ContainsFunc(t, func(e v1alpha1.Slot) bool { return e.State == v1alpha1.SlotRemoving && e.Pod == h.Pod })
}

// addedListed: a Grown entry's added slots are listed (the first one
// added is no longer Adding).
func addedListed(h v1alpha1.Handoff, t []v1alpha1.Slot) bool {
	first, _ := h.FirstAdded()
	return int(first) >= len(t) || t[first].State != v1alpha1.SlotAdding
}

// refilledListed: a Refill entry's slot is listed in its zone, served by
// the Pod filled (its Filling ended).
func refilledListed(h v1alpha1.Handoff, t []v1alpha1.Slot) bool {
	s, to, toIP, _ := h.Refilled()
	return int(s) < len(t) && t[s].Pod == to && t[s].IP == toIP && t[s].State == v1alpha1.SlotServing
}

// settle is when a copy waits for clients to move to the slot's new owner
// (Options.ClientMove, --handoff-settle).
type settle int

const (
	// settleNever: nothing is copied, so nothing to wait for.
	settleNever settle = iota
	// settleBeforeDone: the copy starts at once, while clients are still
	// given the leaving source for its keys (the hook's Filling or
	// Removing slot until the copy ended: make before break), and the
	// source's writes are forwarded; the wait comes once the table gives
	// clients the keys' new place (the reason's left), before the done
	// marker (copyJob.markDoneAfterSwitch), so that the source serves
	// until its clients left it.
	settleBeforeDone
	// settleBeforeRemove: the copy starts at once, without removing
	// anything from the source, a source that stays, while clients are
	// still given it for the keys that move (the hook's Adding slots, a
	// Moved Pod's Removing old slot; a Refill's slot is down in its zone,
	// whose proxies read it from the source's zone or another), and its
	// writes are forwarded; once the table gives clients the keys' new
	// places (left), the wait, then the forwarding ends and, for a reason
	// that removes, a second pass removes what was handed on from the
	// source (copyJob.removeAfterListed).
	settleBeforeRemove
)

func (s settle) String() string {
	switch s {
	case settleNever:
		return "never"
	case settleBeforeDone:
		return "once clients are given the keys' new place, before the done marker"
	case settleBeforeRemove:
		return "once clients are given the keys' new places, before the copy ends"
	}
	return "settle(" + strconv.Itoa(int(s)) + ")"
}

// named asks for a copy as soon as the entry names its Pod.
func named(v1alpha1.Handoff) bool { return true }

// planned asks for a Grown copy once every added slot serves: the hook
// lists the entry unplanned until then.
func planned(h v1alpha1.Handoff) bool { return h.Planned() }

// refilled asks for a Refill copy once the entry names the Pod it fills.
func refilled(h v1alpha1.Handoff) bool {
	_, _, _, ok := h.Refilled()
	return ok
}

// wanted tells whether a hand-off asks the agent for anything.
func wanted(h v1alpha1.Handoff) bool {
	rs, ok := reasons[h.Reason]
	return ok && rs.asks != nil && h.Pod != "" && rs.asks(h)
}

// waitClients waits, once the table moved a hand-off's clients (its zone's
// table at version at), for them to move: every proxy to confirm it loaded
// that version (Clients.Proxies, bounded by Options.ProxyConfirm), and
// ClientMove for clients that confirm nothing (Clients.Clock; every client
// when the Runner was never told of them). It ends early when ctx ends
// (its cause).
func (r *Runner) waitClients(ctx context.Context, log *slog.Logger, msg, zone string, at int64) error {
	start := time.Now()
	c := r.clients.Load()
	if c != nil && c.Proxies {
		if err := r.waitProxies(ctx, log, zone, at); err != nil {
			return err
		}
		if !c.Clock {
			return nil
		}
	}
	rest := r.opts.ClientMove - time.Since(start)
	if rest <= 0 {
		return nil
	}
	log.Debug(msg, "settle", r.opts.ClientMove)
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(rest):
		return nil
	}
}

// waitProxies waits until every proxy confirmed loading zone's table at
// version at or later (status.slotTable.proxyVersion), or ProxyConfirm
// passed: then it goes on as if they had, and says so. A proxy that
// never confirms then still routes the keys to where the table had them
// before, and sees errors for those of a leaving Pod once it stops, until
// it loads the pool.
func (r *Runner) waitProxies(ctx context.Context, log *slog.Logger, zone string, at int64) error {
	timeout := time.NewTimer(r.opts.ProxyConfirm)
	defer timeout.Stop()
	start := time.Now()
	for {
		changed := r.changed.Load()
		confirmed := r.clients.Load().ProxyVersions[zone]
		if confirmed >= at {
			log.Debug("every proxy loaded the pool that moved the clients", "zone", zone, "version", at, "waited", time.Since(start))
			return nil
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-*changed:
		case <-timeout.C:
			log.Warn("not every proxy confirmed the pool that moved the clients: taking them as moved", "zone", zone, "version", at, "confirmed", confirmed, "waited", r.opts.ProxyConfirm)
			return nil
		}
	}
}

// dest is where an item goes when its slot's entry s in the table as it
// is now holds it (Slot.Holds: Serving, or Filling, the Pod being given
// the slot's items), at an address, and is not the hand-off's source h
// (its Pod's name or address): a status that landed since the copy began
// may have changed the table, and no item goes to a Pod the current table
// does not give the slot. ok false: the item has no home.
func (r *Runner) dest(h v1alpha1.Handoff, s v1alpha1.Slot) (destination, bool) {
	if !s.Holds() || s.Pod == h.Pod || s.IP == h.IP {
		return destination{}, false
	}
	return destination{addr: net.JoinHostPort(s.IP, strconv.Itoa(r.opts.Port)), pod: s.Pod}, true
}

// waitSwitch waits until the table as statuses come moves clients off
// the source of h to where its keys went (its reason's left), and returns
// the table's version then, or ctx ends (its cause).
func (r *Runner) waitSwitch(ctx context.Context, h v1alpha1.Handoff, rs reason) (int64, error) {
	for {
		changed := r.changed.Load()
		if rs.left(h, r.table(h.Zone)) {
			return r.version(h.Zone), nil
		}
		select {
		case <-ctx.Done():
			return 0, context.Cause(ctx)
		case <-*changed:
		}
	}
}

// version is the version of a zone's table ("" without zones) as the last
// status gave it (UpdateClients), 0 when none did. It is read once the
// table is, and UpdateClients comes before UpdateZones: never older than
// the table read.
func (r *Runner) version(zone string) int64 {
	if c := r.clients.Load(); c != nil {
		return c.Versions[zone]
	}
	return 0
}

// table is the slot table of a zone ("" without zones) in the last status,
// nil when it has none.
func (r *Runner) table(zone string) []v1alpha1.Slot {
	if t := r.tables.Load(); t != nil {
		return (*t)[zone]
	}
	return nil
}

// holder routes a Replaced Pod's items to the Pod that holds its slot in
// the slot table as it is now (dest): after the settle, a status that
// landed since may name another holder (its entry then changes, and this
// copy is cancelled).
func (r *Runner) holder(h v1alpha1.Handoff) (route, error) {
	taken, ok := h.TakenSlot()
	if _, successorIP, _ := h.Successor(); !ok || successorIP == "" {
		return nil, errors.New("the hand-off names no slot, or no address for the Pod that took it")
	}
	slot := int(taken)
	return func(string) (destination, bool) {
		table := r.table(h.Zone)
		if slot >= len(table) {
			return destination{}, false
		}
		return r.dest(h, table[slot])
	}, nil
}

// place routes Removed and Moved items: each to the slot its key hashes
// to in the slot table as it is now, as the proxy will once the scale-down
// is over (slots.Place over every slot kept, v1alpha1.Kept: not the
// Removing ones, which are listed until their keys are handed on), through
// dest.
func (r *Runner) place(h v1alpha1.Handoff) (route, error) {
	return func(key string) (destination, bool) {
		table := v1alpha1.Kept(r.table(h.Zone))
		if len(table) == 0 {
			return destination{}, false
		}
		return r.dest(h, table[slots.Place([]byte(key), len(table))])
	}, nil
}

// refill routes a Refill source's items: each whose key hashes, in the
// filled zone's table as it is now, to the slot the entry fills goes to
// the Pod that holds it there, while that is still the Pod the entry
// fills (dest). The others stay: the source holds the same slot in its
// own zone, so an item whose key hashes elsewhere is one it kept from an
// earlier change, which copied could put an older value back.
func (r *Runner) refill(h v1alpha1.Handoff) (route, error) {
	s, to, toIP, _ := h.Refilled()
	slot := int(s)
	return func(key string) (destination, bool) {
		table := v1alpha1.Kept(r.table(h.Zone))
		if slot >= len(table) || slots.Place([]byte(key), len(table)) != slot {
			return destination{stay: true}, false
		}
		if e := table[slot]; e.Pod != to || e.IP != toIP {
			return destination{}, false
		}
		return r.dest(h, table[slot])
	}, nil
}

// added routes a Grown Pod's items: each whose key hashes, in the slot
// table as it is now, to a slot at or above the first one the scale-up
// added goes there (dest). The others stay: with jump hash a scale-up
// moves keys to the added slots only, so an item whose key hashes to
// another old slot is one the source kept from an earlier change, which no
// client asks it for; copied in add mode, it could put an older value back
// in front of clients where the owner deleted or evicted the key.
func (r *Runner) added(h v1alpha1.Handoff) (route, error) {
	firstAdded, _ := h.FirstAdded()
	first := int(firstAdded)
	return func(key string) (destination, bool) {
		table := v1alpha1.Kept(r.table(h.Zone))
		if len(table) == 0 {
			return destination{stay: true}, false
		}
		n := slots.Place([]byte(key), len(table))
		if n < first {
			return destination{stay: true}, false
		}
		return r.dest(h, table[n])
	}, nil
}
