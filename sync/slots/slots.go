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

	"github.com/example/memcached-operator/sync/api/v1alpha1"
)

// MaxSlots bounds the table: no slot number reaches it. It is the largest
// spec.size, so that a status edited by hand (slot 1000000) cannot make the
// hook write a table of a million entries.
const MaxSlots = 1000

// Settle is how long after the second an event is stamped with the hook
// waits before it acts on it (see Assign): the API server and the kubelet
// stamp events to the second, so an event stamped t happened before t+1 s,
// and Settle leaves one more second for it to reach Metacontroller's
// cache, where every sync that acts on the event sees the events of that
// second with it.
const Settle = 2 * time.Second

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

// Assign returns the slot table for size slots, given the table the status
// held before (prev, possibly stale, empty or edited by hand), the
// Memcached's Pods that have not finished, terminating ones included, and
// the time. It also returns how long until an event it saw but did not act
// on yet settles (0 when none): the caller syncs again then.
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
//     free longest. Slots free from the start (no Pod, or its Pod gone, or
//     new in a scale-up) are free longest, in ascending order, and Pods
//     moving down take them first.
//   - An event (a Pod turning Ready, a Pod's deletion asked) is acted on
//     only once it has settled, Settle after the second it is stamped
//     with. Until then the Ready Pod waits unlisted, and the terminating
//     Pod's slot stays Leaving.
//   - A slot at or above size stays while a Pod that is not terminating
//     holds it and no slot below size is free for it (the Deployment has
//     not yet removed the Pods a scale-down removes); the table ends after
//     the last such slot, and is never shorter than size.
//
// A Ready Pod without a slot (one more than size during a rolling update's
// surge, before the Pod it replaces starts terminating) waits unlisted:
// listing it would give it a place it must give up a moment later, moving
// keys twice.
//
// # Stale statuses
//
// Metacontroller syncs from its informer's copy of the Memcached, which can
// lack the status the last sync or two wrote; it then writes the status
// computed from that copy over the newer one. Its Pods, though, are never
// older than the last sync's. So the table is a replay: the events prev
// has not taken in, in the order their timestamps give (same second:
// turning Ready before deletion, then by name and slot). Replaying from a
// table a write or two old meets the same events in the same order as the
// syncs that wrote the newer tables, with nothing new among them (the
// newer events are stamped later: that is what the settling is for), and
// reaches the same decisions. So a Pod published Serving in a slot keeps it
// whichever earlier status a sync is given, and a hand-off names the Pod
// that ends up holding the slot.
//
// What it cannot promise, because no object records enough to replay:
//
//   - a status wiped whole, or written by hand: the table is rebuilt from
//     the Pods, each in the order above, not where it was;
//   - a terminating Pod that is gone (its record with it) before a status
//     that saw its slot taken lands: from an older status its slot counts
//     as free from the start, which changes the pairing only when other
//     slots were free then too (a terminating Pod stays 10 s at least);
//   - a Pod without a slot that turns NotReady, or a Pod deleted again
//     with a shorter grace period, within a write or two of a decision
//     that involved it: its timestamp moved;
//   - a spec.size change that lands between a sync's copy and the status
//     it wrote, while slots are free;
//   - clocks more than a second apart, or events that take more than a
//     second to reach Metacontroller's cache.
func Assign(prev []v1alpha1.Slot, size int32, pods []Pod, now time.Time) ([]v1alpha1.Slot, time.Duration) {
	n := int(min(max(size, 0), MaxSlots))
	byName := make(map[string]Pod, len(pods))
	for _, p := range pods {
		byName[p.Name] = p
	}

	// owner is each slot's Pod from the previous table, for Pods that
	// still exist. An entry that makes no sense (a slot out of range or
	// listed twice, a Pod in two slots) is dropped; the first one wins.
	owner := make(map[int]string, len(prev))
	slotOf := make(map[string]int, len(prev))
	for _, e := range prev {
		s := int(e.Slot)
		if s < 0 || s >= MaxSlots || e.Pod == "" {
			continue
		}
		if _, taken := owner[s]; taken {
			continue
		}
		if _, twice := slotOf[e.Pod]; twice {
			continue
		}
		if _, exists := byName[e.Pod]; !exists {
			continue
		}
		owner[s], slotOf[e.Pod] = e.Pod, s
	}
	take := func(name string, s int) {
		if old, ok := slotOf[name]; ok {
			delete(owner, old)
		}
		owner[s], slotOf[name] = name, s
	}

	// The events not taken in yet: settled ones to replay, and the time
	// the first unsettled one settles.
	var events []event
	var pending time.Duration
	add := func(e event) {
		if wait := e.at.Add(Settle).Sub(now); wait > 0 {
			if pending == 0 || wait < pending {
				pending = wait
			}
			return
		}
		events = append(events, e)
	}
	// free are the slots below size free from the start, ascending.
	var free []int
	for s := range n {
		name, ok := owner[s]
		switch {
		case !ok:
			free = append(free, s)
		case byName[name].Leaving:
			add(event{at: byName[name].LeavingSince, freed: true, slot: s})
		}
	}
	for _, p := range pods {
		if _, slotted := slotOf[p.Name]; !slotted && p.canServe() {
			add(event{at: p.ReadySince, pod: p.Name})
		}
	}
	slices.SortFunc(events, compareEvents)

	// movers hold a slot at or above size and can serve: they move down,
	// the highest slot first.
	var movers []string
	for s, name := range owner {
		if s >= n && byName[name].canServe() {
			movers = append(movers, name)
		}
	}
	slices.SortFunc(movers, func(a, b string) int { return cmp.Compare(slotOf[b], slotOf[a]) })
	for len(movers) > 0 && len(free) > 0 {
		take(movers[0], free[0])
		movers, free = movers[1:], free[1:]
	}

	// The replay. free and waiting are never both non-empty.
	var waiting []string
	for _, e := range events {
		switch {
		case !e.freed && len(free) > 0:
			take(e.pod, free[0])
			free = free[1:]
		case !e.freed:
			waiting = append(waiting, e.pod)
		case len(waiting) > 0:
			take(waiting[0], e.slot)
			waiting = waiting[1:]
		case len(movers) > 0:
			take(movers[0], e.slot)
			movers = movers[1:]
		default:
			free = append(free, e.slot)
		}
	}

	// The table runs to size, and past it to the last slot a Pod that is
	// not terminating still holds.
	end := n
	for s, name := range owner {
		if s >= n && !byName[name].Leaving {
			end = max(end, s+1)
		}
	}
	table := make([]v1alpha1.Slot, end)
	for s := range end {
		e := v1alpha1.Slot{Slot: int32(s), State: v1alpha1.SlotEmpty}
		if name, ok := owner[s]; ok {
			p := byName[name]
			e.Pod, e.IP = p.Name, p.IP
			switch {
			case p.Leaving:
				e.State = v1alpha1.SlotLeaving
			case p.canServe():
				e.State = v1alpha1.SlotServing
			default:
				e.State = v1alpha1.SlotNotReady
			}
		}
		table[s] = e
	}
	return table, pending
}

// event is what the slot table replays: a Pod without a slot turning
// Ready, or a slot freed by its Pod's deletion.
type event struct {
	at    time.Time
	freed bool
	pod   string // turning Ready
	slot  int    // freed
}

// compareEvents orders events by time; in the same second (timestamps
// have no finer grain) a Pod turning Ready comes before a deletion, as in
// a rolling update, where the Deployment deletes a Pod once its successor
// is Ready; then by name or slot.
func compareEvents(a, b event) int {
	return cmp.Or(
		a.at.Truncate(time.Second).Compare(b.at.Truncate(time.Second)),
		compareBool(a.freed, b.freed),
		strings.Compare(a.pod, b.pod),
		cmp.Compare(a.slot, b.slot),
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

// Served returns the servers clients are given: the Serving slots' Pods, in
// slot order. Host is the Pod's name in the headless Service
// (service.namespace.svc) as the cluster DNS publishes it for a Ready
// endpoint without a hostname: its address with '.' and ':' made '-'
// (10-244-1-7.cache.default.svc). Inside the cluster it resolves through
// the Pods' DNS search path (…svc.cluster.local, whatever the cluster's
// domain); ip is always set, for clients that connect to it.
func Served(table []v1alpha1.Slot, service, namespace string, port int) []Node {
	var nodes []Node
	for _, e := range table {
		if e.State != v1alpha1.SlotServing || e.IP == "" {
			continue
		}
		dashed := strings.NewReplacer(".", "-", ":", "-").Replace(e.IP)
		nodes = append(nodes, Node{Host: dashed + "." + service + "." + namespace + ".svc", IP: e.IP, Port: port})
	}
	return nodes
}

// Version returns the table's version: prev's when the served list (the
// Serving slots' addresses in slot order) is what prev served, otherwise
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
		for i < len(t) && (t[i].State != v1alpha1.SlotServing || t[i].IP == "") {
			i++
		}
		return i
	}
	i, j := next(a, 0), next(b, 0)
	for i < len(a) && j < len(b) {
		if a[i].IP != b[j].IP {
			return false
		}
		i, j = next(a, i+1), next(b, j+1)
	}
	return i == len(a) && j == len(b)
}
