package slots

import (
	"slices"
	"strings"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
)

// Handoffs says, for spec.rollout.keepWarm, where each leaving Pod's items
// go, given the table before this sync (prev), what Assign made of it (a),
// the size, the hand-offs the status held (prevHandoffs), the Pods, and the
// progress the agent reports by contract.ReportKey (reports; the agent writes them,
// the hook only carries them into the status).
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
// The transition is seen once, in the sync where the table changes; later
// syncs carry the entry forward from prevHandoffs for as long as its Pod
// exists. The result is sorted by Pod name.
func Handoffs(prev []v1alpha1.Slot, a Assignment, size int32, prevHandoffs []v1alpha1.Handoff, pods []Pod, reports map[string]v1alpha1.HandoffProgress) []v1alpha1.Handoff {
	n := int(min(max(size, 0), MaxSlots))
	table := a.Slots
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
			h = v1alpha1.Handoff{Reason: v1alpha1.HandoffWaiting, Slot: ptr(int32(now))}
		case p.Leaving && holds:
			// Its slot goes with it (a scale-down; the table is longer
			// only while a Pod above size waits to move).
			h = v1alpha1.Handoff{Reason: v1alpha1.HandoffRemoved}
		case p.Leaving && held && taken:
			h = v1alpha1.Handoff{Reason: v1alpha1.HandoffReplaced, Slot: ptr(int32(took.Slot))}
		case p.Leaving && held:
			h = v1alpha1.Handoff{Reason: v1alpha1.HandoffRemoved}
		case !p.Leaving && held && holds && was != now:
			h = v1alpha1.Handoff{Reason: v1alpha1.HandoffMoved, Slot: ptr(int32(now)), To: p.Name, ToIP: p.IP}
		case p.Leaving && hasPrev && prev.Reason == v1alpha1.HandoffMoved:
			// It moved, then started leaving before its copy ended:
			// its items now go where their keys hash.
			h = v1alpha1.Handoff{Reason: v1alpha1.HandoffRemoved}
		case p.Leaving && hasPrev:
			h = prev
		case p.Leaving && taken:
			// It took a slot and left it since prev was written.
			h = v1alpha1.Handoff{Reason: v1alpha1.HandoffReplaced, Slot: ptr(int32(took.Slot))}
		case p.Leaving:
			h = v1alpha1.Handoff{Reason: v1alpha1.HandoffNoSlot}
		default:
			if !hasPrev || prev.Reason != v1alpha1.HandoffMoved {
				continue
			}
			// A Moved copy that ended, done or failed, is over: the Pod
			// stays, and what was not handed on ages out where it is.
			if st := reports[contract.ReportKey(prev)].State; st == v1alpha1.HandoffDone || st == v1alpha1.HandoffFailed {
				continue
			}
			h = prev
		}
		if h.Reason == v1alpha1.HandoffReplaced {
			// Its items go to the slot's Pod as the table has it now:
			// the one that took it, or, if that one left too, the next.
			// A slot that went, or whose Pod is gone, is owed nothing.
			if s := int(*h.Slot); s < len(table) && table[s].Pod != "" {
				h.To, h.ToIP = table[s].Pod, table[s].IP
			} else {
				h = v1alpha1.Handoff{Reason: v1alpha1.HandoffRemoved}
			}
		}
		h.Pod, h.IP, h.Progress = p.Name, p.IP, nil
		if r, ok := reports[contract.ReportKey(h)]; ok && h.Reason != v1alpha1.HandoffWaiting {
			h.Progress = &r
		}
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b v1alpha1.Handoff) int { return strings.Compare(a.Pod, b.Pod) })
	return out
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

func ptr[T any](v T) *T { return &v }
