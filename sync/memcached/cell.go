package memcached

import (
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/sync/metacontroller"
	"github.com/example/memcached-operator/sync/slots"
)

// A cell is one copy of the cache: a memcached Deployment, its Pods and
// their slot table. A Memcached without zones is one cell, named ""; with
// spec.zones each zone is a cell named after it (zones.go says what a
// zone adds: node affinity, its proxies, Refill across cells). The plan,
// the memcached Deployments and the hand-offs are computed per cell by the
// same code; only the status's edge (status.go) maps the cells to
// status.slotTable or status.zones[], so the wire format is the one each
// had before cells. What is per Memcached (its Service, the agent, the
// proxy's Service) stays per Memcached.
type cell struct {
	zone       string
	deployment *deploymentState
	// live are the cell's Pods that are not terminating, sorted by name.
	live     []metacontroller.Pod
	pods     []slots.Pod
	prev     v1alpha1.SlotTable
	assigned slots.Assignment
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

// prevTables are the slot tables the status held, by cell.
func prevTables(p *metacontroller.Parent, obs observed) map[string]v1alpha1.SlotTable {
	prev := map[string]v1alpha1.SlotTable{"": obs.slotTable}
	for _, z := range p.Status.Zones {
		prev[z.Name] = contract.Ordered(z.SlotTable)
	}
	return prev
}

// inCell are the Pods of cell zone: those labelled with it, or, for the
// cell "", those without the label (a Memcached whose zones were just
// removed still has Pods of its zones, which go with their Deployments).
func inCell(pods []metacontroller.Pod, zone string) []metacontroller.Pod {
	var out []metacontroller.Pod
	for _, pod := range pods {
		if z, ok := pod.Metadata.Labels[v1alpha1.LabelZone]; z == zone && ok == (zone != "") {
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

// cellSelector selects a cell's memcached Pods.
func cellSelector(name, zone string) map[string]string {
	l := SelectorLabels(name)
	if zone != "" {
		l[v1alpha1.LabelZone] = zone
	}
	return l
}

// cellMeta is the metadata of a cell's memcached Deployment and budget.
func cellMeta(p *metacontroller.Parent, zone string) metav1.ObjectMeta {
	meta := childMeta(p)
	if zone != "" {
		meta.Name = cellDeploymentName(p.Name, zone)
		meta.Labels[v1alpha1.LabelZone] = zone
	}
	return meta
}

// cellPrefix starts what the conditions say of one cell: nothing for the
// one cell of a Memcached without zones, "zone ZONE: " for a zone.
func cellPrefix(zone string) string {
	if zone == "" {
		return ""
	}
	return "zone " + zone + ": "
}

// cellDeployment is a cell's memcached Deployment: the Pod template every
// feature made, spread over nodes and zones, or pinned to its zone.
func cellDeployment(d *desire, zone string) any {
	selector := cellSelector(d.p.Name, zone)
	t := d.pod
	if zone != "" {
		t = inZone(t, d.s.Zones.TopologyKey, zone, selector)
	}
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	maps.Copy(t.Labels, childLabels(d.p.Name))
	if t.Spec.TopologySpreadConstraints == nil {
		t.Spec.TopologySpreadConstraints = spreadOf(selector)
	}
	return deploymentOf(cellMeta(d.p, zone), *d.s.Size, selector, t)
}
