package slots

import (
	"slices"
	"strings"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
)

// Cell is one copy of the cache as the hand-off rules see it: a memcached
// Deployment's Pods and their slot table. A Memcached without zones is one
// cell, Zone ""; with spec.zones, each zone is one, and every cell's table
// has the same size, so that a key has the same slot in each.
type Cell struct {
	Zone string
	// Prev is the cell's table as the status held it before this sync
	// (contract.Ordered), and Assigned what Assign made of it.
	Prev     []v1alpha1.Slot
	Assigned Assignment
	// Pods are the cell's Pods as Assign saw them, terminating ones
	// included.
	Pods []Pod
}

// HandoffInput is what Handoffs decides from: the cells, the size, the
// hand-offs the status held, and the progress the agent reports by
// contract.ReportKey (the agent writes them, the hook only carries them
// into the status).
type HandoffInput struct {
	Cells []Cell
	Size  int32
	// KeepWarm is spec.rollout.keepWarm: Pods that leave, move or stay
	// through a scale-up hand their items on within their cell. Without
	// it, only Refill (across cells) is planned.
	KeepWarm bool
	Prev     []v1alpha1.Handoff
	Reports  map[string]v1alpha1.HandoffProgress
}

// Handoffs plans every hand-off of a sync: with KeepWarm, each cell's
// (Replaced, Removed, Moved, Grown, Waiting, NoSlot: see cellHandoffs),
// marked with the cell's zone; then the Refills across cells (see
// refills), whose sources are Pods that hand nothing else on. The result
// is sorted by Pod name: a Pod is in at most one entry.
func Handoffs(in HandoffInput) []v1alpha1.Handoff {
	// The rules read the tables the status held as Assign wrote them.
	cells := make([]Cell, len(in.Cells))
	for i, c := range in.Cells {
		c.Prev = Unfill(c.Prev)
		cells[i] = c
	}
	in.Cells = cells
	var out []v1alpha1.Handoff
	if in.KeepWarm {
		for _, c := range in.Cells {
			var prev []v1alpha1.Handoff
			for _, h := range in.Prev {
				if h.Zone == c.Zone {
					prev = append(prev, h)
				}
			}
			for _, h := range cellHandoffs(c, in.Size, prev, in.Reports) {
				h.Zone = c.Zone
				out = append(out, h)
			}
		}
	}
	out = append(out, refills(in, out)...)
	slices.SortFunc(out, func(a, b v1alpha1.Handoff) int { return strings.Compare(a.Pod, b.Pod) })
	return out
}

// cellHandoffs says, for spec.rollout.keepWarm, where each leaving Pod's
// items go within one cell, given the table before this sync (c.Prev),
// what Assign made of it (c.Assigned), the size, the cell's hand-offs the
// status held (prevHandoffs), the Pods, and the agent's reports.
//
// A Pod that is terminating:
//
//   - is Waiting while it holds a slot below size that waits for a Ready
//     Pod;
//   - is Replaced once a Ready Pod took its slot (as Assign's replay
//     says): all its items go to the Pod that holds the slot now, the
//     one that took it or, if that one left too, the next;
//   - is Removed when its slot went in a scale-down: each item goes to the
//     slot its key now hashes to (Place);
//   - held no slot (NoSlot): nothing is owed to anyone, the agent tells it
//     so at once.
//
// A Pod that is not terminating but moved from a removed slot into a freed
// one (a scale-down where the Deployment removed another Pod) is Moved:
// its items of the old slot go where their keys now hash, until the agent
// reports the copy Done (or Failed: the Pod stays either way).
//
// A Pod that is not terminating and holds a slot below the ones a
// scale-up added is Grown (see grown): the items whose keys now hash to
// an added slot go there, and leave it.
//
// The transition is seen once, in the sync where the table changes; later
// syncs carry the entry forward from prevHandoffs for as long as its Pod
// exists.
func cellHandoffs(c Cell, size int32, prevHandoffs []v1alpha1.Handoff, reports map[string]v1alpha1.HandoffProgress) []v1alpha1.Handoff {
	prev, a, pods := c.Prev, c.Assigned, c.Pods
	n := int(min(max(size, 0), MaxSlots))
	table := a.Slots
	// added is the first slot this sync's table adds (a scale-up: the
	// proxy's jump hash over the table moves keys to the added slots
	// only), or -1.
	added := -1
	if len(table) > len(prev) {
		added = len(prev)
	}
	prevSlot := slotsByPod(prev)
	nowSlot := slotsByPod(table)
	carried := map[string]v1alpha1.Handoff{}
	for _, h := range prevHandoffs {
		if _, dup := carried[h.Pod]; !dup {
			carried[h.Pod] = h
		}
	}

	var out []v1alpha1.Handoff
	for _, p := range pods {
		var h v1alpha1.Handoff
		was, held := prevSlot[p.Name]
		now, holds := nowSlot[p.Name]
		prev, hasPrev := carried[p.Name]
		took, taken := a.Took[p.Name]
		switch {
		case p.Leaving && holds && now < n:
			h = waiting(now)
		case p.Leaving && holds:
			// Its slot goes with it (a scale-down; the table is longer
			// only while a Pod above size waits to move).
			h = removed()
		case p.Leaving && held && taken:
			h = replaced(took.Slot)
		case p.Leaving && held:
			h = removed()
		case !p.Leaving && held && holds && was != now:
			h = moved(now, p)
		case p.Leaving && hasPrev && prev.Reason == v1alpha1.HandoffMoved:
			// It moved, then started leaving before its copy ended:
			// its items now go where their keys hash.
			h = removed()
		case p.Leaving && hasPrev:
			h = prev
		case p.Leaving && taken:
			// It took a slot and left it since prev was written.
			h = replaced(took.Slot)
		case p.Leaving:
			h = noSlot()
		case hasPrev && prev.Reason == v1alpha1.HandoffMoved && !ended(prev, reports):
			// A Moved copy goes on, through a scale-up too: it puts
			// each item where its key hashes in the table as it is
			// then, added slots included once they serve.
			h = prev
		default:
			// A Pod that stays: a Moved copy that ended, done or failed,
			// is over (what was not handed on ages out where it is); the
			// Pod may hand on to the slots a scale-up added.
			var ok bool
			if h, ok = grown(holds, now, prev, hasPrev, added, table, n, reports); !ok {
				continue
			}
		}
		h = toHolder(h, table)
		h.Pod, h.IP, h.Progress = p.Name, p.IP, nil
		if r, ok := reports[contract.ReportKey(h)]; ok && h.Reason != v1alpha1.HandoffWaiting {
			h.Progress = &r
		}
		out = append(out, h)
	}
	return out
}

// toHolder names, in a Replaced entry, the Pod its items go to: the taken
// slot's Pod as the table has it now, the one that took it or, if that one
// left too, the next. A slot that went, or whose Pod is gone, is owed
// nothing: the entry is Removed.
func toHolder(h v1alpha1.Handoff, table []v1alpha1.Slot) v1alpha1.Handoff {
	taken, ok := h.TakenSlot()
	switch s := int(taken); {
	case !ok:
		return h
	case s < len(table) && table[s].Pod != "":
		h.To, h.ToIP = table[s].Pod, table[s].IP
		return h
	}
	return removed()
}

// grown is the Grown entry of a Pod that is not terminating and holds
// slot now (holds), given its entry in the status (prev, hasPrev), the
// first slot this sync's table added (added, -1: none), the table and
// the size.
//
// A scale-up by jump hash (the proxy's, over the slots in order) moves
// keys from every slot to the added ones and nowhere else: a Pod in a
// slot below the first added one is a source, and each of its items
// whose key now hashes to an added slot goes there. Only those: an item
// whose key hashes to another old slot is one it kept from an earlier
// change and no client asks it for; copying it in add mode could put an
// older value, deleted or evicted on its owner since, back in front of
// clients.
//
// The plan is made (To named, and the agent copies) once every added
// slot below size is Serving, not as each one starts serving: the copy
// routes each item by the table as it is when it reads it, and an item
// whose slot does not serve yet stays behind, so copying as each slot
// came would take several passes over every source (3 → 6 would dump
// each source three times, and the items of slots that served late
// would be missed by the earlier passes). Until then the entry is
// listed without To, and nothing is copied; the added slots are not
// listed meanwhile (Fill: Adding), so their keys stay where they were. The
// cost of waiting: a key
// of an added slot deleted or expired on its source while the last added
// Pod was starting is still there for the copy, which brings its older
// value back onto the added slot (add mode keeps a newer one that
// clients wrote there). The wait is as long as the slowest added Pod
// takes to turn Ready, seconds when images are cached.
//
// Several scale-ups before a plan ends are one plan: the first added
// slot is the lowest of them (a Pod's unfinished entry keeps its Slot),
// and it waits for every added slot again. The entry ends when its copy
// does (the agent reports Done or Failed under its ReportKey, which names
// the plan), when the Pod starts terminating or moves (its own entry then
// takes over), or when a scale-down took every added slot away again.
// A Pod whose Moved copy has not ended when the table grows keeps that
// entry (Handoffs): the Moved copy puts its items where the grown table
// says once the added slots serve, but the items of its new slot that
// hash to an added one stay behind.
func grown(holds bool, now int, prev v1alpha1.Handoff, hasPrev bool, added int, table []v1alpha1.Slot, n int, reports map[string]v1alpha1.HandoffProgress) (v1alpha1.Handoff, bool) {
	first := -1
	if s, ok := prev.FirstAdded(); hasPrev && ok && !ended(prev, reports) {
		first = int(s)
	}
	if added >= 0 && (first < 0 || added < first) {
		first = added
	}
	if first < 0 || !holds || now >= first || first >= n {
		return v1alpha1.Handoff{}, false
	}
	h := grownFrom(first)
	for s := first; s < n; s++ {
		if s >= len(table) || table[s].State != v1alpha1.SlotServing {
			return h, true
		}
	}
	h.To, h.ToIP = table[first].Pod, table[first].IP
	return h, true
}

// ended tells whether the agent reported a copy of a Pod that stays
// (Moved, or Grown once planned) Done or Failed.
func ended(h v1alpha1.Handoff, reports map[string]v1alpha1.HandoffProgress) bool {
	if h.Reason == v1alpha1.HandoffGrown && !h.Planned() {
		return false
	}
	st := reports[contract.ReportKey(h)].State
	return st == v1alpha1.HandoffDone || st == v1alpha1.HandoffFailed
}

// slotsByPod maps each Pod of a table to its slot.
func slotsByPod(table []v1alpha1.Slot) map[string]int {
	m := make(map[string]int, len(table))
	for i, e := range table {
		if e.Pod != "" {
			m[e.Pod] = i
		}
	}
	return m
}

// The entries Handoffs writes, one a reason, each naming the slot it means
// (read back with v1alpha1.Handoff's TakenSlot, HeldSlot, MovedInto and
// FirstAdded).

// waiting is a leaving Pod's that still holds slot held, below size: no
// Ready Pod took it yet.
func waiting(held int) v1alpha1.Handoff {
	return v1alpha1.Handoff{Reason: v1alpha1.HandoffWaiting, Slot: ptr(int32(held))}
}

// replaced is a leaving Pod's whose slot a Ready Pod took; Handoffs names
// the slot's Pod now (To, ToIP) once the table is known.
func replaced(taken int) v1alpha1.Handoff {
	return v1alpha1.Handoff{Reason: v1alpha1.HandoffReplaced, Slot: ptr(int32(taken))}
}

// removed is a leaving Pod's whose slot went: its items go where their
// keys now hash.
func removed() v1alpha1.Handoff { return v1alpha1.Handoff{Reason: v1alpha1.HandoffRemoved} }

// noSlot is a leaving Pod's that held no slot: nothing to hand on.
func noSlot() v1alpha1.Handoff { return v1alpha1.Handoff{Reason: v1alpha1.HandoffNoSlot} }

// moved is a staying Pod's that moved into slot into from a removed one
// (To is the Pod itself).
func moved(into int, p Pod) v1alpha1.Handoff {
	return v1alpha1.Handoff{Reason: v1alpha1.HandoffMoved, Slot: ptr(int32(into)), To: p.Name, ToIP: p.IP}
}

// grownFrom is a staying Pod's whose items may hash to the slots a
// scale-up added from first on; unplanned (no To) until they all serve.
func grownFrom(first int) v1alpha1.Handoff {
	return v1alpha1.Handoff{Reason: v1alpha1.HandoffGrown, Slot: ptr(int32(first))}
}

func ptr[T any](v T) *T { return &v }
