package memcached

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
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
//
// A zone is a cell (plan.go): its Deployment, Pods, table and keepWarm
// hand-offs are decided as a Memcached without zones has its one cell's.
// What is the zones' own is here: the node affinity, how the status
// counts them, and, in sync/slots (refill.go), the Refill hand-offs that
// fill a slot taken cold from the same slot of another zone.

// ZoneSelectorLabels select a zone's memcached Pods.
func ZoneSelectorLabels(name, zone string) map[string]string { return cellSelector(name, zone) }

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
