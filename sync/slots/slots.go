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
// back from the status, and the same inputs always give the same table.
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

// Pod is what the slot table needs to know of a memcached Pod.
type Pod struct {
	Name string
	IP   string
	// Ready is the Pod's Ready condition, in the Running phase.
	Ready bool
	// Leaving is set once the Pod is terminating (it has a deletion
	// timestamp): it keeps serving for its grace period, but a Ready Pod
	// may take its slot.
	Leaving bool
}

// canServe tells whether a Pod may be listed: Ready, not leaving, with an
// address.
func (p Pod) canServe() bool { return p.Ready && !p.Leaving && p.IP != "" }

// Assign returns the slot table for size slots, given the table the status
// held before (prev, possibly empty or edited by hand) and the Memcached's
// Pods that have not finished, terminating ones included. The rules:
//
//   - A Pod keeps its slot for as long as it exists and is not terminating,
//     Ready or not: a Pod that fails its readiness probe comes back to the
//     same place, with its items.
//   - A slot whose Pod is gone is Empty; one whose Pod is terminating is
//     Leaving, until a Ready Pod takes it or the Pod is gone.
//   - Only a Ready Pod with an address takes a slot. Free slots below size
//     (Empty or Leaving) are taken in ascending order, first by Ready Pods
//     holding a slot at or above size (a scale-down: the highest first, so
//     the table shrinks from the top), then by Ready Pods without a slot, by
//     name.
//   - A slot at or above size stays while a Pod that is not terminating
//     holds it and no slot below size is free for it (the Deployment has
//     not yet removed the Pods a scale-down removes); the table ends after
//     the last such slot, and is never shorter than size.
//
// A Ready Pod without a slot (one more than size during a rolling update's
// surge, before the Pod it replaces starts terminating) waits unlisted:
// listing it would give it a place it must give up a moment later, moving
// keys twice.
func Assign(prev []v1alpha1.Slot, size int32, pods []Pod) []v1alpha1.Slot {
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

	// free are the slots below size that a Ready Pod may take.
	var free []int
	for s := range n {
		if name, ok := owner[s]; !ok || byName[name].Leaving {
			free = append(free, s)
		}
	}
	// movers hold a slot at or above size and can serve: they move down
	// first, the highest slot first.
	var movers []string
	for s, name := range owner {
		if s >= n && byName[name].canServe() {
			movers = append(movers, name)
		}
	}
	slices.SortFunc(movers, func(a, b string) int { return cmp.Compare(slotOf[b], slotOf[a]) })
	// newcomers hold no slot and can serve, by name.
	var newcomers []string
	for _, p := range pods {
		if _, slotted := slotOf[p.Name]; !slotted && p.canServe() {
			newcomers = append(newcomers, p.Name)
		}
	}
	slices.Sort(newcomers)

	for _, name := range append(movers, newcomers...) {
		if len(free) == 0 {
			break
		}
		s := free[0]
		free = free[1:]
		if old, ok := slotOf[name]; ok {
			delete(owner, old)
		}
		owner[s], slotOf[name] = name, s
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
	return table
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
