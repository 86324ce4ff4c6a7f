// Package contract is what the hook and the agent agree on, in one place:
// the hook writes it and the agent reads it, or the other way round, in
// two binaries that can run different versions while an upgrade rolls.
//
//   - memcached's port, and the keys of memcached the agent reserves
//     (ReservedKeyPrefix, DoneKey, which the hook's preStop waits for);
//   - the name of the agent's children (AgentName): the ConfigMap the
//     agent reports hand-offs in is one of them;
//   - where a hand-off's progress is reported (ReportKey; its state is
//     the API's v1alpha1.HandoffState, since the status carries it);
//   - the hand-off's timings (timing.go: Settle, ClientMove, PreStopSleep,
//     MaxCatchUp, LockTTL...), one protocol whose relation a test holds:
//     the hook writes them into the Pod templates and acts on the slot
//     table by them, the agent takes them as its defaults;
//   - the slot table's order, which every reader relies on (CheckOrder,
//     Ordered), and its bound (MaxSlots);
//   - the pool file the agent writes for memcached's proxy and the proxy's
//     Lua reads (RenderPool, and ParsePool, the Lua's reading rules in Go).
//
// It depends on the API types alone: the hook's logic (sync/memcached) and
// Metacontroller's wire (sync/metacontroller) are the hook's, and the agent
// imports neither of them for what it shares with the hook.
package contract

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
)

// Port is memcached's, on the memcached Pods, their Service and the proxy:
// the agent copies items to it and puts it in the lists it serves.
const Port = 11211

// ReservedKeyPrefix starts the keys the agent keeps for itself in
// memcached: it never copies them. DoneKey is the item it sets on a
// leaving memcached once it has handed every item on (or found nothing to
// hand on): the leaving Pod's preStop waits for it, asking its own
// memcached, with nothing but the image's shell tools.
const (
	ReservedKeyPrefix = "__memcached-operator/"
	DoneKey           = ReservedKeyPrefix + "handoff/done"
)

// AgentSuffix ends the names of the agent's children: its ServiceAccount,
// Role and RoleBinding, its Deployment, and the ConfigMap it reports
// hand-offs in. It is shorter than v1alpha1.DiscoverySuffix, so the API's
// bound on a name holds for it too.
const AgentSuffix = "-agent"

// AgentName is the name of the agent's children of the Memcached name.
func AgentName(name string) string { return name + AgentSuffix }

// ReportKey is where the agent reports a hand-off's progress (a data key
// of ConfigMap NAME-agent) and where the hook reads it: the Pod's name,
// and for a Moved hand-off "_" and the slot it moved into ('_' is in no
// Pod name). A Pod may move more than once in its life; a report left
// from an earlier move, Done or Failed, must not end a later one before
// it started.
//
// A Grown hand-off's key is the Pod's name, "_", the first slot added,
// "_" and the Pod that took it (two '_', where a Moved key has one): a
// Pod stays through many scale-ups (an autoscaler's up and down), and a
// report of an earlier one must not end the next. The first added
// slot's Pod is new in each scale-up (a Pod never moves up into a slot),
// so the key is one plan's.
//
// A Refill's key names the source Pod, the slot, the Pod filled and its
// zone, and "_flush" when it empties that Pod first: the Pod's first fill
// and its fill after it came back (a partition, a NotReady spell) are two
// plans of the same source, slot and Pod, and the first one's report,
// until the agent removes it, must not end the second before it started
// (TestModel in sync/slots found it: the flush was skipped).
//
// ParseReportKey reads a key back; nothing else takes one apart.
func ReportKey(h v1alpha1.Handoff) string {
	if s, to, _, ok := h.Refilled(); ok {
		key := h.Pod + reportKeySep + strconv.Itoa(int(s)) + reportKeySep + to + reportKeySep + h.Zone
		if h.Flush {
			key += reportKeySep + flushPart
		}
		return key
	}
	if s, ok := h.MovedInto(); ok {
		return h.Pod + reportKeySep + strconv.Itoa(int(s))
	}
	if s, ok := h.FirstAdded(); ok {
		return h.Pod + reportKeySep + strconv.Itoa(int(s)) + reportKeySep + h.To
	}
	return h.Pod
}

// reportKeySep separates a report key's parts: it is in no Pod name.
const reportKeySep = "_"

// flushPart ends the key of a Refill that flushes first.
const flushPart = "flush"

// Reported is what a report key names (ParseReportKey): the hand-off's
// Pod and, for a Pod that stays, its reason (Moved, Grown) and slot (the
// slot it moved into, the first slot added), and for Grown the first
// added slot's Pod (To). A Refill's names the source Pod, the slot, the
// Pod filled and its zone: a source fills one Pod at a time, and the same
// slot again later is another Pod. A leaving Pod's key (Replaced,
// Removed, NoSlot) names the Pod alone: Reason is empty.
type Reported struct {
	Pod    string
	Reason v1alpha1.HandoffReason
	Slot   int32
	To     string
	// Zone is a Refill's: the zone of the Pod filled (To); Flush, whether
	// it empties that Pod first.
	Zone  string
	Flush bool
}

// ParseReportKey reads a key ReportKey made, and tells whether it is one.
func ParseReportKey(key string) (Reported, bool) {
	parts := strings.Split(key, reportKeySep)
	r := Reported{Pod: parts[0]}
	if len(parts) == 5 && parts[4] == flushPart {
		r.Flush, parts = true, parts[:4]
	}
	if r.Pod == "" || len(parts) > 4 {
		return Reported{}, false
	}
	if len(parts) == 1 {
		return r, true
	}
	slot, err := strconv.ParseInt(parts[1], 10, 32)
	if err != nil || slot < 0 || strconv.FormatInt(slot, 10) != parts[1] {
		return Reported{}, false
	}
	r.Slot, r.Reason = int32(slot), v1alpha1.HandoffMoved
	switch len(parts) {
	case 3:
		r.Reason, r.To = v1alpha1.HandoffGrown, parts[2]
	case 4:
		if parts[2] == "" || parts[3] == "" {
			return Reported{}, false
		}
		r.Reason, r.To, r.Zone = v1alpha1.HandoffRefill, parts[2], parts[3]
	}
	return r, true
}

// MaxSlots bounds the slot table: no slot number reaches it. It is the
// largest spec.size, and the most lines a pool file has: proxy.lua's
// MAX_SLOTS, which a test holds equal.
const MaxSlots = 1000

// CheckOrder tells whether a slot table's entries are slots 0, 1, 2... in
// order, with no gap and none twice: an entry's place in the list is its
// slot, to every reader of the table (the line order of a pool file is the
// proxy's distribution). It names the first entry that is not.
func CheckOrder(slots []v1alpha1.Slot) error {
	for i, e := range slots {
		if int(e.Slot) != i {
			return fmt.Errorf("status.slotTable.slots[%d] is slot %d: the table must list slots 0 to %d in order", i, e.Slot, len(slots)-1)
		}
	}
	return nil
}

// Ordered is a slot table as its readers take it from a status: t, or no
// table at all when its entries are out of order (CheckOrder), which only
// a hand can write. The hook then rebuilds the table from the Pods; the
// agent serves no list from it.
func Ordered(t v1alpha1.SlotTable) v1alpha1.SlotTable {
	if CheckOrder(t.Slots) != nil {
		return v1alpha1.SlotTable{}
	}
	return t
}
