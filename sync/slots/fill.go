package slots

import (
	"slices"
	"time"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
)

// FillInput is what Fill decides from: the cells as Assign left them,
// this sync's hand-offs (Handoffs, with the agent's progress), how long a
// leaving Pod's slot may wait for its successor to be filled, and the time.
type FillInput struct {
	Cells    []Cell
	Handoffs []v1alpha1.Handoff
	// Bound is how long after its deletion was asked a leaving Pod's
	// successor may be filled before the slot moves to it with what it
	// has: the leaving Pod's preStop ends later, so that clients still
	// move off it before its memcached stops.
	Bound time.Duration
	Now   time.Time
}

// Fill is make before break for a Replaced hand-off (spec.rollout.keepWarm):
// the Ready Pod that took a leaving Pod's slot is Filling, not Serving,
// until the agent reports its copy ended, so that clients go on being
// served by the leaving Pod, which holds the slot's keys, and whose writes
// the agent forwards to the successor meanwhile. Clients are pointed at the
// successor only once it holds the keys; the leaving Pod serves until they
// have moved (the agent sets its done marker then).
//
// A slot is Filling while: its entry in the table is Serving, held by the
// Pod a Replaced hand-off names (To); the leaving Pod still exists, with
// the address the entry names; its copy has not ended (no Done or Failed
// report for this successor); and Bound has not passed since its deletion
// was asked. At the bound the slot moves with what the copy gave, as it
// did before: never stuck, never a slot served by nobody.
//
// Everything Fill reads is fresh in every sync (the Pods, the reports), and
// a report that ended stays until its entry goes, so a status written from
// a stale copy marks the same slots: a slot moves to its successor once,
// and never back.
//
// It returns each cell's table, in the order of in.Cells (the Assigned
// table itself when nothing fills), and how long until the soonest bound
// of a Filling slot (0: none), when the caller syncs again.
func Fill(in FillInput) (tables [][]v1alpha1.Slot, pending time.Duration) {
	tables = make([][]v1alpha1.Slot, len(in.Cells))
	for i, c := range in.Cells {
		tables[i] = c.Assigned.Slots
	}
	for _, h := range in.Handoffs {
		slot, ok := h.TakenSlot()
		to, toIP, _ := h.Successor()
		if !ok || to == "" || filled(h) {
			continue
		}
		i := slices.IndexFunc(in.Cells, func(c Cell) bool { return c.Zone == h.Zone })
		if i < 0 {
			continue
		}
		table, s := tables[i], int(slot)
		if s >= len(table) || table[s].Pod != to || table[s].IP != toIP || table[s].State != v1alpha1.SlotServing {
			continue
		}
		src, ok := leavingPod(in.Cells[i].Pods, h.Pod)
		if !ok || src.IP == "" || src.IP != h.IP {
			continue
		}
		left := src.LeavingSince.Add(in.Bound).Sub(in.Now)
		if left <= 0 {
			continue
		}
		if pending == 0 || left < pending {
			pending = left
		}
		if &table[0] == &in.Cells[i].Assigned.Slots[0] {
			table = slices.Clone(table)
			tables[i] = table
		}
		table[s].State, table[s].From, table[s].FromIP = v1alpha1.SlotFilling, src.Name, src.IP
	}
	return tables, pending
}

// filled tells whether a Replaced entry's copy ended, done or failed, for
// the successor it names now: a report of an earlier successor (the first
// one left too) does not end this one's fill. A report that names no
// successor is an older agent's, taken as it says.
func filled(h v1alpha1.Handoff) bool {
	p := h.Progress
	if p == nil || (p.State != v1alpha1.HandoffDone && p.State != v1alpha1.HandoffFailed) {
		return false
	}
	return p.To == "" || p.To == h.To
}

// leavingPod is the terminating Pod named name among pods.
func leavingPod(pods []Pod, name string) (Pod, bool) {
	for _, p := range pods {
		if p.Name == name {
			return p, p.Leaving
		}
	}
	return Pod{}, false
}
