package memcached

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/metacontroller"
	"github.com/example/memcached-operator/sync/slots"
)

// plan is what this sync decided, and what the status is computed from
// (each feature's report fills its fields from it): what was observed, the
// spec (nil when it is invalid) and the slot table.
type plan struct {
	p    *metacontroller.Parent
	spec *v1alpha1.MemcachedSpec
	obs  observed
	// size is the number of slots the Pods are measured against: the
	// spec's, or, when the spec is invalid, what the observed Deployment
	// still runs.
	size     int32
	pods     []slots.Pod
	assigned slots.Assignment
	// zones are each zone's part (spec.zones; nil without). The Memcached
	// then has no table of its own: pods and assigned are empty.
	zones []zonePlan
}

// decide decides the slot table: the one decision the children (the
// features that follow the table) and the status share.
func decide(p *metacontroller.Parent, spec *v1alpha1.MemcachedSpec, obs observed, now time.Time) *plan {
	pl := &plan{p: p, spec: spec, obs: obs}
	switch {
	case spec != nil:
		pl.size = *spec.Size
	case obs.deployment != nil:
		pl.size = obs.deployment.replicas
	}
	if len(zonesOf(p, spec)) > 0 {
		decideZones(pl, now)
		return pl
	}
	// Pods of zones (a Memcached whose zones were just removed) are not
	// this table's: they go with their zones' Deployments.
	pl.pods = slotPods(unzoned(obs.pods), unzoned(obs.leaving))
	pl.assigned = slots.Assign(obs.slotTable, pl.size, pl.pods, now)
	return pl
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

// unzoned are the Pods that belong to no zone: without zones, pods
// itself, not a copy.
func unzoned(pods []metacontroller.Pod) []metacontroller.Pod {
	if !slices.ContainsFunc(pods, func(pod metacontroller.Pod) bool { _, ok := pod.Metadata.Labels[v1alpha1.LabelZone]; return ok }) {
		return pods
	}
	var out []metacontroller.Pod
	for _, pod := range pods {
		if _, ok := pod.Metadata.Labels[v1alpha1.LabelZone]; !ok {
			out = append(out, pod)
		}
	}
	return out
}
