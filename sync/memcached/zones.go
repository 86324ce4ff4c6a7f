package memcached

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/sync/metacontroller"
	"github.com/example/memcached-operator/sync/slots"
)

// Zones (spec.zones): each zone runs a full copy of the cache. A zone is a
// memcached Deployment NAME-ZONE of spec.size Pods, pinned to the zone by a
// required node affinity, with its own PodDisruptionBudget and its own slot
// table (status.zones); and a proxy Deployment NAME-proxy-ZONE pinned the
// same way, whose route configuration reads from its own zone first and
// writes to every zone (proxy.go). Every zone's table is decided by the same
// rules from the same size, so a key has the same slot in every zone: what a
// Pod lost in one zone held, the same slot holds in the others.
//
// The Pods of all zones keep the Memcached's selector labels (its headless
// Service, the exporter's ServiceMonitor and the scale subresource's
// selector see them all); LabelZone tells the zones apart.

// zoned tells whether a spec asks for zones.
func zoned(s *v1alpha1.MemcachedSpec) bool { return s != nil && s.Zones != nil }

// zoneName is the name of a zone's memcached Deployment and its
// PodDisruptionBudget.
func zoneName(name, zone string) string { return name + "-" + zone }

// ZoneSelectorLabels select a zone's memcached Pods.
func ZoneSelectorLabels(name, zone string) map[string]string {
	l := SelectorLabels(name)
	l[v1alpha1.LabelZone] = zone
	return l
}

// zonePlan is one zone's part of the plan: its Deployment, its Pods as the
// slot table sees them, and the table this sync decided.
type zonePlan struct {
	name       string
	deployment *deploymentState
	// live are the zone's Pods that are not terminating, sorted by name.
	live     []metacontroller.Pod
	pods     []slots.Pod
	prev     v1alpha1.SlotTable
	assigned slots.Assignment
}

// zonesOf are the zones a sync works with: the spec's or, when the spec is
// invalid (and its zones unknown), those the status last had, so that what
// runs goes on being reported.
func zonesOf(p *metacontroller.Parent, spec *v1alpha1.MemcachedSpec) []string {
	if spec != nil {
		return v1alpha1.ZonesOf(spec)
	}
	var names []string
	for _, z := range p.Status.Zones {
		names = append(names, z.Name)
	}
	return names
}

// decideZones decides each zone's slot table, from the zone's Pods and the
// table the status held for it, at the same size in every zone.
func decideZones(pl *plan, now time.Time) {
	prev := map[string]v1alpha1.SlotTable{}
	for _, z := range pl.p.Status.Zones {
		prev[z.Name] = contract.Ordered(z.SlotTable)
	}
	for _, zone := range zonesOf(pl.p, pl.spec) {
		z := zonePlan{name: zone, deployment: pl.obs.deployments[zoneName(pl.p.Name, zone)], prev: prev[zone]}
		size := pl.size
		if pl.spec == nil {
			size = 0
			if z.deployment != nil {
				size = z.deployment.replicas
			}
		}
		for _, pod := range pl.obs.pods {
			if pod.Metadata.Labels[v1alpha1.LabelZone] == zone {
				z.live = append(z.live, pod)
			}
		}
		var leaving []metacontroller.Pod
		for _, pod := range pl.obs.leaving {
			if pod.Metadata.Labels[v1alpha1.LabelZone] == zone {
				leaving = append(leaving, pod)
			}
		}
		z.pods = slotPods(z.live, leaving)
		z.assigned = slots.Assign(z.prev, size, z.pods, now)
		if pl.spec == nil && pl.size == 0 {
			// What the zones run is the size the Pods are measured by.
			pl.size = size
		}
		pl.zones = append(pl.zones, z)
	}
}

// pending is how long the soonest zone's table waits for an event to
// settle (0 when none waits).
func (pl *plan) pending() time.Duration {
	if pl.zones == nil {
		return pl.assigned.Pending
	}
	var soonest time.Duration
	for _, z := range pl.zones {
		if p := z.assigned.Pending; p > 0 && (soonest == 0 || p < soonest) {
			soonest = p
		}
	}
	return soonest
}

// inZone pins a Pod template to zone: the zone's label, a required node
// affinity on the zone's topology key (added to each of the user's node
// selector terms, which are alternatives), and, unless the user set their
// own, a spread over the zone's nodes.
func inZone(t corev1.PodTemplateSpec, key, zone string, selector map[string]string) corev1.PodTemplateSpec {
	t = *t.DeepCopy()
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	t.Labels[v1alpha1.LabelZone] = zone
	req := corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}
	if t.Spec.Affinity == nil {
		t.Spec.Affinity = &corev1.Affinity{}
	}
	a := t.Spec.Affinity
	if a.NodeAffinity == nil {
		a.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := a.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil || len(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == 0 {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}
	}
	terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := range terms {
		terms[i].MatchExpressions = append(terms[i].MatchExpressions, req)
	}
	if t.Spec.TopologySpreadConstraints == nil {
		t.Spec.TopologySpreadConstraints = spreadOf(selector)[:1] // over the zone's nodes
	}
	return t
}

// zoneDeployments are the zones' memcached Deployments and, past one Pod a
// zone, their PodDisruptionBudgets, zone by zone in the spec's order.
func zoneDeployments(d *desire) []any {
	var children []any
	for _, zone := range v1alpha1.ZonesOf(d.s) {
		name := zoneName(d.p.Name, zone)
		selector := ZoneSelectorLabels(d.p.Name, zone)
		t := inZone(d.pod, d.s.Zones.TopologyKey, zone, selector)
		maps.Copy(t.Labels, childLabels(d.p.Name))
		meta := childMeta(d.p)
		meta.Name = name
		meta.Labels[v1alpha1.LabelZone] = zone
		children = append(children, deploymentOf(meta, *d.s.Size, selector, t))
		if d.managed[PDBKey] && *d.s.Size > 1 {
			children = append(children, disruptionBudget(meta, selector))
		}
	}
	return children
}

// zoneStatus reports each zone: its Pods and its table, versioned against
// the one the status held.
func zoneStatus(pl *plan, now time.Time) []v1alpha1.ZoneStatus {
	var out []v1alpha1.ZoneStatus
	for _, z := range pl.zones {
		zs := v1alpha1.ZoneStatus{Name: z.name, SlotTable: slotTable(z.prev, z.assigned, now)}
		for _, pod := range z.live {
			zs.Replicas++
			if podReady(pod) {
				zs.ReadyReplicas++
			}
		}
		out = append(out, zs)
	}
	return out
}

// namedDeployment is a memcached Deployment as observed (nil before it
// is), with what the conditions' messages call it: "" for the one
// Deployment of a Memcached without zones, "zone ZONE: " for a zone's.
type namedDeployment struct {
	prefix string
	d      *deploymentState
}

// deployments are the plan's memcached Deployments: NAME, or each zone's,
// at least one.
func (pl *plan) deployments() []namedDeployment {
	if pl.zones == nil {
		return []namedDeployment{{"", pl.obs.deployment}}
	}
	out := make([]namedDeployment, len(pl.zones))
	for i, z := range pl.zones {
		out[i] = namedDeployment{"zone " + z.name + ": ", z.deployment}
	}
	return out
}

// fewestPerZone are the Pods and the ready Pods of the zone that has
// fewest: with zones, spec.size counts the Pods in each zone, and the scale
// subresource reads status.replicas against it.
func fewestPerZone(zones []v1alpha1.ZoneStatus) (replicas, ready int32) {
	for i, z := range zones {
		if i == 0 || z.Replicas < replicas {
			replicas = z.Replicas
		}
		if i == 0 || z.ReadyReplicas < ready {
			ready = z.ReadyReplicas
		}
	}
	return replicas, ready
}

// zonesAvailable is Available with zones: every zone has the ready Pods
// MinAvailable asks of a Memcached of its size. A zone short of them is
// served from the others by its proxies, at the cost of reads that cross
// zones, and the condition says which.
func zonesAvailable(size int32, zones []v1alpha1.ZoneStatus) metav1.Condition {
	need := MinAvailable(size)
	if size == 0 {
		return cond(ConditionAvailable, false, ReasonScaledToZero, "spec.size is 0: no memcached Pod runs")
	}
	counts := make([]string, len(zones))
	short := false
	for i, z := range zones {
		counts[i] = fmt.Sprintf("%s %d", z.Name, z.ReadyReplicas)
		short = short || z.ReadyReplicas < need
	}
	msg := fmt.Sprintf("ready Pods of %d in each zone: %s (%d needed in each)", size, strings.Join(counts, ", "), need)
	if short {
		return cond(ConditionAvailable, false, ReasonNotEnoughPodsReady, msg)
	}
	return cond(ConditionAvailable, true, ReasonEnoughPodsReady, msg)
}

// readyWithIP counts the Pods that are ready and have an address: those a
// slot table serves.
func readyWithIP(pods []metacontroller.Pod) int {
	n := 0
	for _, pod := range pods {
		if podReady(pod) && pod.Status.PodIP != "" {
			n++
		}
	}
	return n
}

// Warm after a loss: a slot's keys are the same in every zone, so a Pod
// that takes a slot with no Pod to hand it over (its predecessor was lost
// without grace, left without keepWarm, or its memcached restarted empty;
// or its zone was just added) is filled from the Pod that holds the same
// slot in another zone: a Refill hand-off, which the agent runs as it runs
// the others (copying in add mode, so nothing the filled Pod was written
// since is overwritten).
//
// A Pod that comes back to its own slot (it was not Ready: unreachable,
// or its memcached restarted) is filled too, and emptied first (Flush):
// while it was away the other zones took writes and deletes it missed,
// and adding the source's items on top would keep its older values and
// the keys deleted meanwhile. This is what bounds a partition's harm to
// the time the zone's Pods stay Ready while cut off (see "What replication
// does not promise" in sync/api/v1alpha1/README.md).
//
// It is decided once, in the sync where the slot changes hands (as every
// hand-off is), and carried forward until the copy ends or either Pod
// stops serving the slot. The source is a Pod that served the slot in the
// table before and still does, in a zone whose table has as many slots
// (so that its items of the slot are the keys the slot has in the filled
// zone), and that hands nothing on already: one copy a source at a time
// (the agent runs one job a Pod). A slot that finds no such source starts
// cold, as it would without zones. When a whole Memcached is made, or a
// scale-up adds slots in every zone, no zone has the slot's keys: nothing
// is filled.

// zoneRefills are the Refill hand-offs of this sync, beside the zones'
// other hand-offs (which keep their sources busy).
func zoneRefills(pl *plan, others []v1alpha1.Handoff) []v1alpha1.Handoff {
	busy, filled := map[string]bool{}, map[string]bool{}
	for _, h := range others {
		busy[h.Pod] = true
	}
	tables := map[string][]v1alpha1.Slot{}
	for _, z := range pl.zones {
		tables[z.name] = z.assigned.Slots
	}
	var out []v1alpha1.Handoff
	for _, h := range pl.p.Status.Handoffs {
		if h, ok := carriedRefill(h, tables, pl.obs.reports); ok && !busy[h.Pod] && !filled[h.To] {
			out = append(out, h)
			busy[h.Pod], filled[h.To] = true, true
		}
	}
	for _, z := range pl.zones {
		for s, e := range z.assigned.Slots {
			if e.State != v1alpha1.SlotServing || e.IP == "" || filled[e.Pod] || !takenCold(z, s, e, others) {
				continue
			}
			// Back in its own slot: it may hold values the other zones
			// changed meanwhile.
			back := s < len(z.prev.Slots) && z.prev.Slots[s].Pod == e.Pod
			for _, y := range pl.zones {
				src, ok := refillSource(y, z, s)
				if !ok || busy[src.Pod] || filled[src.Pod] {
					continue
				}
				out = append(out, v1alpha1.Handoff{Pod: src.Pod, IP: src.IP, Reason: v1alpha1.HandoffRefill, Zone: z.name,
					Slot: ptr(int32(s)), To: e.Pod, ToIP: e.IP, Flush: back})
				busy[src.Pod], filled[e.Pod] = true, true
				break
			}
		}
	}
	return out
}

// takenCold tells whether e, Serving at slot s of zone z, took it this
// sync with nothing handed over: the slot was empty or another Pod's (or
// e's, not serving: its memcached may have restarted empty), and no
// hand-off of the zone gives e the slot's items. A slot a scale-up added
// is not one: no zone has its keys yet.
func takenCold(z zonePlan, s int, e v1alpha1.Slot, handoffs []v1alpha1.Handoff) bool {
	var before v1alpha1.Slot
	switch {
	case s < len(z.prev.Slots):
		before = z.prev.Slots[s]
	case len(z.prev.Slots) > 0:
		return false
	}
	if before.Pod == e.Pod && before.State == v1alpha1.SlotServing {
		return false
	}
	for _, h := range handoffs {
		if to, _, ok := h.Successor(); ok && h.Zone == z.name && to == e.Pod {
			return false
		}
	}
	return true
}

// refillSource is the Pod of zone y that can fill slot s of zone z: it
// served the slot before this sync and still does, and y's table has as
// many slots as z's.
func refillSource(y, z zonePlan, s int) (v1alpha1.Slot, bool) {
	if y.name == z.name || len(y.assigned.Slots) != len(z.assigned.Slots) || s >= len(y.prev.Slots) {
		return v1alpha1.Slot{}, false
	}
	src, was := y.assigned.Slots[s], y.prev.Slots[s]
	if src.State != v1alpha1.SlotServing || src.IP == "" || was.State != v1alpha1.SlotServing || was.Pod != src.Pod || was.IP != src.IP {
		return v1alpha1.Slot{}, false
	}
	return src, true
}

// carriedRefill is a Refill the status held, with the agent's progress,
// while it still stands: the filled Pod serves the slot in its zone, the
// source serves it in another zone of as many slots, and the copy has not
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
