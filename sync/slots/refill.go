package slots

import (
	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
)

// Refill: warm after a loss, across cells. A slot's keys are the same in
// every cell (spec.zones: every zone's table is decided by the same rules
// at the same size), so a Pod that takes a slot with no Pod to hand it
// over (its predecessor was lost without grace, left without keepWarm, or
// its memcached restarted empty; or its zone was just added) is filled
// from the Pod that holds the same slot in another cell: a Refill
// hand-off, which the agent runs as it runs the others (copying in add
// mode, so nothing the filled Pod was written since is overwritten).
//
// A Pod that comes back to its own slot (it was not Ready: unreachable,
// or its memcached restarted) is filled too, and emptied first (Flush):
// while it was away the other cells took writes and deletes it missed,
// and adding the source's items on top would keep its older values and
// the keys deleted meanwhile. This is what bounds a partition's harm to
// the time the zone's Pods stay Ready while cut off (see "What replication
// does not promise" in sync/api/v1alpha1/README.md).
//
// It is decided once, in the sync where the slot changes hands (as every
// hand-off is), and carried forward until the copy ends or either Pod
// stops serving the slot. The source is a Pod that served the slot in the
// table before and still does, in a cell whose table has as many slots
// (so that its items of the slot are the keys the slot has in the filled
// cell), and that hands nothing on already: one copy a source at a time
// (the agent runs one job a Pod). A slot that finds no such source starts
// cold, as it would with one cell. When a whole Memcached is made, or a
// scale-up adds slots in every cell, no cell has the slot's keys: nothing
// is filled.

// refills are the Refill hand-offs of this sync, beside the cells' other
// hand-offs (others, which keep their sources busy). A Memcached of one
// cell has none: there is no other copy to fill from.
func refills(in HandoffInput, others []v1alpha1.Handoff) []v1alpha1.Handoff {
	if len(in.Cells) < 2 {
		return nil
	}
	busy, filled := map[string]bool{}, map[string]bool{}
	for _, h := range others {
		busy[h.Pod] = true
	}
	tables := map[string][]v1alpha1.Slot{}
	for _, c := range in.Cells {
		tables[c.Zone] = c.Assigned.Slots
	}
	var out []v1alpha1.Handoff
	for _, h := range in.Prev {
		if h, ok := carriedRefill(h, tables, in.Reports); ok && !busy[h.Pod] && !filled[h.To] {
			out = append(out, h)
			busy[h.Pod], filled[h.To] = true, true
		}
	}
	for _, z := range in.Cells {
		for s, e := range z.Assigned.Slots {
			if e.State != v1alpha1.SlotServing || e.IP == "" || filled[e.Pod] || !takenCold(z, s, e, others) {
				continue
			}
			// Back in its own slot: it may hold values the other cells
			// changed meanwhile.
			back := s < len(z.Prev) && z.Prev[s].Pod == e.Pod
			for _, y := range in.Cells {
				src, ok := refillSource(y, z, s)
				if !ok || busy[src.Pod] || filled[src.Pod] {
					continue
				}
				out = append(out, v1alpha1.Handoff{Pod: src.Pod, IP: src.IP, Reason: v1alpha1.HandoffRefill, Zone: z.Zone,
					Slot: ptr(int32(s)), To: e.Pod, ToIP: e.IP, Flush: back})
				busy[src.Pod], filled[e.Pod] = true, true
				break
			}
		}
	}
	return out
}

// takenCold tells whether e, Serving at slot s of cell z, took it this
// sync with nothing handed over: the slot was empty or another Pod's (or
// e's, not serving: its memcached may have restarted empty), and no
// hand-off of the cell gives e the slot's items. A slot a scale-up added
// is not one: no cell has its keys yet.
func takenCold(z Cell, s int, e v1alpha1.Slot, handoffs []v1alpha1.Handoff) bool {
	var before v1alpha1.Slot
	switch {
	case s < len(z.Prev):
		before = z.Prev[s]
	case len(z.Prev) > 0:
		return false
	}
	if before.Pod == e.Pod && before.State == v1alpha1.SlotServing {
		return false
	}
	for _, h := range handoffs {
		if to, _, ok := h.Successor(); ok && h.Zone == z.Zone && to == e.Pod {
			return false
		}
	}
	return true
}

// refillSource is the Pod of cell y that can fill slot s of cell z: it
// served the slot before this sync and still does, and y's table has as
// many slots as z's.
func refillSource(y, z Cell, s int) (v1alpha1.Slot, bool) {
	if y.Zone == z.Zone || len(y.Assigned.Slots) != len(z.Assigned.Slots) || s >= len(y.Prev) {
		return v1alpha1.Slot{}, false
	}
	src, was := y.Assigned.Slots[s], y.Prev[s]
	if src.State != v1alpha1.SlotServing || src.IP == "" || was.State != v1alpha1.SlotServing || was.Pod != src.Pod || was.IP != src.IP {
		return v1alpha1.Slot{}, false
	}
	return src, true
}

// carriedRefill is a Refill the status held, with the agent's progress,
// while it still stands: the filled Pod serves the slot in its cell, the
// source serves it in another cell of as many slots, and the copy has not
// ended.
func carriedRefill(h v1alpha1.Handoff, tables map[string][]v1alpha1.Slot, reports map[string]v1alpha1.HandoffProgress) (v1alpha1.Handoff, bool) {
	s, to, toIP, ok := h.Refilled()
	if !ok {
		return h, false
	}
	serves := func(table []v1alpha1.Slot, pod, ip string) bool {
		return int(s) < len(table) && table[s].State == v1alpha1.SlotServing && table[s].Pod == pod && table[s].IP == ip
	}
	if !serves(tables[h.Zone], to, toIP) {
		return h, false
	}
	source := false
	for zone, table := range tables {
		source = source || (zone != h.Zone && len(table) == len(tables[h.Zone]) && serves(table, h.Pod, h.IP))
	}
	if !source {
		return h, false
	}
	h.Progress = nil
	if r, ok := reports[contract.ReportKey(h)]; ok {
		if r.State == v1alpha1.HandoffDone || r.State == v1alpha1.HandoffFailed {
			return h, false
		}
		h.Progress = &r
	}
	return h, true
}
