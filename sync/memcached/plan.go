package memcached

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
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
	// cells are the copies of the cache, at least one (cell.go).
	cells []cell
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
	prev := prevTables(p, obs)
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
		}
		if spec == nil && pl.size == 0 {
			pl.size = size
		}
		c.live = inCell(obs.pods, zone)
		c.pods = slotPods(c.live, inCell(obs.leaving, zone))
		c.assigned = slots.Assign(c.prev, size, c.pods, now)
		pl.cells = append(pl.cells, c)
	}
	return pl
}

// pending is how long the soonest cell's table waits for an event to
// settle (0 when none waits).
func (pl *plan) pending() time.Duration {
	var soonest time.Duration
	for _, c := range pl.cells {
		if p := c.assigned.Pending; p > 0 && (soonest == 0 || p < soonest) {
			soonest = p
		}
	}
	return soonest
}

// slotCells are the cells as the hand-off rules see them (sync/slots).
func (pl *plan) slotCells() []slots.Cell {
	out := make([]slots.Cell, len(pl.cells))
	for i, c := range pl.cells {
		out[i] = slots.Cell{Zone: c.zone, Prev: c.prev.Slots, Assigned: c.assigned, Pods: c.pods}
	}
	return out
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
