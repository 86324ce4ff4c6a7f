package v1alpha1

// What a hand-off entry's Slot, To and ToIP mean depends on its Reason:
// the slot a Ready Pod took (Replaced), the slot the Pod still holds
// (Waiting), the slot it moved into (Moved) or the first slot a scale-up
// added (Grown). The methods below say it by name, so that a reader of the
// hook, the agent or a test need not know each reason by heart; each says
// false (or nothing) for an entry of another reason. The JSON is the
// status's, unchanged.

// TakenSlot is a Replaced entry's slot: the one the leaving Pod held,
// which a Ready Pod took. Its items go to the Pod that holds it now
// (Successor).
func (h Handoff) TakenSlot() (int32, bool) {
	return h.slotFor(HandoffReplaced)
}

// Successor is the Pod a Replaced entry's items go to, and its address:
// the one that holds TakenSlot in the table the entry was written with
// (the Pod that took the slot or, if that one left too, the next). ok is
// whether the entry is Replaced.
func (h Handoff) Successor() (pod, ip string, ok bool) {
	if h.Reason != HandoffReplaced {
		return "", "", false
	}
	return h.To, h.ToIP, true
}

// HeldSlot is a Waiting entry's slot: the one the leaving Pod still holds,
// which waits for a Ready Pod to take it. Nothing is copied yet.
func (h Handoff) HeldSlot() (int32, bool) {
	return h.slotFor(HandoffWaiting)
}

// MovedInto is a Moved entry's slot: the freed one the Pod moved into from
// a slot a scale-down removed. Its items go where their keys now hash.
func (h Handoff) MovedInto() (int32, bool) {
	return h.slotFor(HandoffMoved)
}

// FirstAdded is a Grown entry's first slot the scale-up added: each of the
// Pod's items whose key now hashes to it or above goes there.
func (h Handoff) FirstAdded() (int32, bool) {
	return h.slotFor(HandoffGrown)
}

// Planned tells whether a Grown entry's copy may start: every added slot
// serves, and To names the first added slot's Pod, which with FirstAdded
// names the plan (a scale-up's own report key). An entry listed before
// then asks the agent for nothing.
func (h Handoff) Planned() bool {
	_, ok := h.FirstAdded()
	return ok && h.To != ""
}

// Refilled is a Refill entry's slot and the Pod filled, with its address:
// the Pod that took the slot in zone Zone with no Pod to hand it over. The
// entry's Pod holds the same slot in another zone and stays; its items of
// the slot are copied to the filled Pod.
func (h Handoff) Refilled() (slot int32, pod, ip string, ok bool) {
	s, ok := h.slotFor(HandoffRefill)
	if !ok || h.To == "" {
		return 0, "", "", false
	}
	return s, h.To, h.ToIP, true
}

// slotFor is Slot when the entry's reason is r.
func (h Handoff) slotFor(r HandoffReason) (int32, bool) {
	if h.Reason != r || h.Slot == nil {
		return 0, false
	}
	return *h.Slot, true
}

// Tables are the status's slot tables by zone, as a hand-off's Zone names
// them: each zone's (status.zones), or, without zones, the one table under
// "".
func (st *MemcachedStatus) Tables() map[string][]Slot {
	if len(st.Zones) == 0 {
		return map[string][]Slot{"": st.SlotTable.Slots}
	}
	out := make(map[string][]Slot, len(st.Zones))
	for _, z := range st.Zones {
		out[z.Name] = z.SlotTable.Slots
	}
	return out
}

// ProxyOn tells whether the Memcached runs the proxy tier: asked for
// (spec.proxy.enabled), or with zones, whose one address it is. The hook
// builds the tier by it, and the agent waits for the proxies to confirm a
// switch by it.
func (s *MemcachedSpec) ProxyOn() bool {
	return (s.Proxy != nil && s.Proxy.Enabled) || s.Zones != nil
}

// ClockClients tells whether clients that confirm nothing follow the slot
// tables: Auto Discovery's (spec.discovery) poll, stable names' DNS
// (spec.stableNames), or, without the proxy tier, whatever clients the
// Memcached has. A copy gives them ClientMove once the table moved them.
func (s *MemcachedSpec) ClockClients() bool {
	return !s.ProxyOn() || (s.Discovery != nil && s.Discovery.Enabled) || (s.StableNames != nil && s.StableNames.Enabled)
}

// HandsOff tells whether the agent hands items on: keepWarm's hand-offs,
// or zones' refills. Only then does the hook make ConfigMap NAME-agent,
// where the agents report, and does a copy wait for the proxies' word.
func (s *MemcachedSpec) HandsOff() bool {
	return (s.Rollout != nil && s.Rollout.KeepWarm) || s.Zones != nil
}
