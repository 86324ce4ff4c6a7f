package slots_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/sync/slots"
)

// handoffs writes hand-offs as "pod:Reason[>to@slot]" in Pod order.
func handoffs(hs []v1alpha1.Handoff) string {
	var parts []string
	for _, h := range hs {
		s := h.Pod + ":" + string(h.Reason)
		if h.To != "" {
			s += ">" + h.To
		}
		if h.Slot != nil {
			s += fmt.Sprintf("@%d", *h.Slot)
		}
		if h.Progress != nil {
			s += "[" + string(h.Progress.State) + "]"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func TestHandoffs(t *testing.T) {
	tests := []struct {
		name    string
		prev    string
		prevHO  []v1alpha1.Handoff
		size    int32
		pods    []slots.Pod
		reports map[string]v1alpha1.HandoffProgress
		want    string
	}{{
		name: "nothing leaves, nothing to hand on",
		prev: "a@10.0.0.1:Serving b@10.0.0.2:Serving",
		size: 2,
		pods: []slots.Pod{ready("a", "10.0.0.1"), ready("b", "10.0.0.2")},
		want: "",
	}, {
		name: "a leaving Pod waits for a Ready Pod to take its slot",
		prev: "a@10.0.0.1:Serving b@10.0.0.2:Serving",
		size: 2,
		pods: []slots.Pod{ready("a", "10.0.0.1"), leaving("b", "10.0.0.2"), notReady("c", "10.0.0.3")},
		want: "b:Waiting@1",
	}, {
		name: "a rolling update's new Pod takes the slot: replaced",
		prev: "a@10.0.0.1:Serving b@10.0.0.2:Serving",
		size: 2,
		pods: []slots.Pod{ready("a", "10.0.0.1"), leaving("b", "10.0.0.2"), ready("c", "10.0.0.3")},
		want: "b:Replaced>c@1",
	}, {
		name:    "the replacement is carried forward while the Pod still exists",
		prev:    "a@10.0.0.1:Serving c@10.0.0.3:Serving",
		prevHO:  []v1alpha1.Handoff{{Pod: "b", IP: "10.0.0.2", Reason: v1alpha1.HandoffReplaced, Slot: ptr32(1), To: "c", ToIP: "10.0.0.3"}},
		size:    2,
		pods:    []slots.Pod{ready("a", "10.0.0.1"), leaving("b", "10.0.0.2"), ready("c", "10.0.0.3")},
		reports: map[string]v1alpha1.HandoffProgress{"b": {State: "Copying", Items: 10}},
		want:    "b:Replaced>c@1[Copying]",
	}, {
		name:   "gone: the entry goes",
		prev:   "a@10.0.0.1:Serving c@10.0.0.3:Serving",
		prevHO: []v1alpha1.Handoff{{Pod: "b", IP: "10.0.0.2", Reason: v1alpha1.HandoffReplaced, Slot: ptr32(1), To: "c"}},
		size:   2,
		pods:   []slots.Pod{ready("a", "10.0.0.1"), ready("c", "10.0.0.3")},
		want:   "",
	}, {
		name: "scale down, the last slot's Pod leaves: removed",
		prev: "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving",
		size: 2,
		pods: []slots.Pod{ready("a", "10.0.0.1"), ready("b", "10.0.0.2"), leaving("c", "10.0.0.3")},
		want: "c:Removed",
	}, {
		name: "scale down, a middle Pod leaves: the last slot's Pod replaces it and moves",
		prev: "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving",
		size: 2,
		pods: []slots.Pod{ready("a", "10.0.0.1"), leaving("b", "10.0.0.2"), ready("c", "10.0.0.3")},
		want: "b:Replaced>c@1 c:Moved>c@1",
	}, {
		name:    "a moved Pod's hand-off stays until the agent reports it done",
		prev:    "a@10.0.0.1:Serving c@10.0.0.3:Serving",
		prevHO:  []v1alpha1.Handoff{{Pod: "c", Reason: v1alpha1.HandoffMoved, Slot: ptr32(1), To: "c"}},
		size:    2,
		pods:    []slots.Pod{ready("a", "10.0.0.1"), ready("c", "10.0.0.3")},
		reports: map[string]v1alpha1.HandoffProgress{"c_1": {State: "Copying"}},
		want:    "c:Moved>c@1[Copying]",
	}, {
		name:    "a moved Pod's hand-off done: it goes",
		prev:    "a@10.0.0.1:Serving c@10.0.0.3:Serving",
		prevHO:  []v1alpha1.Handoff{{Pod: "c", Reason: v1alpha1.HandoffMoved, Slot: ptr32(1), To: "c"}},
		size:    2,
		pods:    []slots.Pod{ready("a", "10.0.0.1"), ready("c", "10.0.0.3")},
		reports: map[string]v1alpha1.HandoffProgress{"c_1": {State: "Done"}},
		want:    "",
	}, {
		name:    "a report left from an earlier move does not end this one",
		prev:    "a@10.0.0.1:Serving c@10.0.0.3:Serving",
		prevHO:  []v1alpha1.Handoff{{Pod: "c", Reason: v1alpha1.HandoffMoved, Slot: ptr32(1), To: "c"}},
		size:    2,
		pods:    []slots.Pod{ready("a", "10.0.0.1"), ready("c", "10.0.0.3")},
		reports: map[string]v1alpha1.HandoffProgress{"c_3": {State: "Done"}, "c": {State: "Failed"}},
		want:    "c:Moved>c@1",
	}, {
		name:    "a moved Pod's hand-off failed: it goes too, the Pod stays",
		prev:    "a@10.0.0.1:Serving c@10.0.0.3:Serving",
		prevHO:  []v1alpha1.Handoff{{Pod: "c", Reason: v1alpha1.HandoffMoved, Slot: ptr32(1), To: "c"}},
		size:    2,
		pods:    []slots.Pod{ready("a", "10.0.0.1"), ready("c", "10.0.0.3")},
		reports: map[string]v1alpha1.HandoffProgress{"c_1": {State: "Failed", Message: "connection refused"}},
		want:    "",
	}, {
		name: "a leaving Pod above size behind a waiting one: removed, not waiting",
		prev: "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving d@10.0.0.4:Serving",
		size: 2,
		pods: []slots.Pod{ready("a", "10.0.0.1"), ready("b", "10.0.0.2"), leaving("c", "10.0.0.3"), ready("d", "10.0.0.4")},
		want: "c:Removed",
	}, {
		name: "a leaving Pod that never held a slot: nothing to hand on",
		prev: "a@10.0.0.1:Serving",
		size: 1,
		pods: []slots.Pod{ready("a", "10.0.0.1"), leaving("surge", "10.0.0.9")},
		want: "surge:NoSlot",
	}, {
		name: "scaled to zero: every Pod's slot goes",
		prev: "a@10.0.0.1:Serving b@10.0.0.2:Serving",
		size: 0,
		pods: []slots.Pod{leaving("a", "10.0.0.1"), leaving("b", "10.0.0.2")},
		want: "a:Removed b:Removed",
	}, {
		name: "the first table: nothing was added to anything",
		size: 2,
		pods: []slots.Pod{ready("a", "10.0.0.1"), ready("b", "10.0.0.2")},
		want: "",
	}, {
		name: "a scale-up whose new slot does not serve yet: the plan waits, nothing is copied",
		prev: "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving",
		size: 4,
		pods: []slots.Pod{ready("a", "10.0.0.1"), ready("b", "10.0.0.2"), ready("c", "10.0.0.3"), notReady("d", "10.0.0.4")},
		want: "a:Grown@3 b:Grown@3 c:Grown@3",
	}, {
		name: "a scale-up whose new slot serves at once: every Pod below it hands on",
		prev: "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving",
		size: 4,
		pods: []slots.Pod{ready("a", "10.0.0.1"), ready("b", "10.0.0.2"), ready("c", "10.0.0.3"), ready("d", "10.0.0.4")},
		want: "a:Grown>d@3 b:Grown>d@3 c:Grown>d@3",
	}, {
		name:   "3 → 6 is one plan: it waits while an added slot does not serve",
		prev:   "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving d@10.0.0.4:Serving - -",
		prevHO: grownHO(3, "", "a", "b", "c"),
		size:   6,
		pods:   []slots.Pod{ready("a", "10.0.0.1"), ready("b", "10.0.0.2"), ready("c", "10.0.0.3"), ready("d", "10.0.0.4"), ready("e", "10.0.0.5"), notReady("f", "10.0.0.6")},
		want:   "a:Grown@3 b:Grown@3 c:Grown@3",
	}, {
		name:   "3 → 6 is one plan: made once every added slot serves",
		prev:   "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving d@10.0.0.4:Serving e@10.0.0.5:Serving -",
		prevHO: grownHO(3, "", "a", "b", "c"),
		size:   6,
		pods:   []slots.Pod{ready("a", "10.0.0.1"), ready("b", "10.0.0.2"), ready("c", "10.0.0.3"), ready("d", "10.0.0.4"), ready("e", "10.0.0.5"), ready("f", "10.0.0.6")},
		want:   "a:Grown>d@3 b:Grown>d@3 c:Grown>d@3",
	}, {
		name:    "a Grown copy stays, with its progress, until the agent reports it ended",
		prev:    "a@10.0.0.1:Serving b@10.0.0.2:Serving d@10.0.0.4:Serving",
		prevHO:  grownHO(2, "d", "a", "b"),
		size:    3,
		pods:    []slots.Pod{ready("a", "10.0.0.1"), ready("b", "10.0.0.2"), ready("d", "10.0.0.4")},
		reports: map[string]v1alpha1.HandoffProgress{"a_2_d": {State: "Copying"}, "b_2_d": {State: "Done"}},
		want:    "a:Grown>d@2[Copying]",
	}, {
		name:    "a Grown copy that failed goes too: the Pod stays, what was not copied misses",
		prev:    "a@10.0.0.1:Serving b@10.0.0.2:Serving d@10.0.0.4:Serving",
		prevHO:  grownHO(2, "d", "a", "b"),
		size:    3,
		pods:    []slots.Pod{ready("a", "10.0.0.1"), ready("b", "10.0.0.2"), ready("d", "10.0.0.4")},
		reports: map[string]v1alpha1.HandoffProgress{"a_2_d": {State: "Failed"}, "b_2_d": {State: "Done"}},
		want:    "",
	}, {
		name:   "a report of an earlier scale-up does not end this one",
		prev:   "a@10.0.0.1:Serving b@10.0.0.2:Serving d@10.0.0.4:Serving",
		prevHO: grownHO(2, "d", "a"),
		size:   3,
		pods:   []slots.Pod{ready("a", "10.0.0.1"), ready("b", "10.0.0.2"), ready("d", "10.0.0.4")},
		// As the agent reported an earlier plan of a's, from slot 2 to x.
		reports: map[string]v1alpha1.HandoffProgress{contract.ReportKey(grownHO(2, "x", "a")[0]): {State: "Done"}, "a": {State: "Done"}},
		want:    "a:Grown>d@2",
	}, {
		name:   "a second scale-up before the plan ended: one plan from the first added slot, and the Pod added first hands on too",
		prev:   "a@10.0.0.1:Serving b@10.0.0.2:Serving d@10.0.0.4:Serving",
		prevHO: grownHO(2, "d", "a", "b"),
		size:   5,
		pods:   []slots.Pod{ready("a", "10.0.0.1"), ready("b", "10.0.0.2"), ready("d", "10.0.0.4"), notReady("e", "10.0.0.5")},
		want:   "a:Grown@2 b:Grown@2 d:Grown@3",
	}, {
		name:    "a second scale-up after the plan ended: a plan of its own",
		prev:    "a@10.0.0.1:Serving b@10.0.0.2:Serving d@10.0.0.4:Serving",
		prevHO:  grownHO(2, "d", "a", "b"),
		size:    4,
		pods:    []slots.Pod{ready("a", "10.0.0.1"), ready("b", "10.0.0.2"), ready("d", "10.0.0.4"), ready("e", "10.0.0.5")},
		reports: map[string]v1alpha1.HandoffProgress{"a_2_d": {State: "Done"}, "b_2_d": {State: "Failed"}},
		want:    "a:Grown>e@3 b:Grown>e@3 d:Grown>e@3",
	}, {
		name:   "scaled down again before the plan was made: nothing was added, the entries go",
		prev:   "a@10.0.0.1:Serving b@10.0.0.2:Serving -",
		prevHO: grownHO(2, "", "a", "b"),
		size:   2,
		pods:   []slots.Pod{ready("a", "10.0.0.1"), ready("b", "10.0.0.2")},
		want:   "",
	}, {
		name:   "a source that starts leaving: its own hand-off takes over",
		prev:   "a@10.0.0.1:Serving b@10.0.0.2:Serving d@10.0.0.4:Serving",
		prevHO: grownHO(2, "d", "a", "b"),
		size:   3,
		pods:   []slots.Pod{ready("a", "10.0.0.1"), leaving("b", "10.0.0.2"), ready("d", "10.0.0.4")},
		want:   "a:Grown>d@2 b:Waiting@1",
	}, {
		name:    "a Moved copy goes on through a scale-up; the others hand on their share",
		prev:    "a@10.0.0.1:Serving c@10.0.0.3:Serving",
		prevHO:  []v1alpha1.Handoff{{Pod: "c", Reason: v1alpha1.HandoffMoved, Slot: ptr32(1), To: "c"}},
		size:    3,
		pods:    []slots.Pod{ready("a", "10.0.0.1"), ready("c", "10.0.0.3"), ready("d", "10.0.0.4")},
		reports: map[string]v1alpha1.HandoffProgress{"c_1": {State: "Copying"}},
		want:    "a:Grown>d@2 c:Moved>c@1[Copying]",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prev := table(t, tt.prev)
			next := slots.Assign(v1alpha1.SlotTable{Slots: prev}, tt.size, tt.pods, testNow)
			got := slots.Handoffs(slots.HandoffInput{Cells: []slots.Cell{{Prev: prev, Assigned: next, Pods: tt.pods}},
				Size: tt.size, KeepWarm: true, Prev: tt.prevHO, Reports: tt.reports})
			if handoffs(got) != tt.want {
				t.Errorf("Handoffs = %q, want %q (table %s)", handoffs(got), tt.want, show(next.Slots))
			}
		})
	}
}

// TestHandoffsThroughARollingUpdate follows a rolling update of three Pods
// through Assign and Handoffs, feeding each result back: one Pod at a
// time leaves, a Ready Pod takes its slot, and its hand-off names that Pod
// until the leaving Pod is gone.
func TestHandoffsThroughARollingUpdate(t *testing.T) {
	pods := []slots.Pod{ready("old-0", "10.0.0.1"), ready("old-1", "10.0.0.2"), ready("old-2", "10.0.0.3")}
	tb := assign(nil, 3, pods)
	var hs []v1alpha1.Handoff
	step := func(want string) {
		t.Helper()
		next := slots.Assign(v1alpha1.SlotTable{Slots: tb}, 3, pods, testNow)
		hs = slots.Handoffs(slots.HandoffInput{Cells: []slots.Cell{{Prev: tb, Assigned: next, Pods: pods}}, Size: 3, KeepWarm: true, Prev: hs})
		tb = next.Slots
		if got := handoffs(hs); got != want {
			t.Errorf("hand-offs %q, want %q (table %s)", got, want, show(tb))
		}
	}
	set := func(name string, f func(p *slots.Pod)) {
		for i := range pods {
			if pods[i].Name == name {
				f(&pods[i])
			}
		}
	}
	remove := func(name string) {
		for i := range pods {
			if pods[i].Name == name {
				pods = append(pods[:i], pods[i+1:]...)
				return
			}
		}
	}
	for i, old := range []string{"old-2", "old-0", "old-1"} {
		slot := map[string]int{"old-0": 0, "old-1": 1, "old-2": 2}[old]
		n := fmt.Sprintf("new-%d", i)
		pods = append(pods, ready(n, fmt.Sprintf("10.0.1.%d", i+1)))
		step("")
		set(old, func(p *slots.Pod) { p.Leaving = true })
		step(fmt.Sprintf("%s:Replaced>%s@%d", old, n, slot))
		step(fmt.Sprintf("%s:Replaced>%s@%d", old, n, slot))
		remove(old)
		step("")
	}
}

func ptr32(v int32) *int32 { return &v }

// grownHO are Grown entries of pods from slot first, planned to the Pod
// to ("": not yet).
func grownHO(first int32, to string, pods ...string) []v1alpha1.Handoff {
	var out []v1alpha1.Handoff
	for _, p := range pods {
		out = append(out, v1alpha1.Handoff{Pod: p, Reason: v1alpha1.HandoffGrown, Slot: ptr32(first), To: to})
	}
	return out
}
