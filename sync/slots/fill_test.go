package slots_test

import (
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/sync/slots"
)

// TestFill checks when a slot a Ready Pod took from a leaving one is
// Filling (served by the leaving Pod) and when it moves to its new Pod.
func TestFill(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	const bound = 37 * time.Second
	// b was deleted 5 s ago; c took its slot.
	b := leaving("b", "10.0.0.2")
	b.LeavingSince = now.Add(-5 * time.Second)
	replacedBy := func(to, toIP string, p *v1alpha1.HandoffProgress) v1alpha1.Handoff {
		return v1alpha1.Handoff{Pod: "b", IP: "10.0.0.2", Reason: v1alpha1.HandoffReplaced, Slot: ptr32(1), To: to, ToIP: toIP, Progress: p}
	}
	ended := func(st v1alpha1.HandoffState, to string) *v1alpha1.HandoffProgress {
		return &v1alpha1.HandoffProgress{State: st, To: to}
	}
	tests := []struct {
		name        string
		prev        string
		table       string
		pods        []slots.Pod
		handoffs    []v1alpha1.Handoff
		now         time.Time
		wantFilling bool
		wantPending time.Duration
	}{{
		name:        "the successor is filled while the leaving Pod serves",
		handoffs:    []v1alpha1.Handoff{replacedBy("c", "10.0.0.3", nil)},
		wantFilling: true, wantPending: 32 * time.Second,
	}, {
		name:        "still copying",
		handoffs:    []v1alpha1.Handoff{replacedBy("c", "10.0.0.3", ended(v1alpha1.HandoffCopying, "c"))},
		wantFilling: true, wantPending: 32 * time.Second,
	}, {
		name:     "the copy is done: the slot moves",
		handoffs: []v1alpha1.Handoff{replacedBy("c", "10.0.0.3", ended(v1alpha1.HandoffDone, "c"))},
	}, {
		name:     "the copy failed: the slot moves with what it has",
		handoffs: []v1alpha1.Handoff{replacedBy("c", "10.0.0.3", ended(v1alpha1.HandoffFailed, "c"))},
	}, {
		name:     "an older agent's report names no successor",
		handoffs: []v1alpha1.Handoff{replacedBy("c", "10.0.0.3", ended(v1alpha1.HandoffDone, ""))},
	}, {
		name:        "a report of an earlier successor does not end this one's fill",
		handoffs:    []v1alpha1.Handoff{replacedBy("c", "10.0.0.3", ended(v1alpha1.HandoffDone, "x"))},
		wantFilling: true, wantPending: 32 * time.Second,
	}, {
		name:     "the bound passed: the slot moves with what the copy gave",
		handoffs: []v1alpha1.Handoff{replacedBy("c", "10.0.0.3", nil)},
		now:      now.Add(32 * time.Second),
	}, {
		name:     "the leaving Pod is gone: nobody to serve the slot but its Pod",
		pods:     []slots.Pod{ready("a", "10.0.0.1"), ready("c", "10.0.0.3")},
		handoffs: []v1alpha1.Handoff{replacedBy("c", "10.0.0.3", nil)},
	}, {
		// A readiness blip of the successor under the copy's load: the
		// leaving Pod still serves the keys.
		name:        "the successor is not Ready: the leaving Pod still serves the slot",
		table:       "a@10.0.0.1:Serving c@10.0.0.3:NotReady",
		handoffs:    []v1alpha1.Handoff{replacedBy("c", "10.0.0.3", nil)},
		wantFilling: true, wantPending: 32 * time.Second,
	}, {
		name:     "the leaving Pod is not Ready (lost with its node): the slot goes to its successor",
		pods:     []slots.Pod{ready("a", "10.0.0.1"), {Name: "b", IP: "10.0.0.2", Leaving: true, LeavingSince: now.Add(-5 * time.Second)}, ready("c", "10.0.0.3")},
		handoffs: []v1alpha1.Handoff{replacedBy("c", "10.0.0.3", nil)},
	}, {
		// An agent that restarted between the copy's end and the done
		// marker copies again, and reports Copying: the status had
		// served the slot from c already.
		name:     "the status served the slot from the successor: never Filling again",
		prev:     "a@10.0.0.1:Serving c@10.0.0.3:Serving",
		handoffs: []v1alpha1.Handoff{replacedBy("c", "10.0.0.3", ended(v1alpha1.HandoffCopying, "c"))},
	}, {
		name:     "the entry names another Pod than the slot's",
		handoffs: []v1alpha1.Handoff{replacedBy("d", "10.0.0.4", nil)},
	}, {
		name:     "not a Replaced hand-off",
		handoffs: []v1alpha1.Handoff{{Pod: "b", IP: "10.0.0.2", Reason: v1alpha1.HandoffWaiting, Slot: ptr32(1)}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.table == "" {
				tt.table = "a@10.0.0.1:Serving c@10.0.0.3:Serving"
			}
			if tt.pods == nil {
				tt.pods = []slots.Pod{ready("a", "10.0.0.1"), b, ready("c", "10.0.0.3")}
			}
			if tt.now.IsZero() {
				tt.now = now
			}
			assigned := table(t, tt.table)
			want := show(assigned)
			if tt.prev == "" {
				tt.prev = "a@10.0.0.1:Serving b@10.0.0.2:Serving"
			}
			cell := slots.Cell{Prev: table(t, tt.prev), Assigned: slots.Assignment{Slots: assigned}, Pods: tt.pods}
			tables, pending := slots.Fill(slots.FillInput{KeepWarm: true, Cells: []slots.Cell{cell}, Handoffs: tt.handoffs, Size: int32(len(assigned)), Bound: bound, Now: tt.now})
			got := tables[0][1]
			if filling := got.State == v1alpha1.SlotFilling; filling != tt.wantFilling {
				t.Fatalf("slot 1 is %s; want Filling %t", show(tables[0]), tt.wantFilling)
			}
			if tt.wantFilling && (got.Pod != "c" || got.IP != "10.0.0.3" || got.From != "b" || got.FromIP != "10.0.0.2" || got.ServedIP() != "10.0.0.2") {
				t.Errorf("slot 1 = %+v; want c filling from b, b served", got)
			}
			if pending != tt.wantPending {
				t.Errorf("pending = %v, want %v", pending, tt.wantPending)
			}
			if got := show(assigned); got != want {
				t.Errorf("Fill changed the table it was given: %s, was %s", got, want)
			}
		})
	}
}

// TestFillGrowth checks when the slots a scale-up added are Adding (not
// listed: clients are given the slots before them) and when they are
// listed.
func TestFillGrowth(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	const bound = 37 * time.Second
	pod := func(name, ip string, readyAgo time.Duration) slots.Pod {
		p := ready(name, ip)
		p.ReadySince = now.Add(-readyAgo)
		return p
	}
	// a and b held the two slots; c and d took the two added, 3 s and 5 s
	// ago.
	pods := []slots.Pod{pod("a", "10.0.0.1", time.Hour), pod("b", "10.0.0.2", time.Hour), pod("c", "10.0.0.3", 5*time.Second), pod("d", "10.0.0.4", 3*time.Second)}
	grown := func(pod, ip, to string, st v1alpha1.HandoffState) v1alpha1.Handoff {
		h := v1alpha1.Handoff{Pod: pod, IP: ip, Reason: v1alpha1.HandoffGrown, Slot: ptr32(2), To: to}
		if st != "" {
			h.Progress = &v1alpha1.HandoffProgress{State: st}
		}
		return h
	}
	tests := []struct {
		name        string
		table       string
		handoffs    []v1alpha1.Handoff
		now         time.Time
		wantListed  int
		wantPending time.Duration
	}{{
		name:       "the copies have not started: the added slots wait unlisted",
		handoffs:   []v1alpha1.Handoff{grown("a", "10.0.0.1", "c", ""), grown("b", "10.0.0.2", "c", "")},
		wantListed: 2, wantPending: 34 * time.Second,
	}, {
		name:       "one copy copied, one still copying",
		handoffs:   []v1alpha1.Handoff{grown("a", "10.0.0.1", "c", v1alpha1.HandoffCopied), grown("b", "10.0.0.2", "c", v1alpha1.HandoffCopying)},
		wantListed: 2, wantPending: 34 * time.Second,
	}, {
		name:       "every copy copied: listed",
		handoffs:   []v1alpha1.Handoff{grown("a", "10.0.0.1", "c", v1alpha1.HandoffCopied), grown("b", "10.0.0.2", "c", v1alpha1.HandoffCopied)},
		wantListed: 4,
	}, {
		name:       "ended, done or failed (an older agent's Done): listed",
		handoffs:   []v1alpha1.Handoff{grown("a", "10.0.0.1", "c", v1alpha1.HandoffDone), grown("b", "10.0.0.2", "c", v1alpha1.HandoffFailed)},
		wantListed: 4,
	}, {
		name:       "the bound after the last added Pod turned Ready passed: listed with what was copied",
		handoffs:   []v1alpha1.Handoff{grown("a", "10.0.0.1", "c", v1alpha1.HandoffCopying)},
		now:        now.Add(34 * time.Second),
		wantListed: 4,
	}, {
		name:       "an added slot has no Ready Pod yet: unlisted, with no bound",
		table:      "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving -",
		handoffs:   []v1alpha1.Handoff{{Pod: "a", IP: "10.0.0.1", Reason: v1alpha1.HandoffGrown, Slot: ptr32(2)}},
		now:        now.Add(time.Hour),
		wantListed: 2,
	}, {
		name:       "no scale-up",
		handoffs:   nil,
		wantListed: 4,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.table == "" {
				tt.table = "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving d@10.0.0.4:Serving"
			}
			if tt.now.IsZero() {
				tt.now = now
			}
			assigned := table(t, tt.table)
			want := show(assigned)
			cell := slots.Cell{Assigned: slots.Assignment{Slots: assigned}, Pods: pods}
			tables, pending := slots.Fill(slots.FillInput{KeepWarm: true, Cells: []slots.Cell{cell}, Handoffs: tt.handoffs, Size: int32(len(assigned)), Bound: bound, Now: tt.now})
			if got := len(v1alpha1.Listed(tables[0])); got != tt.wantListed {
				t.Errorf("%d slots listed (%s), want %d", got, show(tables[0]), tt.wantListed)
			}
			for _, e := range tables[0][tt.wantListed:] {
				if e.State != v1alpha1.SlotAdding {
					t.Errorf("slot %d past the list is %s, want Adding", e.Slot, e.State)
				}
			}
			if pending != tt.wantPending {
				t.Errorf("pending = %v, want %v", pending, tt.wantPending)
			}
			if got := show(assigned); got != want {
				t.Errorf("Fill changed the table it was given: %s, was %s", got, want)
			}
		})
	}
}

// TestFillShrink checks when the slots a scale-down removed stay listed,
// Removing, served by the Pods that hand their keys on.
func TestFillShrink(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	const bound = 37 * time.Second
	gone := func(name, ip string) slots.Pod {
		p := leaving(name, ip)
		p.LeavingSince = now.Add(-5 * time.Second)
		return p
	}
	progress := func(h v1alpha1.Handoff, st v1alpha1.HandoffState) v1alpha1.Handoff {
		if st != "" {
			h.Progress = &v1alpha1.HandoffProgress{State: st}
		}
		return h
	}
	// The last slot's Pod d leaves: Removed.
	removedD := func(st v1alpha1.HandoffState) v1alpha1.Handoff {
		return progress(v1alpha1.Handoff{Pod: "d", IP: "10.0.0.4", Reason: v1alpha1.HandoffRemoved}, st)
	}
	// b, in the middle, leaves: d moves into its slot (Moved), and b's
	// items go to d (Replaced).
	replacedB := func(st v1alpha1.HandoffState) v1alpha1.Handoff {
		return progress(v1alpha1.Handoff{Pod: "b", IP: "10.0.0.2", Reason: v1alpha1.HandoffReplaced, Slot: ptr32(1), To: "d", ToIP: "10.0.0.4"}, st)
	}
	movedD := func(st v1alpha1.HandoffState) v1alpha1.Handoff {
		return progress(v1alpha1.Handoff{Pod: "d", IP: "10.0.0.4", Reason: v1alpha1.HandoffMoved, Slot: ptr32(1), To: "d", ToIP: "10.0.0.4"}, st)
	}
	last := []slots.Pod{ready("a", "10.0.0.1"), ready("b", "10.0.0.2"), ready("c", "10.0.0.3"), gone("d", "10.0.0.4")}
	middle := []slots.Pod{ready("a", "10.0.0.1"), gone("b", "10.0.0.2"), ready("c", "10.0.0.3"), ready("d", "10.0.0.4")}
	tests := []struct {
		name        string
		table       string
		pods        []slots.Pod
		handoffs    []v1alpha1.Handoff
		now         time.Time
		want        string
		wantPending time.Duration
	}{{
		name:     "the last slot's Pod hands its keys on: its slot stays listed",
		table:    "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving",
		pods:     last,
		handoffs: []v1alpha1.Handoff{removedD("")},
		want:     "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving d@10.0.0.4:Removing", wantPending: 32 * time.Second,
	}, {
		name:     "its copy is done: the slot goes",
		table:    "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving",
		pods:     last,
		handoffs: []v1alpha1.Handoff{removedD(v1alpha1.HandoffDone)},
		want:     "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving",
	}, {
		name:     "past the bound: the slot goes with what was copied",
		table:    "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving",
		pods:     last,
		handoffs: []v1alpha1.Handoff{removedD(v1alpha1.HandoffCopying)},
		now:      now.Add(32 * time.Second),
		want:     "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving",
	}, {
		name:     "a middle Pod leaves: the moved Pod's new slot is Filling, its old one Removing",
		table:    "a@10.0.0.1:Serving d@10.0.0.4:Serving c@10.0.0.3:Serving",
		pods:     middle,
		handoffs: []v1alpha1.Handoff{replacedB(""), movedD("")},
		want:     "a@10.0.0.1:Serving d@10.0.0.4:Filling<b c@10.0.0.3:Serving d@10.0.0.4:Removing", wantPending: 32 * time.Second,
	}, {
		name:     "the removed Pod's copy is done, not the moved Pod's: both stay, so that d is listed once",
		table:    "a@10.0.0.1:Serving d@10.0.0.4:Serving c@10.0.0.3:Serving",
		pods:     middle,
		handoffs: []v1alpha1.Handoff{replacedB(v1alpha1.HandoffDone), movedD(v1alpha1.HandoffCopying)},
		want:     "a@10.0.0.1:Serving d@10.0.0.4:Filling<b c@10.0.0.3:Serving d@10.0.0.4:Removing", wantPending: 32 * time.Second,
	}, {
		name:     "the moved Pod's copy is copied, not the removed Pod's: both stay",
		table:    "a@10.0.0.1:Serving d@10.0.0.4:Serving c@10.0.0.3:Serving",
		pods:     middle,
		handoffs: []v1alpha1.Handoff{replacedB(v1alpha1.HandoffCopying), movedD(v1alpha1.HandoffCopied)},
		want:     "a@10.0.0.1:Serving d@10.0.0.4:Filling<b c@10.0.0.3:Serving d@10.0.0.4:Removing", wantPending: 32 * time.Second,
	}, {
		// Assign lists d's slot, above size, until d's deletion settles:
		// the copy must hash over the slots kept.
		name:     "a slot above size Assign still lists, its Pod leaving, is Removing",
		table:    "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving d@10.0.0.4:Leaving",
		pods:     last,
		handoffs: []v1alpha1.Handoff{removedD("")},
		want:     "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving d@10.0.0.4:Removing",
	}, {
		name:     "both copied: the scale-down switches at once",
		table:    "a@10.0.0.1:Serving d@10.0.0.4:Serving c@10.0.0.3:Serving",
		pods:     middle,
		handoffs: []v1alpha1.Handoff{replacedB(v1alpha1.HandoffDone), movedD(v1alpha1.HandoffCopied)},
		want:     "a@10.0.0.1:Serving d@10.0.0.4:Serving c@10.0.0.3:Serving",
	}}
	prev := table(t, "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving d@10.0.0.4:Serving")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.now.IsZero() {
				tt.now = now
			}
			assigned := table(t, tt.table)
			was := show(assigned)
			cell := slots.Cell{Prev: prev, Assigned: slots.Assignment{Slots: assigned}, Pods: tt.pods}
			tables, pending := slots.Fill(slots.FillInput{KeepWarm: true, Cells: []slots.Cell{cell}, Handoffs: tt.handoffs, Size: 3, Bound: bound, Now: tt.now})
			var got []string
			for _, e := range tables[0] {
				s := e.Pod + "@" + e.IP + ":" + string(e.State)
				if e.From != "" {
					s += "<" + e.From
				}
				got = append(got, s)
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("table %s\nwant  %s", strings.Join(got, " "), tt.want)
			}
			if pending != tt.wantPending {
				t.Errorf("pending = %v, want %v", pending, tt.wantPending)
			}
			if _, err := contract.RenderPool([]v1alpha1.ZoneStatus{{SlotTable: v1alpha1.SlotTable{Slots: tables[0]}}}); err != nil {
				t.Errorf("the pool of this table is refused: %v", err)
			}
			if got := show(assigned); got != was {
				t.Errorf("Fill changed the table it was given: %s, was %s", got, was)
			}
		})
	}
}

// TestFillShrinkRun checks a scale-down of two slots whose lower one's
// copy ended first: the run stays listed while the other one copies, and
// goes once both ended.
func TestFillShrinkRun(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	gone := func(name, ip string) slots.Pod {
		p := leaving(name, ip)
		p.LeavingSince = now.Add(-5 * time.Second)
		return p
	}
	pods := []slots.Pod{ready("a", "10.0.0.1"), ready("b", "10.0.0.2"), ready("c", "10.0.0.3"), gone("d", "10.0.0.4"), gone("e", "10.0.0.5")}
	removed := func(pod, ip string, st v1alpha1.HandoffState) v1alpha1.Handoff {
		return v1alpha1.Handoff{Pod: pod, IP: ip, Reason: v1alpha1.HandoffRemoved, Progress: &v1alpha1.HandoffProgress{State: st}}
	}
	prev := table(t, "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving d@10.0.0.4:Serving e@10.0.0.5:Serving")
	for _, tt := range []struct {
		name   string
		d, e   v1alpha1.HandoffState
		listed int
	}{
		{name: "both copying", d: v1alpha1.HandoffCopying, e: v1alpha1.HandoffCopying, listed: 5},
		{name: "the lower one done, the other copying: both stay", d: v1alpha1.HandoffDone, e: v1alpha1.HandoffCopying, listed: 5},
		{name: "both done: both go", d: v1alpha1.HandoffDone, e: v1alpha1.HandoffDone, listed: 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cell := slots.Cell{Prev: prev, Assigned: slots.Assignment{Slots: table(t, "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving")}, Pods: pods}
			tables, _ := slots.Fill(slots.FillInput{KeepWarm: true, Cells: []slots.Cell{cell}, Size: 3, Bound: 37 * time.Second, Now: now,
				Handoffs: []v1alpha1.Handoff{removed("d", "10.0.0.4", tt.d), removed("e", "10.0.0.5", tt.e)}})
			if got := len(v1alpha1.Listed(tables[0])); got != tt.listed {
				t.Errorf("%d slots listed (%s), want %d", got, show(tables[0]), tt.listed)
			}
		})
	}
}

// TestFillGrowthListedStays checks that added slots the status listed are
// not Adding again when a Grown copy starts over (its agent restarted
// between Copied and Done) and reports Copying.
func TestFillGrowthListedStays(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	assigned := table(t, "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving")
	h := v1alpha1.Handoff{Pod: "a", IP: "10.0.0.1", Reason: v1alpha1.HandoffGrown, Slot: ptr32(2), To: "c", Progress: &v1alpha1.HandoffProgress{State: v1alpha1.HandoffCopying}}
	for _, tt := range []struct {
		name, prev string
		want       int
	}{
		{name: "the status had the added slot Adding", prev: "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Adding", want: 2},
		{name: "the status listed it", prev: "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving", want: 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := ready("c", "10.0.0.3")
			c.ReadySince = now.Add(-time.Second)
			cell := slots.Cell{Prev: table(t, tt.prev), Assigned: slots.Assignment{Slots: assigned}, Pods: []slots.Pod{ready("a", "10.0.0.1"), ready("b", "10.0.0.2"), c}}
			tables, _ := slots.Fill(slots.FillInput{KeepWarm: true, Cells: []slots.Cell{cell}, Handoffs: []v1alpha1.Handoff{h}, Size: 3, Bound: 37 * time.Second, Now: now})
			if got := len(v1alpha1.Listed(tables[0])); got != tt.want {
				t.Errorf("%d slots listed (%s), want %d", got, show(tables[0]), tt.want)
			}
		})
	}
}

// TestFillRefill checks when the slot a Refill fills (spec.zones: a Pod
// took it with nothing handed over) is Filling with no Pod to serve it, so
// that its zone's pool has it down and the proxies read its keys from
// another zone, and when it is listed.
func TestFillRefill(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	const bound = 37 * time.Second
	// Zone a's slot 1 lost its Pod; n, Ready 5 s ago, took it. b1 holds
	// slot 1 in zone b.
	n := ready("n", "10.0.0.9")
	n.ReadySince = now.Add(-5 * time.Second)
	refill := func(to, toIP string, st v1alpha1.HandoffState) v1alpha1.Handoff {
		h := v1alpha1.Handoff{Pod: "b1", IP: "10.0.1.2", Reason: v1alpha1.HandoffRefill, Zone: "a", Slot: ptr32(1), To: to, ToIP: toIP}
		if st != "" {
			h.Progress = &v1alpha1.HandoffProgress{State: st}
		}
		return h
	}
	tests := []struct {
		name        string
		prev        string
		table       string
		pod         slots.Pod
		handoffs    []v1alpha1.Handoff
		now         time.Time
		noKeepWarm  bool
		wantFilling bool
		wantPending time.Duration
	}{{
		name:        "the copy has not started: the slot is down in its zone",
		handoffs:    []v1alpha1.Handoff{refill("n", "10.0.0.9", "")},
		wantFilling: true, wantPending: 32 * time.Second,
	}, {
		name:        "still copying",
		handoffs:    []v1alpha1.Handoff{refill("n", "10.0.0.9", v1alpha1.HandoffCopying)},
		wantFilling: true, wantPending: 32 * time.Second,
	}, {
		name:        "without keepWarm too: zones refill either way",
		handoffs:    []v1alpha1.Handoff{refill("n", "10.0.0.9", "")},
		noKeepWarm:  true,
		wantFilling: true, wantPending: 32 * time.Second,
	}, {
		name:     "copied: listed, while the agent forwards the source's writes until clients moved",
		handoffs: []v1alpha1.Handoff{refill("n", "10.0.0.9", v1alpha1.HandoffCopied)},
	}, {
		name:     "done: listed",
		handoffs: []v1alpha1.Handoff{refill("n", "10.0.0.9", v1alpha1.HandoffDone)},
	}, {
		name:     "failed: listed with what it has",
		handoffs: []v1alpha1.Handoff{refill("n", "10.0.0.9", v1alpha1.HandoffFailed)},
	}, {
		name:     "the bound after the Pod turned Ready passed: listed with what the copy gave",
		handoffs: []v1alpha1.Handoff{refill("n", "10.0.0.9", v1alpha1.HandoffCopying)},
		now:      now.Add(32 * time.Second),
	}, {
		name:     "the Pod waited Ready for longer than the bound before it took the slot: listed at once",
		pod:      slots.Pod{Name: "n", IP: "10.0.0.9", Ready: true, ReadySince: now.Add(-time.Hour)},
		handoffs: []v1alpha1.Handoff{refill("n", "10.0.0.9", "")},
	}, {
		// An agent restarted between Copied and Done copies again, and
		// reports Copying.
		name:     "the status listed the slot from the Pod: never down again",
		prev:     "a0@10.0.0.1:Serving n@10.0.0.9:Serving a2@10.0.0.3:Serving",
		handoffs: []v1alpha1.Handoff{refill("n", "10.0.0.9", v1alpha1.HandoffCopying)},
	}, {
		name:        "a Pod back in its slot (Flush): down until refilled",
		prev:        "a0@10.0.0.1:Serving n@10.0.0.9:NotReady a2@10.0.0.3:Serving",
		handoffs:    []v1alpha1.Handoff{refill("n", "10.0.0.9", "")},
		wantFilling: true, wantPending: 32 * time.Second,
	}, {
		name:     "the entry names another Pod than the slot's",
		handoffs: []v1alpha1.Handoff{refill("x", "10.0.0.8", "")},
	}, {
		name:     "the Pod filled is not Ready: its slot is not served anyway",
		table:    "a0@10.0.0.1:Serving n@10.0.0.9:NotReady a2@10.0.0.3:Serving",
		handoffs: []v1alpha1.Handoff{refill("n", "10.0.0.9", "")},
	}, {
		name:     "no Refill",
		handoffs: nil,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.prev == "" {
				tt.prev = "a0@10.0.0.1:Serving - a2@10.0.0.3:Serving"
			}
			if tt.table == "" {
				tt.table = "a0@10.0.0.1:Serving n@10.0.0.9:Serving a2@10.0.0.3:Serving"
			}
			if tt.pod.Name == "" {
				tt.pod = n
			}
			if tt.now.IsZero() {
				tt.now = now
			}
			zoneB := "b0@10.0.1.1:Serving b1@10.0.1.2:Serving b2@10.0.1.3:Serving"
			a := slots.Cell{Zone: "a", Prev: table(t, tt.prev), Assigned: slots.Assignment{Slots: table(t, tt.table)},
				Pods: []slots.Pod{ready("a0", "10.0.0.1"), tt.pod, ready("a2", "10.0.0.3")}}
			b := slots.Cell{Zone: "b", Prev: table(t, zoneB), Assigned: slots.Assignment{Slots: table(t, zoneB)},
				Pods: []slots.Pod{ready("b0", "10.0.1.1"), ready("b1", "10.0.1.2"), ready("b2", "10.0.1.3")}}
			was := show(a.Assigned.Slots)
			tables, pending := slots.Fill(slots.FillInput{KeepWarm: !tt.noKeepWarm, Cells: []slots.Cell{a, b}, Handoffs: tt.handoffs, Size: 3, Bound: bound, Now: tt.now})
			got := tables[0][1]
			if filling := got.State == v1alpha1.SlotFilling; filling != tt.wantFilling {
				t.Fatalf("zone a's slot 1 is %s; want Filling %t", show(tables[0]), tt.wantFilling)
			}
			if tt.wantFilling && (got.Pod != "n" || got.IP != "10.0.0.9" || got.From != "" || got.FromIP != "" || got.ServedIP() != "") {
				t.Errorf("zone a's slot 1 = %+v; want n filling, served from no Pod", got)
			}
			if pending != tt.wantPending {
				t.Errorf("pending = %v, want %v", pending, tt.wantPending)
			}
			if got := show(tables[1]); got != zoneB {
				t.Errorf("zone b's table %s, want it as Assign made it: %s", got, zoneB)
			}
			if got := show(a.Assigned.Slots); got != was {
				t.Errorf("Fill changed the table it was given: %s, was %s", got, was)
			}
			// The pool has the slot down in zone a (the proxies fail its
			// reads over to zone b), and every other slot served.
			pool, err := contract.RenderPool([]v1alpha1.ZoneStatus{{Name: "a", SlotTable: v1alpha1.SlotTable{Slots: tables[0]}}, {Name: "b", SlotTable: v1alpha1.SlotTable{Slots: tables[1]}}})
			if err != nil {
				t.Fatalf("the pool of these tables is refused: %v", err)
			}
			down := strings.Contains(string(pool.Content), contract.PoolPlaceholder+" "+contract.ZoneDownLabel("a", 1)+"\n")
			wantDown := 0
			if tt.wantFilling || got.State != v1alpha1.SlotServing {
				wantDown = 1
			}
			if down != (wantDown == 1) || pool.Down != wantDown {
				t.Errorf("the pool has zone a's slot 1 down %t, %d slots down; want %d:\n%s", down, pool.Down, wantDown, pool.Content)
			}
		})
	}
}

// TestFillWithoutKeepWarm checks that without keepWarm (zones alone) Fill
// marks only the Refills' slots: a leaving Pod's slot a Ready Pod took
// serves it at once, and a slot above size stays Leaving.
func TestFillWithoutKeepWarm(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	b := leaving("b", "10.0.0.2")
	b.LeavingSince = now.Add(-5 * time.Second)
	assigned := table(t, "a@10.0.0.1:Serving c@10.0.0.3:Serving d@10.0.0.4:Leaving")
	cell := slots.Cell{Zone: "a", Prev: table(t, "a@10.0.0.1:Serving b@10.0.0.2:Serving d@10.0.0.4:Serving"), Assigned: slots.Assignment{Slots: assigned},
		Pods: []slots.Pod{ready("a", "10.0.0.1"), b, ready("c", "10.0.0.3"), leaving("d", "10.0.0.4")}}
	h := v1alpha1.Handoff{Pod: "b", IP: "10.0.0.2", Reason: v1alpha1.HandoffReplaced, Zone: "a", Slot: ptr32(1), To: "c", ToIP: "10.0.0.3"}
	for _, keepWarm := range []bool{false, true} {
		tables, _ := slots.Fill(slots.FillInput{KeepWarm: keepWarm, Cells: []slots.Cell{cell}, Handoffs: []v1alpha1.Handoff{h}, Size: 2, Bound: 37 * time.Second, Now: now})
		got, want := show(tables[0]), show(assigned)
		if keepWarm {
			want = "a@10.0.0.1:Serving c@10.0.0.3:Filling d@10.0.0.4:Removing"
		}
		if got != want {
			t.Errorf("keepWarm %t: table %s, want %s", keepWarm, got, want)
		}
	}
}
