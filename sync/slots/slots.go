// Package slots gives every memcached Pod of a Memcached a stable place in
// its server list, the slot table, and derives from it what clients are
// served: the list in slot order and its version.
//
// Clients and the proxy spread keys over the servers by their place in the
// list (the proxy's jump hash over the backend order, clients' modulo over
// the server list), so the place must not depend on anything that changes
// when a Pod does: not the Pod's IP, not its name, not the order Kubernetes
// lists Pods in. A Pod that replaces another takes its slot, so only the
// replaced Pod's keys move; a new Pod takes the lowest free slot; a
// scale-down moves a Pod from a slot being removed into a freed one below,
// so the slots stay 0..size-1 (jump hash needs them contiguous: removing
// the last of N slots moves only its keys, removing one in the middle and
// closing the gap moves most).
//
// The hook computes the table and writes it into the Memcached's status; the
// agent reads it there. It is pure and stateless: the previous table comes
// back from the status, possibly stale (see Assign), and the same inputs and
// time always give the same table.
package slots

import (
	"cmp"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
)

// MaxSlots bounds the table: no slot number reaches it. It is the largest
// spec.size, so that a status edited by hand (slot 1000000) cannot make the
// hook write a table of a million entries; and the proxy takes no more
// (contract.MaxSlots, where the bound is kept).
const MaxSlots = contract.MaxSlots

// Settle is how long after the second an event is stamped with the hook
// waits before it acts on it (see Assign; contract.Settle, with the
// hand-off's other timings): the API server and the kubelet stamp events
// to the second, so an event stamped t happened before t+1 s, and Settle
// leaves one more second for it to reach Metacontroller's cache, where
// every sync that acts on the event sees the events of that second with
// it.
const Settle = contract.Settle

// Pod is what the slot table needs to know of a memcached Pod.
type Pod struct {
	Name string
	IP   string
	// Ready is the Pod's Ready condition, in the Running phase.
	Ready bool
	// ReadySince is when the Ready condition last turned True (its
	// lastTransitionTime; the Pod's creation when it has none): the order
	// in which Pods without a slot take one.
	ReadySince time.Time
	// Leaving is set once the Pod is terminating (it has a deletion
	// timestamp): it keeps serving for its grace period, but a Ready Pod
	// may take its slot.
	Leaving bool
	// LeavingSince is when its deletion was asked (the deletion timestamp
	// less the grace period): the order in which slots are freed.
	LeavingSince time.Time
}

// canServe tells whether a Pod may be listed: Ready, not leaving, with an
// address.
func (p Pod) canServe() bool { return p.Ready && !p.Leaving && p.IP != "" }

// Assignment is what Assign decides.
type Assignment struct {
	// Slots is the slot table, Waiting the Ready Pods without a slot in
	// the order they take one, and EventsUntil the time of the last event
	// taken in (the status's slotTable carries all three).
	Slots       []v1alpha1.Slot
	Waiting     []string
	EventsUntil *metav1.Time
	// Took names, for each terminating Pod whose slot another Pod took in
	// this sync's replay, that Pod and the slot: whom its items go to
	// (Handoffs).
	Took map[string]Successor
	// Pending is how long until an event the table waits on settles (0
	// when none): the caller syncs again then.
	Pending time.Duration
}

// Successor is the Pod that took a terminating Pod's slot.
type Successor struct {
	Pod  string
	Slot int
}

// Assign returns the slot table for size slots, given the table the status
// held before (prev, possibly stale, empty or edited by hand), the
// Memcached's Pods that have not finished, terminating ones included, and
// the time.
//
// The rules:
//
//   - A Pod keeps its slot for as long as it exists and is not terminating,
//     Ready or not: a Pod that fails its readiness probe comes back to the
//     same place, with its items.
//   - A slot whose Pod is gone is Empty; one whose Pod is terminating is
//     Leaving, until a Ready Pod takes it or the Pod is gone.
//   - Only a Ready Pod with an address takes a slot, and slots are taken
//     in the order things happened, as the Pods record it: a slot freed
//     when its Pod began terminating (its deletion asked) goes to the Pod
//     that has waited longest since it turned Ready, or, if none waits, to
//     a Pod moving down from a slot at or above size (a scale-down: the
//     highest first); a Pod that turns Ready takes the slot that has been
//     free longest. Slots free with no Pod (never taken, or their Pod
//     gone, or new in a scale-up) come first, in ascending order (those
//     whose Pod prev still lists, gone since, after the others), then
//     those freed by a deletion, in the order of the deletions; Pods
//     moving down take them first.
//   - An event (a Pod turning Ready, a Pod's deletion asked) is acted on
//     only once it has settled, Settle after the second it is stamped
//     with. Until then the Ready Pod waits unlisted, and the terminating
//     Pod's slot stays Leaving.
//   - A slot at or above size stays while a Pod holds it that has not
//     left and no slot below size is free for it (the Deployment has not
//     yet removed the Pods a scale-down removes); the table ends after the
//     last such slot, and is never shorter than size. A Pod has left once
//     its deletion is taken in: until that event settles, a terminating
//     Pod keeps its slot above size, Leaving, and may still move down
//     into a slot freed before it.
//
// A Ready Pod without a slot (one more than size during a rolling update's
// surge, before the Pod it replaces starts terminating) waits unlisted:
// listing it would give it a place it must give up a moment later, moving
// keys twice.
//
// It replays the events since prev (see Stale statuses), one phase after
// another: read what prev recorded (the table, who waits, what is free),
// read the events since, fill what was free, replay the events, write the
// table.
//
// # Stale statuses
//
// Metacontroller syncs from its informer's copy of the Memcached, which can
// lack the status the last sync or two wrote; it then writes the status
// computed from that copy over the newer one. Its Pods, though, are never
// older than the last sync's. So the table is a replay. prev records its
// state when it took in its last event (prev.EventsUntil): who holds each
// slot, who waits (prev.Waiting), which slots are free and since when
// (the deletion time of the Pod still listed in them). Assign replays from
// there the events after it, in the order their timestamps give (same
// second: turning Ready before deletion, then by name), a Pod that took a
// slot and left it since prev was written included. Replaying from a
// table a write or two old meets the same events in the same order as the
// syncs that wrote the newer tables did, with nothing new among them (the
// newer events are stamped later: that is what the settling is for), and
// reaches the same decisions. So a Pod published Serving in a slot keeps
// it whichever earlier status a sync is given, and a hand-off names the
// Pod that took the slot.
//
// What it cannot promise, because no object records enough to replay:
//
//   - a status wiped whole, written by hand or by a hook before this one:
//     the table is rebuilt from the Pods (without EventsUntil, every Ready
//     Pod without a slot waits, in the order it turned Ready);
//   - a terminating Pod that is gone (its record with it) before a status
//     that saw its slot taken lands: from an older status its slot counts
//     as free with no Pod, which changes the pairing only when other
//     slots were free then too (a terminating Pod stays 10 s at least);
//   - a Pod lost (gone with no deletion asked, as a lost node's Pods
//     are) while other slots are Empty: when it went is not recorded, so
//     its slot is free after the Empty ones from a table that lists it,
//     and among them, ascending, from a table written since, and a Pod
//     that turns Ready then may be given either (after the Empty ones, a
//     Pod that turned Ready while the lost one still held its slot keeps
//     the one it took, the likelier case);
//   - a Pod that turns NotReady, or is deleted again with a shorter grace
//     period, within a write or two of a decision that involved it before
//     it held a slot: its timestamp moved;
//   - a spec.size change that lands between a sync's copy and the status
//     it wrote, while slots are free;
//   - clocks more than a second apart, or events that take more than a
//     second to reach Metacontroller's cache.
func Assign(prev v1alpha1.SlotTable, size int32, pods []Pod, now time.Time) Assignment {
	r := newReplay(prev, size, pods, now)
	r.readTable(prev.Slots)
	r.readWaiting(prev, pods)
	r.readFree()
	r.readEvents(pods)
	r.fillFree()
	r.replayEvents()
	return Assignment{
		Slots:       r.table(),
		Waiting:     r.waiting,
		EventsUntil: &metav1.Time{Time: r.lastEvent.UTC()},
		Took:        r.took,
		Pending:     r.pending,
	}
}

// replay is Assign's work, one method a phase: the table prev recorded,
// the events since, and the decisions they lead to (Assign's Stale
// statuses says why it replays).
type replay struct {
	n   int // the slots below size
	now time.Time
	// pods are the Pods Assign was given, byName their places in it.
	pods   []Pod
	byName map[string]int

	// owner is each slot's Pod, for Pods that still exist, and slotOf
	// each such Pod's slot; gonePod are the slots prev listed a Pod in
	// that is gone. owner and gonePod are indexed by slot: slices cost a
	// 1,000-slot table less than maps by slot did (no hashing, one
	// allocation each).
	owner   []holder
	slotOf  map[string]int
	gonePod []bool

	// hadUntil tells whether prev recorded the last event it took in;
	// until is that event's time (no later than what has settled by
	// now), and lastEvent the last one taken in once the replay is over.
	hadUntil         bool
	until, lastEvent time.Time

	// waiting are the Ready Pods without a slot, in the order they take
	// one (waits, as a set); free the slots below size no Pod holds, in
	// the order they are taken; movers the Pods above size that move
	// down, highest slot first; events what happened since until, in
	// order.
	waiting []string
	waits   map[string]bool
	free    []int
	movers  []string
	events  []event

	// took and pending are Assignment's Took and Pending.
	took    map[string]Successor
	pending time.Duration
}

// newReplay starts a replay: the Pods by name, and until, the last event
// prev took in. A table without it (the first one, or one written by hand
// or by an earlier hook) took in every event settled by now.
func newReplay(prev v1alpha1.SlotTable, size int32, pods []Pod, now time.Time) *replay {
	r := &replay{
		n: int(min(max(size, 0), MaxSlots)), now: now, pods: pods, byName: make(map[string]int, len(pods)),
		slotOf: make(map[string]int, len(prev.Slots)), waits: map[string]bool{}, took: map[string]Successor{},
	}
	// Slots run to size, and past it to the last slot prev lists: no
	// slot above both is ever held.
	end := r.n
	for _, e := range prev.Slots {
		if s := int(e.Slot); s >= end && s < MaxSlots {
			end = s + 1
		}
	}
	r.owner, r.gonePod = make([]holder, end), make([]bool, end)
	for i, p := range pods {
		r.byName[p.Name] = i
	}
	settled := now.Add(-Settle).Truncate(time.Second)
	r.until, r.hadUntil = settled, prev.EventsUntil != nil
	if r.hadUntil {
		r.until = prev.EventsUntil.Truncate(time.Second)
	}
	r.lastEvent = r.until
	if r.until.After(settled) {
		// Written by a hook whose clock runs ahead: events up to it are
		// replayed as they settle here, and it stays as it is, so that
		// two hooks do not write it in turn.
		r.until = settled
	}
	return r
}

// pod returns the Pod of that name, if Assign was given one (the last,
// if it was given two).
func (r *replay) pod(name string) (Pod, bool) {
	i, ok := r.byName[name]
	if !ok {
		return Pod{}, false
	}
	return r.pods[i], true
}

// named is pod's Pod alone: the zero Pod for a name Assign was not given.
func (r *replay) named(name string) Pod {
	p, _ := r.pod(name)
	return p
}

// takenIn tells whether an event stamped t was taken in by prev (it is no
// later than until).
func (r *replay) takenIn(t time.Time) bool { return !t.Truncate(time.Second).After(r.until) }

// canTake tells whether a Pod may take a slot: Ready, with an address.
func canTake(p Pod) bool { return p.Ready && p.IP != "" }

// readTable reads each slot's Pod from the previous table, for Pods that
// still exist. An entry that makes no sense (a slot out of range or
// listed twice, a Pod in two slots) is dropped; the first one wins.
func (r *replay) readTable(prev []v1alpha1.Slot) {
	for _, e := range prev {
		s := int(e.Slot)
		if s < 0 || s >= MaxSlots || e.Pod == "" {
			continue
		}
		if r.owner[s].held {
			continue
		}
		if _, twice := r.slotOf[e.Pod]; twice {
			continue
		}
		if _, exists := r.pod(e.Pod); !exists {
			r.gonePod[s] = true
			continue
		}
		r.owner[s], r.slotOf[e.Pod] = holder{e.Pod, true}, s
	}
}

// holder is a slot's Pod, if it has one (held).
type holder struct {
	pod  string
	held bool
}

// take gives slot s to Pod name, and records whom a terminating Pod's slot
// went to (Took).
func (r *replay) take(name string, s int) {
	if was := r.owner[s]; was.held && r.named(was.pod).Leaving {
		r.took[was.pod] = Successor{Pod: name, Slot: s}
	}
	if old, ok := r.slotOf[name]; ok {
		r.owner[old] = holder{}
	}
	r.owner[s], r.slotOf[name] = holder{name, true}, s
}

// readWaiting reads the Pods that waited for a slot at until: prev's, or,
// without EventsUntil, the Ready Pods without one, in the order they
// turned Ready.
func (r *replay) readWaiting(prev v1alpha1.SlotTable, pods []Pod) {
	if r.hadUntil {
		for _, name := range prev.Waiting {
			_, slotted := r.slotOf[name]
			p, exists := r.pod(name)
			if exists && !slotted && !r.waits[name] && canTake(p) && r.takenIn(p.ReadySince) && !(p.Leaving && r.takenIn(p.LeavingSince)) {
				r.waiting = append(r.waiting, name)
				r.waits[name] = true
			}
		}
		return
	}
	var ready []event
	for _, p := range pods {
		if _, slotted := r.slotOf[p.Name]; !slotted && canTake(p) && !p.Leaving && r.takenIn(p.ReadySince) {
			ready = append(ready, event{at: p.ReadySince, pod: p.Name})
		}
	}
	slices.SortFunc(ready, compareEvents)
	for _, e := range ready {
		r.waiting = append(r.waiting, e.pod)
		r.waits[e.pod] = true
	}
}

// readFree reads the slots below size a Pod may take at until: those prev
// left Empty, ascending; then those whose Pod is gone since (when it went
// is not recorded), ascending; then those whose Pod's deletion was taken
// in, in the order of the deletions.
func (r *replay) readFree() {
	var gone []int
	var freed []event
	for s := range r.n {
		name, ok := r.owner[s].pod, r.owner[s].held
		switch {
		case !ok && !r.gonePod[s]:
			r.free = append(r.free, s)
		case !ok:
			gone = append(gone, s)
		case r.named(name).Leaving && r.takenIn(r.named(name).LeavingSince):
			freed = append(freed, event{at: r.named(name).LeavingSince, pod: name, leaves: true})
		}
	}
	r.free = append(r.free, gone...)
	slices.SortFunc(freed, compareEvents)
	for _, e := range freed {
		r.free = append(r.free, r.slotOf[e.pod])
	}
}

// readEvents collects the events after until, in order: Pods turning
// Ready (those that hold no slot and do not wait) and deletions asked,
// each once settled.
func (r *replay) readEvents(pods []Pod) {
	for _, p := range pods {
		_, slotted := r.slotOf[p.Name]
		switch {
		case slotted || r.waits[p.Name] || !canTake(p):
		case !r.takenIn(p.ReadySince):
			r.addEvent(event{at: p.ReadySince, pod: p.Name})
		case !p.Leaving:
			// Ready before the last event taken in, yet neither holding
			// a slot nor waiting: its event reached the cache late. It
			// turns Ready now, rather than never. (A terminating Pod in
			// this state took a slot and left it before prev: nothing
			// is left to do for it.)
			r.addEvent(event{at: r.until, pod: p.Name})
		}
		if p.Leaving && !r.takenIn(p.LeavingSince) {
			r.addEvent(event{at: p.LeavingSince, pod: p.Name, leaves: true})
		}
	}
	slices.SortFunc(r.events, compareEvents)
}

// addEvent takes e in if it has settled, and otherwise counts how long
// until it does (pending). An event stamped further ahead than Settle
// comes from a clock that runs ahead of the hook's (a node's): waiting for
// it would leave a Ready Pod unlisted for as long as the clocks differ, so
// it is taken in at once.
func (r *replay) addEvent(e event) {
	if wait := r.wait(e.at); wait > 0 {
		if r.pending == 0 || wait < r.pending {
			r.pending = wait
		}
		return
	}
	r.events = append(r.events, e)
	if at := e.at.Truncate(time.Second); at.After(r.lastEvent) {
		r.lastEvent = at
	}
}

// wait is how long until an event stamped at is taken in: 0 once it has
// settled, or at once if its clock runs ahead (see addEvent).
func (r *replay) wait(at time.Time) time.Duration {
	if wait := at.Truncate(time.Second).Add(Settle).Sub(r.now); wait > 0 && wait <= 2*Settle {
		return wait
	}
	return 0
}

// left tells whether a Pod's deletion has been taken in, by prev or by
// this replay: its slot at or above size went with it.
func (r *replay) left(p Pod) bool {
	return p.Leaving && (r.takenIn(p.LeavingSince) || r.wait(p.LeavingSince) == 0)
}

// fillFree gives the slots free at until: first to the movers, the Pods
// that hold a slot at or above size and could serve then (one whose
// deletion is still to be replayed could), the highest slot first, into
// the slots free longest; then to the Pods that waited (a scale-up).
func (r *replay) fillFree() {
	for s, h := range r.owner {
		if p := r.named(h.pod); h.held && s >= r.n && canTake(p) && !(p.Leaving && r.takenIn(p.LeavingSince)) {
			r.movers = append(r.movers, h.pod)
		}
	}
	slices.SortFunc(r.movers, func(a, b string) int { return cmp.Compare(r.slotOf[b], r.slotOf[a]) })
	for len(r.movers) > 0 && len(r.free) > 0 {
		r.take(r.movers[0], r.free[0])
		r.movers, r.free = r.movers[1:], r.free[1:]
	}
	for len(r.waiting) > 0 && len(r.free) > 0 {
		r.take(r.waiting[0], r.free[0])
		r.waiting, r.free = r.waiting[1:], r.free[1:]
	}
}

// replayEvents is the replay proper: each event in order, a Pod turning
// Ready taking the slot free longest or waiting, a deletion freeing its
// slot for the Pod that waited longest, else a mover. free and waiting
// are never both non-empty.
func (r *replay) replayEvents() {
	for _, e := range r.events {
		s, slotted := r.slotOf[e.pod]
		switch {
		case !e.leaves && len(r.free) > 0:
			r.take(e.pod, r.free[0])
			r.free = r.free[1:]
		case !e.leaves:
			r.waiting = append(r.waiting, e.pod)
		case !slotted:
			r.waiting = slices.DeleteFunc(r.waiting, func(name string) bool { return name == e.pod })
		case s >= r.n:
			// A slot a scale-down removes goes with its Pod.
			r.movers = slices.DeleteFunc(r.movers, func(name string) bool { return name == e.pod })
		case len(r.waiting) > 0:
			r.take(r.waiting[0], s)
			r.waiting = r.waiting[1:]
		case len(r.movers) > 0:
			r.take(r.movers[0], s)
			r.movers = r.movers[1:]
		default:
			r.free = append(r.free, s)
		}
	}
}

// table is the slot table the replay ends with: it runs to size, and past
// it to the last slot held by a Pod that has not left (see left).
//
// A terminating Pod above size whose deletion has not settled stays in
// it, Leaving: the replay has not taken its deletion in, so it may still
// move down into a slot freed before it, as a sync from an older table
// would move it. A table that dropped it would leave a sync started from
// it without that mover, and the two would give the freed slot to two
// different Pods.
func (r *replay) table() []v1alpha1.Slot {
	end := r.n
	for s, h := range r.owner {
		if h.held && s >= r.n && !r.left(r.named(h.pod)) {
			end = max(end, s+1)
		}
	}
	slots := make([]v1alpha1.Slot, end)
	for s := range end {
		e := v1alpha1.Slot{Slot: int32(s), State: v1alpha1.SlotEmpty}
		if h := r.owner[s]; h.held {
			p := r.named(h.pod)
			e.Pod, e.IP = p.Name, p.IP
			switch {
			case p.Leaving && p.Ready:
				e.State = v1alpha1.SlotLeaving
			case p.Leaving:
				// Not served: it stopped answering before it began to
				// leave (or its node is gone).
				e.State = v1alpha1.SlotNotReady
			case p.canServe():
				e.State = v1alpha1.SlotServing
			default:
				e.State = v1alpha1.SlotNotReady
			}
		}
		slots[s] = e
	}
	return slots
}

// event is what the slot table replays: a Pod turning Ready, or its
// deletion asked.
type event struct {
	at     time.Time
	pod    string
	leaves bool
}

// compareEvents orders events by time; in the same second (timestamps
// have no finer grain) a Pod turning Ready comes before a deletion, as in
// a rolling update, where the Deployment deletes a Pod once its successor
// is Ready; then by name.
func compareEvents(a, b event) int {
	return cmp.Or(
		a.at.Truncate(time.Second).Compare(b.at.Truncate(time.Second)),
		compareBool(a.leaves, b.leaves),
		strings.Compare(a.pod, b.pod),
	)
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// Node is a server as clients are given it: a DNS name, its address and
// memcached's port.
type Node struct {
	Host string
	IP   string
	Port int
}

// Addr is the node's ip:port.
func (n Node) Addr() string { return net.JoinHostPort(n.IP, strconv.Itoa(n.Port)) }

// Served returns the servers clients are given: each listed slot's
// served Pod (v1alpha1.Listed, Slot.ServedIP: a Serving or Leaving
// slot's own, a Filling slot's From), in slot order. Host is the slot's stable name when the status gives the
// slots' addresses (status.slotAddresses, spec.stableNames), so that
// clients that hash on the host keep their keys when a Pod is replaced;
// otherwise it is the Pod's name in the headless Service
// (service.namespace.svc) as the cluster DNS publishes it for a Ready
// endpoint without a hostname: its address with '.' and ':' made '-'
// (10-244-1-7.cache.default.svc). Either resolves inside the cluster
// through the Pods' DNS search path (…svc.cluster.local, whatever the
// cluster's domain); ip is always set, for clients that connect to it.
func Served(table []v1alpha1.Slot, addresses []string, service, namespace string, port int) []Node {
	var nodes []Node
	for _, e := range v1alpha1.Listed(table) {
		ip := e.ServedIP()
		if ip == "" {
			continue
		}
		host := strings.NewReplacer(".", "-", ":", "-").Replace(ip) + "." + service + "." + namespace + ".svc"
		if int(e.Slot) < len(addresses) {
			if h, _, err := net.SplitHostPort(addresses[e.Slot]); err == nil && h != "" {
				host = h
			}
		}
		nodes = append(nodes, Node{Host: host, IP: ip, Port: port})
	}
	return nodes
}

// Version returns the table's version: prev's when the served list (the
// slots' served addresses, Slot.ServedIP, in slot order) is what prev served, otherwise
// higher than prev's and at least now in Unix milliseconds.
//
// The floor of the clock is what keeps a version rising where prev cannot
// be trusted to be the last one served. After the status is wiped and
// rebuilt (prev is 0), or the Memcached deleted and made again under the
// same name, a client that saw an old version still takes the new one.
// And prev can be stale: Metacontroller syncs from its informer's copy of
// the Memcached, and on a conflict it writes the status computed from that
// copy onto the newer object, so two syncs can start from the same prev;
// in milliseconds the later one still gives the higher version (measured:
// in seconds, two such syncs within one second gave two lists one
// version, which clients ignore). This holds as long as the clocks of the
// hooks that wrote two versions agree within the time between them.
//
// Clients read the version as a 64-bit integer (the AWS Java client, Go's,
// Node's, Python's and Ruby's); one that read it into 32 bits would need
// seconds, which cannot tell two changes in one second apart.
func Version(prev v1alpha1.SlotTable, table []v1alpha1.Slot, now time.Time) int64 {
	if sameServed(prev.Slots, table) {
		return prev.Version
	}
	return max(prev.Version+1, now.UnixMilli())
}

// ServedVersion is the version a follower of the status (the agent) serves
// a table's list under, given the version it serves now (0 before its
// first list), whether the list is the one it serves, and the status's
// version: the status's, or, when that is not above the version served,
// the version served for the same list and one more for another.
//
// A status computed from a stale copy can land after a newer one (see
// Assign) with a lower version, and the list clients are served must
// follow the status that landed last: clients take a list only under a
// higher version than the one they have, so a version that went down would
// keep them on the older list until the next change. Two followers that
// see the same statuses serve the same versions; one that missed a status
// that landed out of order serves the same list under a lower version,
// which clients that have the list ignore, and the next change, versioned
// by the hook at a later time in milliseconds, is above both.
func ServedVersion(served int64, sameList bool, status int64) int64 {
	if sameList {
		return max(served, status)
	}
	return max(served+1, status)
}

// sameServed tells whether two tables serve the same addresses in the same
// order (walking both, so a 1,000-slot table costs no allocation).
func sameServed(a, b []v1alpha1.Slot) bool {
	next := func(t []v1alpha1.Slot, i int) int {
		for i < len(t) && t[i].ServedIP() == "" {
			i++
		}
		return i
	}
	a, b = v1alpha1.Listed(a), v1alpha1.Listed(b)
	i, j := next(a, 0), next(b, 0)
	for i < len(a) && j < len(b) {
		if a[i].ServedIP() != b[j].ServedIP() {
			return false
		}
		i, j = next(a, i+1), next(b, j+1)
	}
	return i == len(a) && j == len(b)
}
