package v1alpha1

import "testing"

// TestHandoffAccessors checks that each of a hand-off entry's slot
// accessors answers for its own reason only: Slot means one thing per
// reason, and a reader asking for another meaning gets nothing.
func TestHandoffAccessors(t *testing.T) {
	seven := int32(7)
	accessors := map[HandoffReason]func(Handoff) (int32, bool){
		HandoffReplaced: Handoff.TakenSlot,
		HandoffWaiting:  Handoff.HeldSlot,
		HandoffMoved:    Handoff.MovedInto,
		HandoffGrown:    Handoff.FirstAdded,
	}
	for _, reason := range []HandoffReason{HandoffReplaced, HandoffRemoved, HandoffMoved, HandoffGrown, HandoffWaiting, HandoffNoSlot} {
		h := Handoff{Pod: "cache-a", Reason: reason, Slot: &seven, To: "cache-b", ToIP: "10.0.0.2"}
		for r, get := range accessors {
			s, ok := get(h)
			if want := r == reason; ok != want || (ok && s != 7) {
				t.Errorf("%s entry: the %s accessor = %d, %v; want %v", reason, r, s, ok, want)
			}
			if _, ok := get(Handoff{Pod: "cache-a", Reason: reason}); ok {
				t.Errorf("%s entry without a slot: the %s accessor names one", reason, r)
			}
		}
		if pod, ip, ok := h.Successor(); ok != (reason == HandoffReplaced) || (ok && (pod != "cache-b" || ip != "10.0.0.2")) {
			t.Errorf("%s entry: Successor() = %q, %q, %v", reason, pod, ip, ok)
		}
		if got, want := h.Planned(), reason == HandoffGrown; got != want {
			t.Errorf("%s entry: Planned() = %v, want %v", reason, got, want)
		}
	}
	if (Handoff{Reason: HandoffGrown, Slot: &seven}).Planned() {
		t.Error("a Grown entry without To is planned")
	}
}
