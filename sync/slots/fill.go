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
	// KeepWarm is spec.rollout.keepWarm, as HandoffInput's: without it
	// only the Refills' slots are marked (their Pods wait unlisted until
	// filled); the cells hand nothing on within themselves, and the rest
	// of their tables is as Assign made it.
	KeepWarm bool
	// Size is the slots kept (spec.size): a slot at or above it that
	// Assign still lists is a scale-down's.
	Size int32
	// Bound is how long after its deletion was asked a leaving Pod's
	// successor may be filled before the slot moves to it with what it
	// has: the leaving Pod's preStop ends later, so that clients still
	// move off it before its memcached stops. A Refill's Pod waits as
	// long after it turned Ready.
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
// A slot is Filling while: its entry in the table is Serving (or NotReady:
// the leaving Pod serves the keys meanwhile), held by the Pod a Replaced
// hand-off names (To); the leaving Pod still exists, Ready, with the
// address the entry names (one lost with its node stops being Ready, and
// the slot goes to its successor); its copy has not ended (no Done or Failed
// report for this successor); and Bound has not passed since its deletion
// was asked. At the bound the slot moves with what the copy gave, as it
// did before: never stuck, never a slot served by nobody.
//
// Everything Fill reads is fresh in every sync (the Pods, the reports), and
// a report that ended stays until its entry goes, so a status written from
// a stale copy marks the same slots: a slot moves to its successor once,
// and never back.
//
// A scale-up is make before break too: while a Grown copy of the cell has
// not copied its items (no Copied, Done or Failed report), the slots from
// the first one added on are Adding, and clients are given only the slots
// before them (v1alpha1.Listed), so that every key stays where it is
// until its new Pod holds it; the Grown sources' writes are forwarded
// meanwhile. At the bound after the last added slot's Pod turned Ready,
// the slots are listed with what the copies gave. Added slots whose Pods
// are not Ready yet wait unlisted, with no bound: listing them would only
// move their keys to a Pod that does not answer.
//
// And so is a scale-down: a slot it removed stays listed, Removing, past
// the others, served by its Pod (v1alpha1.Slot.ServedIP), while that Pod
// hands its keys to where they hash in the slots kept (v1alpha1.Kept): a
// removed Pod until its Removed copy ended (done or failed) or its bound
// passed, a Pod that moved into a freed slot (Moved) until its copy of
// its old slot's items has copied them. The freed slot it moved into is
// Filling from the removed Pod that held it until then, even if that
// Pod's copy is done, so that the Pod is listed once: the whole
// scale-down switches in one sync. The removed slots stay listed as a
// run, past the kept ones, while any Pod of the run still copies (a Pod
// whose copy is done serves until its slot is unlisted); the run stops at
// the first slot whose Pod is gone: a listed slot must serve. A slot
// above size that Assign still lists (its Pod's deletion has not
// settled), past every slot a staying Pod holds, is Removing too, so that
// the copy hashes over the slots kept.
//
// With spec.zones, a Refill is make before break too: the Pod that took
// a slot with nothing handed over (refill.go) is Filling, with no From,
// while the agent copies the slot's items into it from another zone (no
// Copied, Done or Failed report), so that its zone's proxies are given
// no Pod for the slot (v1alpha1.Slot.ServedIP: the pool writes it down)
// and fail its reads over to a sibling zone, as while the slot was
// empty, rather than read the new Pod empty; writes reach the other zones
// meanwhile, and the agent forwards the source's to the Pod filled. At
// the bound after the Pod turned Ready (the sync it took the slot in,
// for a Pod that took a free slot as it turned Ready: there is no other
// time the plan keeps) the slot is listed with what the copy gave; a
// Pod that waited Ready for longer than the bound before it took the
// slot is listed at once, as before make before break.
//
// What the status this sync started from published stays so: a slot it
// served from a Pod is not Filling again with that Pod, and added slots
// it listed are not Adding again, whatever a copy that starts over
// reports (an agent restarted between its Copied and its Done).
//
// It returns each cell's table, in the order of in.Cells (the Assigned
// table itself when nothing fills), and how long until the soonest bound
// of a Filling, Adding or Removing slot (0: none), when the caller syncs
// again.
func Fill(in FillInput) (tables [][]v1alpha1.Slot, pending time.Duration) {
	f := &filler{in: in, tables: make([][]v1alpha1.Slot, len(in.Cells))}
	for i, c := range in.Cells {
		f.tables[i] = c.Assigned.Slots
	}
	if in.KeepWarm {
		for i := range in.Cells {
			f.growth(i)
		}
		f.replaced()
		for i := range in.Cells {
			f.shrink(i)
		}
	}
	f.refilled()
	return f.tables, f.pending
}

// filler is Fill's work: the tables it marks, copied on the first mark,
// and the soonest bound.
type filler struct {
	in      FillInput
	tables  [][]v1alpha1.Slot
	pending time.Duration
}

// wait has the caller sync again within left.
func (f *filler) wait(left time.Duration) {
	if f.pending == 0 || left < f.pending {
		f.pending = left
	}
}

// own is cell i's table, a copy of the Assigned one before the first mark.
func (f *filler) own(i int) []v1alpha1.Slot {
	a := f.in.Cells[i].Assigned.Slots
	if len(f.tables[i]) > 0 && len(a) > 0 && &f.tables[i][0] == &a[0] {
		f.tables[i] = slices.Clone(f.tables[i])
	}
	return f.tables[i]
}

// growth marks cell i's added slots Adding while its scale-up is copied.
func (f *filler) growth(i int) {
	c := f.in.Cells[i]
	first, ok := growing(c, f.in.Handoffs)
	if !ok || (first < len(v1alpha1.Listed(c.Prev)) && c.Prev[first].Pod != "" && c.Prev[first].Pod == c.Assigned.Slots[first].Pod) {
		return // nothing to copy, or listed already
	}
	if last, ready := lastReady(c, first); ready {
		left := last.Add(f.in.Bound).Sub(f.in.Now)
		if left <= 0 {
			return
		}
		f.wait(left)
	}
	table := f.own(i)
	for s := first; s < len(table); s++ {
		table[s].State = v1alpha1.SlotAdding
	}
}

// replaced marks Filling the slots Replaced hand-offs fill.
func (f *filler) replaced() {
	// moving are the Moved Pods whose copy of their old slot's items has
	// not copied them, by zone and name: the slot each moved into stays
	// Filling until then.
	moving := map[[2]string]bool{}
	for _, h := range f.in.Handoffs {
		if _, ok := h.MovedInto(); ok && copying(h) {
			moving[[2]string{h.Zone, h.Pod}] = true
		}
	}
	for _, h := range f.in.Handoffs {
		slot, ok := h.TakenSlot()
		to, toIP, _ := h.Successor()
		if !ok || to == "" || (filled(h) && !moving[[2]string{h.Zone, to}]) {
			continue
		}
		i := slices.IndexFunc(f.in.Cells, func(c Cell) bool { return c.Zone == h.Zone })
		if i < 0 {
			continue
		}
		// The successor may turn NotReady for a while: the leaving Pod
		// still serves the keys.
		table, s, prev := f.tables[i], int(slot), f.in.Cells[i].Prev
		if s >= len(table) || table[s].Pod != to || table[s].IP != toIP ||
			(table[s].State != v1alpha1.SlotServing && table[s].State != v1alpha1.SlotNotReady) {
			continue
		}
		if s < len(prev) && prev[s].Pod == to && prev[s].State == v1alpha1.SlotServing {
			continue // served from it already
		}
		src, ok := leavingPod(f.in.Cells[i].Pods, h.Pod)
		if !ok || !src.Ready || src.IP == "" || src.IP != h.IP {
			continue
		}
		left := src.LeavingSince.Add(f.in.Bound).Sub(f.in.Now)
		if left <= 0 {
			continue
		}
		f.wait(left)
		table = f.own(i)
		table[s].State, table[s].From, table[s].FromIP = v1alpha1.SlotFilling, src.Name, src.IP
	}
}

// refilled marks Filling, with no Pod to serve them, the slots Refill
// hand-offs fill while their copies have not copied.
func (f *filler) refilled() {
	for _, h := range f.in.Handoffs {
		slot, to, toIP, ok := h.Refilled()
		if !ok || !copying(h) {
			continue
		}
		i := slices.IndexFunc(f.in.Cells, func(c Cell) bool { return c.Zone == h.Zone })
		if i < 0 {
			continue
		}
		table, s, prev := f.tables[i], int(slot), f.in.Cells[i].Prev
		if s >= len(table) || table[s].Pod != to || table[s].IP != toIP || table[s].State != v1alpha1.SlotServing {
			continue
		}
		if s < len(prev) && prev[s].Pod == to && prev[s].State == v1alpha1.SlotServing {
			continue // listed already
		}
		p := slices.IndexFunc(f.in.Cells[i].Pods, func(p Pod) bool { return p.Name == to })
		if p < 0 {
			continue
		}
		left := f.in.Cells[i].Pods[p].ReadySince.Add(f.in.Bound).Sub(f.in.Now)
		if left <= 0 {
			continue
		}
		f.wait(left)
		f.own(i)[s].State = v1alpha1.SlotFilling
	}
}

// shrink keeps cell i's removed slots listed, Removing, past the kept ones
// while their Pods hand their keys on.
func (f *filler) shrink(i int) {
	c := f.in.Cells[i]
	// The trailing slots at or above size whose Pods leave (a slot above
	// size that a staying Pod still holds is the table's until that Pod
	// moves down).
	for s := len(f.tables[i]) - 1; s >= int(max(f.in.Size, 0)) && f.tables[i][s].State == v1alpha1.SlotLeaving; s-- {
		f.own(i)[s].State = v1alpha1.SlotRemoving
	}
	removing, copies := removedSlots(c, f.tables[i], f.in.Handoffs, f.in.Bound, f.in.Now, f.wait)
	var run []v1alpha1.Slot
	busy := false
	for s := len(f.tables[i]); ; s++ {
		p, ok := removing[s]
		if !ok {
			break
		}
		run = append(run, v1alpha1.Slot{Slot: int32(s), Pod: p.Name, IP: p.IP, State: v1alpha1.SlotRemoving})
		busy = busy || copies[s]
	}
	if busy {
		f.tables[i] = append(f.own(i), run...)
	}
}

// removedSlots are, by the slot a scale-down removed from the cell's table,
// the Pods that held it and still serve it (copies: those whose copy has
// not ended): a Removed Pod, Ready, within bound of its deletion (wait is
// told how long is left), and a Moved Pod whose copy has not ended, while
// the slot it moved into is Filling from the Pod that held it (table: the
// cell's, Filling marked: it stays so while the Moved copy has not
// copied). The slot is the one the status held the Pod in, past the table.
func removedSlots(c Cell, table []v1alpha1.Slot, handoffs []v1alpha1.Handoff, bound time.Duration, now time.Time, wait func(time.Duration)) (map[int]Pod, map[int]bool) {
	out, copies := map[int]Pod{}, map[int]bool{}
	oldSlot := func(pod string) (int, bool) {
		for _, e := range c.Prev {
			if e.Pod == pod && int(e.Slot) >= len(table) {
				return int(e.Slot), true
			}
		}
		return 0, false
	}
	for _, h := range handoffs {
		if h.Zone != c.Zone {
			continue
		}
		switch into, moved := h.MovedInto(); {
		case h.Reason == v1alpha1.HandoffRemoved:
			src, ok := leavingPod(c.Pods, h.Pod)
			s, held := oldSlot(h.Pod)
			if !ok || !held || !src.Ready || src.IP == "" || src.IP != h.IP {
				continue
			}
			left := src.LeavingSince.Add(bound).Sub(now)
			if left <= 0 {
				continue
			}
			out[s] = src
			if h.Progress == nil || h.Progress.State == v1alpha1.HandoffCopying {
				copies[s] = true
				wait(left)
			}
		case moved && (h.Progress == nil || (h.Progress.State != v1alpha1.HandoffDone && h.Progress.State != v1alpha1.HandoffFailed)):
			// Until the slot it moved into serves it: the two switch
			// together, so that it is listed once.
			s, held := oldSlot(h.Pod)
			if !held || int(into) >= len(table) || table[into].State != v1alpha1.SlotFilling || table[into].Pod != h.Pod {
				continue
			}
			out[s], copies[s] = Pod{Name: h.Pod, IP: table[into].IP}, true
		}
	}
	return out, copies
}

// copying tells whether a copy that reports Copied before it ends (Moved,
// Grown, Refill) has not copied yet: no report, or Copying.
func copying(h v1alpha1.Handoff) bool {
	return h.Progress == nil || h.Progress.State == v1alpha1.HandoffCopying
}

// growing tells whether a cell's scale-up is still being copied: a Grown
// entry of the cell whose copy has not reported its items copied (Copied,
// Done or Failed), planned or not; first is the lowest first added slot
// of the cell's Grown entries.
func growing(c Cell, handoffs []v1alpha1.Handoff) (first int, ok bool) {
	first = -1
	for _, h := range handoffs {
		f, isGrown := h.FirstAdded()
		if !isGrown || h.Zone != c.Zone || int(f) >= len(c.Assigned.Slots) {
			continue
		}
		if first < 0 || int(f) < first {
			first = int(f)
		}
		if copying(h) {
			ok = true
		}
	}
	return first, ok && first > 0
}

// lastReady is when the last of the slots from first on took a Ready Pod
// (its ReadySince), and whether every one of them has one.
func lastReady(c Cell, first int) (time.Time, bool) {
	var last time.Time
	for _, e := range c.Assigned.Slots[first:] {
		if e.State != v1alpha1.SlotServing {
			return time.Time{}, false
		}
		i := slices.IndexFunc(c.Pods, func(p Pod) bool { return p.Name == e.Pod })
		if i < 0 {
			return time.Time{}, false
		}
		last = maxTime(last, c.Pods[i].ReadySince)
	}
	return last, true
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
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

// Unfill is a table as Assign wrote it, before Fill marked it: what the
// hand-off rules read from the status. A Filling slot's Pod holds it,
// Serving; an Adding slot's Pod too (one with no Pod is Empty); a scale-
// down's Removing slots, past the table, are not its. (The served list's
// version compares the tables as published, marks and all.)
func Unfill(table []v1alpha1.Slot) []v1alpha1.Slot {
	kept := v1alpha1.Kept(table)
	if !slices.ContainsFunc(kept, func(e v1alpha1.Slot) bool {
		return e.State == v1alpha1.SlotFilling || e.State == v1alpha1.SlotAdding
	}) {
		return kept
	}
	out := slices.Clone(kept)
	for i, e := range out {
		switch {
		case e.State == v1alpha1.SlotFilling, e.State == v1alpha1.SlotAdding && e.Pod != "" && e.IP != "":
			out[i] = v1alpha1.Slot{Slot: e.Slot, Pod: e.Pod, IP: e.IP, State: v1alpha1.SlotServing}
		case e.State == v1alpha1.SlotAdding:
			out[i] = v1alpha1.Slot{Slot: e.Slot, State: v1alpha1.SlotEmpty}
		}
	}
	return out
}
