package memcached

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/sync/metacontroller"
	"github.com/example/memcached-operator/sync/slots"
)

// plan is what this sync decided, and what the status is computed from
// (each feature's report fills its fields from it): what was observed, the
// spec (nil when it is invalid) and each cell's slot table.
type plan struct {
	p    *metacontroller.Parent
	spec *v1alpha1.MemcachedSpec
	obs  observed
	// size is the number of slots the Pods are measured against: the
	// spec's, or, when the spec is invalid, what the observed Deployments
	// still run.
	size int32
	// cells are the copies of the cache, at least one.
	cells []cell
	// pending is how long the soonest cell's table waits for an event to
	// settle, or a Filling slot for its bound (0 when none waits).
	pending time.Duration
	// handoffs are the hand-offs planned in every cell (planHandoffs),
	// nil for an invalid spec.
	handoffs []v1alpha1.Handoff
}

// A cell is one copy of the cache: a memcached Deployment, its Pods and
// their slot table. A Memcached without zones is one cell, named ""; with
// spec.zones each zone is a cell named after it (zones.go says what a
// zone adds: node affinity, how the status counts zones; Refill across
// cells is sync/slots' refill.go). The plan,
// the memcached Deployments and the hand-offs are computed per cell by the
// same code; only the status's edge (status.go) maps the cells to
// status.slotTable or status.zones[], so the wire format is the one each
// had before cells. What is per Memcached (its Service, the agent, the
// proxy's Service) stays per Memcached.
type cell struct {
	zone       string
	deployment *deploymentState
	// live are the cell's Pods that are not terminating, sorted by name;
	// ready of them are Ready, and endpoints of those have an address
	// (those a slot table serves).
	live             []metacontroller.Pod
	ready, endpoints int32
	pods             []slots.Pod
	prev             v1alpha1.SlotTable
	assigned         slots.Assignment
}

// decide decides each cell's slot table, from the cell's Pods and the
// table the status held for it, at the same size in every cell: the one
// decision the children (the features that follow the table) and the
// status share.
func decide(p *metacontroller.Parent, spec *v1alpha1.MemcachedSpec, obs observed, now time.Time) *plan {
	pl := &plan{p: p, spec: spec, obs: obs}
	switch {
	case spec != nil:
		pl.size = *spec.Size
	case obs.deployment != nil:
		pl.size = obs.deployment.replicas
	}
	prev := prevTables(p)
	for _, zone := range cellNames(p, spec) {
		c := cell{zone: zone, deployment: obs.deployments[cellDeploymentName(p.Name, zone)], prev: prev[zone]}
		size := pl.size
		if spec == nil {
			// What each Deployment runs is the size its Pods are
			// measured by.
			size = 0
			if c.deployment != nil {
				size = c.deployment.replicas
			}
			if pl.size == 0 {
				pl.size = size
			}
		}
		c.live = inCell(obs.pods, zone)
		for _, pod := range c.live {
			if podReady(pod) {
				c.ready++
				if pod.Status.PodIP != "" {
					c.endpoints++
				}
			}
		}
		c.pods = slotPods(c.live, inCell(obs.leaving, zone))
		c.assigned = slots.Assign(c.prev, size, c.pods, now)
		pl.wait(c.assigned.Pending)
		pl.cells = append(pl.cells, c)
	}
	if spec != nil {
		pl.planHandoffs(now)
	}
	return pl
}

// wait has the plan sync again within d, when d is set.
func (pl *plan) wait(d time.Duration) {
	if d > 0 && (pl.pending == 0 || d < pl.pending) {
		pl.pending = d
	}
}

// zoned tells whether a spec asks for zones: the one place that reads it.
// Everything else goes through the cells (cellNames), or asks this only
// for what is per Memcached (the proxy tier, the agent's hand-offs).
func zoned(s *v1alpha1.MemcachedSpec) bool { return s != nil && s.Zones != nil }

// zoned tells whether the plan's cells are zones, for the status's edge:
// a Memcached without zones has the one cell "".
func (pl *plan) zoned() bool { return pl.cells[0].zone != "" }

// specCells are a valid spec's cells: its zones, or the one cell "".
func specCells(s *v1alpha1.MemcachedSpec) []string {
	if !zoned(s) {
		return []string{""}
	}
	return s.Zones.Names
}

// cellNames are the cells a sync works with: the spec's or, when the spec
// is invalid (and its zones unknown), those the status last had, so that
// what runs goes on being reported.
func cellNames(p *metacontroller.Parent, spec *v1alpha1.MemcachedSpec) []string {
	if spec != nil {
		return specCells(spec)
	}
	if len(p.Status.Zones) == 0 {
		return []string{""}
	}
	names := make([]string, len(p.Status.Zones))
	for i, z := range p.Status.Zones {
		names[i] = z.Name
	}
	return names
}

// prevTables are the slot tables the status held, by cell, as their
// readers take them (contract.Ordered).
func prevTables(p *metacontroller.Parent) map[string]v1alpha1.SlotTable {
	prev := map[string]v1alpha1.SlotTable{"": contract.Ordered(p.Status.SlotTable)}
	for _, z := range p.Status.Zones {
		prev[z.Name] = contract.Ordered(z.SlotTable)
	}
	return prev
}

// inCell are the Pods of cell zone: those labelled with it, or, for the
// cell "", those without the label (a Memcached whose zones were just
// removed still has Pods of its zones, which go with their Deployments).
// When every Pod is the cell's (a Memcached without zones) it is pods
// itself, not a copy: a 1,000-Pod sync copied them all for nothing.
func inCell(pods []metacontroller.Pod, zone string) []metacontroller.Pod {
	in := func(pod metacontroller.Pod) bool {
		z, ok := pod.Metadata.Labels[v1alpha1.LabelZone]
		return z == zone && ok == (zone != "")
	}
	if !slices.ContainsFunc(pods, func(pod metacontroller.Pod) bool { return !in(pod) }) {
		return pods
	}
	var out []metacontroller.Pod
	for _, pod := range pods {
		if in(pod) {
			out = append(out, pod)
		}
	}
	return out
}

// cellDeploymentName is the name of a cell's memcached Deployment and
// PodDisruptionBudget: NAME, or NAME-ZONE.
func cellDeploymentName(name, zone string) string {
	if zone == "" {
		return name
	}
	return name + "-" + zone
}

// slotCells are the cells as the hand-off rules see them (sync/slots).
func (pl *plan) slotCells() []slots.Cell {
	out := make([]slots.Cell, len(pl.cells))
	for i, c := range pl.cells {
		out[i] = slots.Cell{Zone: c.zone, Prev: c.prev.Slots, Assigned: c.assigned, Pods: c.pods}
	}
	return out
}

// slotPods are the Pods as the slot table sees them, terminating ones
// included, with the times the table orders its decisions by.
func slotPods(live, leaving []metacontroller.Pod) []slots.Pod {
	pods := make([]slots.Pod, 0, len(live)+len(leaving))
	for _, pod := range live {
		pods = append(pods, slots.Pod{Name: pod.Metadata.Name, IP: pod.Status.PodIP, Ready: podReady(pod), ReadySince: readySince(pod)})
	}
	for _, pod := range leaving {
		pods = append(pods, slots.Pod{Name: pod.Metadata.Name, IP: pod.Status.PodIP, Ready: podReady(pod), ReadySince: readySince(pod),
			Leaving: true, LeavingSince: leavingSince(pod)})
	}
	return pods
}

func podReady(pod metacontroller.Pod) bool {
	if pod.Status.Phase != string(corev1.PodRunning) {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == string(corev1.PodReady) {
			return c.Status == string(corev1.ConditionTrue)
		}
	}
	return false
}

// readySince is when the Pod's Ready condition last changed, or, without
// one, when the Pod was made (zero when neither parses).
func readySince(pod metacontroller.Pod) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == string(corev1.PodReady) {
			if t, err := time.Parse(time.RFC3339, c.LastTransitionTime); err == nil {
				return t
			}
		}
	}
	t, _ := time.Parse(time.RFC3339, pod.Metadata.CreationTimestamp)
	return t
}

// leavingSince is when the Pod's deletion was asked: its deletion
// timestamp is that time plus the grace period.
func leavingSince(pod metacontroller.Pod) time.Time {
	m := pod.Metadata
	if m.DeletionTimestamp == nil {
		return time.Time{}
	}
	t := m.DeletionTimestamp.Time
	if g := m.DeletionGracePeriodSeconds; g != nil && *g > 0 {
		t = t.Add(-time.Duration(*g) * time.Second)
	}
	return t
}
