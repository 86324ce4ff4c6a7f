package contract_test

import (
	"strings"
	"testing"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
)

// TestOrdered checks that a table whose entries are slots 0..n-1 in order
// is taken as it is, and that one out of order, with a gap or a slot
// twice is no table: its readers (the hook, the agent) rebuild or serve
// nothing from it, never a list that sends keys to the wrong Pods.
func TestOrdered(t *testing.T) {
	slot := func(n int32, pod string) v1alpha1.Slot {
		return v1alpha1.Slot{Slot: n, Pod: pod, IP: "10.0.0.1", State: v1alpha1.SlotServing}
	}
	tests := []struct {
		name    string
		slots   []v1alpha1.Slot
		wantErr string
	}{
		{name: "in order", slots: []v1alpha1.Slot{slot(0, "a"), slot(1, "b"), slot(2, "c")}},
		{name: "no slot", slots: nil},
		{name: "out of order", slots: []v1alpha1.Slot{slot(1, "b"), slot(0, "a")}, wantErr: "slots[0] is slot 1"},
		{name: "with a gap", slots: []v1alpha1.Slot{slot(0, "a"), slot(2, "c")}, wantErr: "slots[1] is slot 2"},
		{name: "a slot twice", slots: []v1alpha1.Slot{slot(0, "a"), slot(0, "b")}, wantErr: "slots[1] is slot 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := ""
			if err := contract.CheckOrder(tt.slots); err != nil {
				msg = err.Error()
			}
			if (msg == "") != (tt.wantErr == "") || !strings.Contains(msg, tt.wantErr) {
				t.Errorf("CheckOrder() = %q, want an error naming %q", msg, tt.wantErr)
			}
			got := contract.Ordered(v1alpha1.SlotTable{Version: 3, Slots: tt.slots})
			if tt.wantErr != "" && (got.Version != 0 || got.Slots != nil) {
				t.Errorf("Ordered() = %+v, want no table", got)
			}
			if tt.wantErr == "" && (got.Version != 3 || len(got.Slots) != len(tt.slots)) {
				t.Errorf("Ordered() = %+v, want the table", got)
			}
		})
	}
}

// TestReportKey checks where a hand-off's progress is reported: the Pod's
// name, for a Moved hand-off the Pod's name, "_" and its slot, and for a
// Grown one also "_" and the Pod of the first slot added, so that each
// scale-up's plan reports under a key of its own.
func TestReportKey(t *testing.T) {
	seven := int32(7)
	tests := []struct {
		name string
		h    v1alpha1.Handoff
		want string
	}{
		{name: "Replaced", h: v1alpha1.Handoff{Pod: "cache-a", Reason: v1alpha1.HandoffReplaced, Slot: &seven}, want: "cache-a"},
		{name: "Removed", h: v1alpha1.Handoff{Pod: "cache-a", Reason: v1alpha1.HandoffRemoved}, want: "cache-a"},
		{name: "Moved", h: v1alpha1.Handoff{Pod: "cache-a", Reason: v1alpha1.HandoffMoved, Slot: &seven}, want: "cache-a_7"},
		{name: "Grown", h: v1alpha1.Handoff{Pod: "cache-a", Reason: v1alpha1.HandoffGrown, Slot: &seven, To: "cache-g"}, want: "cache-a_7_cache-g"},
		{name: "Grown, plan not made yet", h: v1alpha1.Handoff{Pod: "cache-a", Reason: v1alpha1.HandoffGrown, Slot: &seven}, want: "cache-a_7_"},
		{name: "Refill", h: v1alpha1.Handoff{Pod: "cache-b-x", Reason: v1alpha1.HandoffRefill, Zone: "1", Slot: &seven, To: "cache-a-y"}, want: "cache-b-x_7_cache-a-y_1"},
		{name: "Refill that flushes first", h: v1alpha1.Handoff{Pod: "cache-b-x", Reason: v1alpha1.HandoffRefill, Zone: "1", Slot: &seven, To: "cache-a-y", Flush: true}, want: "cache-b-x_7_cache-a-y_1_flush"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := contract.ReportKey(tt.h); got != tt.want {
				t.Errorf("ReportKey() = %q, want %q", got, tt.want)
			}
			// ParseReportKey reads back what the key names.
			want := contract.Reported{Pod: tt.h.Pod}
			if tt.h.Reason == v1alpha1.HandoffMoved || tt.h.Reason == v1alpha1.HandoffGrown || tt.h.Reason == v1alpha1.HandoffRefill {
				want.Reason, want.Slot = tt.h.Reason, *tt.h.Slot
			}
			if tt.h.Reason == v1alpha1.HandoffGrown || tt.h.Reason == v1alpha1.HandoffRefill {
				want.To = tt.h.To
			}
			if tt.h.Reason == v1alpha1.HandoffRefill {
				want.Zone, want.Flush = tt.h.Zone, tt.h.Flush
			}
			if got, ok := contract.ParseReportKey(tt.want); !ok || got != want {
				t.Errorf("ParseReportKey(%q) = %+v, %v, want %+v", tt.want, got, ok, want)
			}
		})
	}
	for _, key := range []string{"", "_7", "cache-a_", "cache-a_x", "cache-a_-1", "cache-a_07", "cache-a_7_b_c_d", "cache-a_7_b_c_d_e", "cache-a_7_b_c_Flush", "cache-a_7_b__flush", "cache-a_7__z", "cache-a_7_b_", "cache-a_99999999999"} {
		if got, ok := contract.ParseReportKey(key); ok {
			t.Errorf("ParseReportKey(%q) = %+v, want no report key", key, got)
		}
	}
}

// TestAgentName checks the name of the agent's children.
func TestAgentName(t *testing.T) {
	if got, want := contract.AgentName("cache"), "cache-agent"; got != want {
		t.Errorf("AgentName() = %q, want %q", got, want)
	}
	if len(contract.AgentSuffix) > len(v1alpha1.DiscoverySuffix) {
		t.Errorf("%q is longer than %q: the API's bound on a name does not hold for the agent's children", contract.AgentSuffix, v1alpha1.DiscoverySuffix)
	}
}
