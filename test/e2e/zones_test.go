package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
)

// zonesStatus is what the zones scenario reads of a Memcached beyond
// memcached's fields.
type zonesStatus struct {
	Spec struct {
		Zones *v1alpha1.ZonesSpec `json:"zones"`
	} `json:"spec"`
	Status struct {
		ProxyEndpoint string                `json:"proxyEndpoint"`
		Zones         []v1alpha1.ZoneStatus `json:"zones"`
		SlotTable     v1alpha1.SlotTable    `json:"slotTable"`
	} `json:"status"`
}

// tolerateDedicated lets memcached Pods onto the fake Node fake-2, zone-c's
// only Node, tainted dedicated=cache:NoSchedule (test/playground).
const tolerateDedicated = `[{"key":"dedicated","operator":"Equal","value":"cache","effect":"NoSchedule"}]`

// zonesWant is what a converged Memcached with zones runs.
type zonesWant struct {
	size  int32
	zones []string // spec.zones.names, in order
	// gone are zones that were removed: nothing of theirs may be left.
	gone []string
}

// zonesObserved is what a user sees of a converged Memcached with zones.
type zonesObserved struct {
	mc *memcached
	zs *zonesStatus
	// pods are each zone's live memcached Pods, sorted by name.
	pods map[string][]corev1.Pod
	// proxies are each zone's live proxy Pods, sorted by name.
	proxies map[string][]corev1.Pod
}

// allPods are every zone's memcached Pods, sorted by name.
func (o *zonesObserved) allPods() []corev1.Pod {
	var all []corev1.Pod
	for _, ps := range o.pods {
		all = append(all, ps...)
	}
	slices.SortFunc(all, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return all
}

// testZones creates a Memcached with spec.zones over the two zones whose
// Nodes take any Pod, and checks what the Zones section of
// sync/api/v1alpha1/README.md promises, as the API server stores it and as
// kube-scheduler placed it (zonesConverged): per zone a memcached
// Deployment NAME-ZONE and a proxy Deployment NAME-proxy-ZONE, each Pod on
// a Node of its zone, a slot table per zone in status.zones, one Service
// NAME-proxy with trafficDistribution PreferClose, and no Deployment NAME.
// Then kubectl scale moves every zone; zone-c (whose one Node is tainted),
// added with a toleration, runs its memcached Pods there while its
// proxies, which take no toleration, stay unscheduled; removed while one
// of its Pods is held Terminating, it leaves the status at once, and
// nothing of it is left once the Pod is gone. Last, syncs of the
// converged Memcached write nothing (no Metacontroller loop).
func testZones(s *scenario) {
	const name = "zoned"
	began := s.create(name, "{size: 1, zones: {names: [zone-a, zone-b]}}")
	var zs zonesStatus
	s.getJSON(&zs, "memcached", name)
	if zs.Spec.Zones == nil || zs.Spec.Zones.TopologyKey != v1alpha1.DefaultTopologyKey {
		s.t.Errorf("spec.zones as stored is %+v, want topologyKey defaulted to %s", zs.Spec.Zones, v1alpha1.DefaultTopologyKey)
	}
	first := zonesWant{size: 1, zones: []string{"zone-a", "zone-b"}}
	obs, at := s.waitZonesConverged(name, first)
	record(s.t, "create-to-ready/zones-2-size-1", at.Sub(began), s.callsSince(began))
	s.checkProxyService(name, obs)

	steps := []struct {
		name   string
		slug   string // for the timing line
		change func() time.Time
		want   zonesWant
	}{
		{
			name: "kubectl scale to 2",
			slug: "resize-to-status-right/zones-kubectl-scale-1-to-2",
			change: func() time.Time {
				t := time.Now()
				s.kubectl("scale", "memcached/"+name, "--replicas=2")
				return t
			},
			want: zonesWant{size: 2, zones: []string{"zone-a", "zone-b"}},
		},
		{
			name: "zone-c added, with a toleration for its tainted Node",
			slug: "zone-added-to-ready/zone-c-size-2",
			change: func() time.Time {
				return s.patchSpec(name, `{"zones":{"names":["zone-a","zone-b","zone-c"]},"tolerations":`+tolerateDedicated+`}`)
			},
			want: zonesWant{size: 2, zones: []string{"zone-a", "zone-b", "zone-c"}},
		},
	}
	for _, step := range steps {
		began := step.change()
		obs, at = s.waitZonesConverged(name, step.want)
		record(s.t, step.slug, at.Sub(began), s.callsSince(began))
		s.checkProxyService(name, obs)
		s.t.Logf("%s: %s", step.name, describePlacement(obs))
	}

	// zone-c removed while one of its memcached Pods is held Terminating
	// by a finalizer of the test's, as a kubelet holds it for its grace
	// period: the zone leaves the status while the Pod is still there,
	// and once it is gone nothing of the zone is left.
	held := obs.pods["zone-c"][0].Name
	s.kubectl("patch", "pod", held, "--type=merge", "-p", `{"metadata":{"finalizers":["e2e.example.com/hold"]}}`)
	release := func() {
		s.c.Kubectl("patch", "pod", held, "-n", s.ns, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
	}
	s.t.Cleanup(release)
	began = s.patchSpec(name, `{"zones":{"names":["zone-a","zone-b"]}}`)
	s.waitFor("memcached", name, "zone-c gone from the status while its Pod "+held+" is Terminating", convergeTimeout, func(b []byte) error {
		m, err := decodeMemcached(b)
		if err != nil {
			return err
		}
		var zs zonesStatus
		if err := json.Unmarshal(b, &zs); err != nil {
			return err
		}
		var names []string
		for _, z := range zs.Status.Zones {
			names = append(names, z.Name)
		}
		switch st := m.Status; {
		case st.ObservedGeneration != m.Metadata.Generation:
			return fmt.Errorf("status.observedGeneration is %d, want the generation %d", st.ObservedGeneration, m.Metadata.Generation)
		case !slices.Equal(names, []string{"zone-a", "zone-b"}):
			return fmt.Errorf("status.zones names %v, want [zone-a zone-b]", names)
		case slices.Contains(st.Nodes, held):
			return fmt.Errorf("status.nodes %v names %s, a Pod of the removed zone", st.Nodes, held)
		case len(st.Nodes) != 4 || st.Replicas != 2 || st.ReadyReplicas != 2:
			return fmt.Errorf("status has nodes %v, replicas %d, readyReplicas %d; want zone-a's and zone-b's 4 Pods, 2 and 2", st.Nodes, st.Replicas, st.ReadyReplicas)
		}
		if ts := s.kubectl("get", "pod", held, "-o", "jsonpath={.metadata.deletionTimestamp}"); ts == "" {
			return fmt.Errorf("pod %s is not Terminating yet", held)
		}
		return checkConditions(m, convergedConditions(2))
	})
	release()
	obs, at = s.waitZonesConverged(name, zonesWant{size: 2, zones: []string{"zone-a", "zone-b"}, gone: []string{"zone-c"}})
	record(s.t, "zone-removed-to-gone/zone-c-size-2", at.Sub(began), s.callsSince(began))
	s.checkProxyService(name, obs)
	s.t.Logf("zone-c removed: %s", describePlacement(obs))

	s.checkScale(name, 2, " (Pods per zone)", obs.mc.Status.Selector)
	s.checkSyncWritesNothing(name, string(obs.mc.Metadata.UID))
}

// waitZonesConverged waits until what a user sees says the Memcached name
// runs what want says, and returns it with the time it first did.
func (s *scenario) waitZonesConverged(name string, want zonesWant) (*zonesObserved, time.Time) {
	s.t.Helper()
	nodeZones := s.nodeZones()
	var obs *zonesObserved
	what := fmt.Sprintf("memcached %s converged to %d ready Pods in each of %v", name, want.size, want.zones)
	_, at := s.waitFor("memcached", name, what, convergeTimeout, func(b []byte) error {
		var err error
		obs, err = s.zonesConverged(b, want, nodeZones)
		return err
	})
	return obs, at
}

// nodeZones maps each Node's name to its topology.kubernetes.io/zone label,
// as the API server has them.
func (s *scenario) nodeZones() map[string]string {
	s.t.Helper()
	zones := map[string]string{}
	for _, n := range s.nodes() {
		zones[n.Name] = n.Labels[v1alpha1.DefaultTopologyKey]
	}
	return zones
}

// nodes are the cluster's Nodes.
func (s *scenario) nodes() []corev1.Node {
	s.t.Helper()
	var nodes corev1.NodeList
	if err := json.Unmarshal([]byte(s.env.kubectl(s.t, nil, "get", "nodes", "-o", "json")), &nodes); err != nil {
		s.t.Fatal(err)
	}
	return nodes.Items
}

// zonesConverged returns what a user sees of the Memcached b once it runs
// what want says, an error saying what differs before:
//   - the status of the current generation, the converged conditions,
//     status.replicas and readyReplicas the size (Pods per zone),
//     status.nodes and status.endpoints every zone's Pods;
//   - status.zones the zones in order, each with size Pods, all ready, and
//     a slot table of size Serving slots held by exactly the zone's Pods;
//   - status.proxyEndpoint the Service NAME-proxy;
//   - per zone, Deployment NAME-ZONE rolled out at size and
//     NAME-proxy-ZONE rolled out (its Pods take spec.tolerations, so a
//     zone whose Nodes are tainted for the cache has proxies too), each Pod
//     on a Node whose zone label is the zone; a PodDisruptionBudget
//     NAME-ZONE past one Pod, none at one, and NAME-proxy-ZONE always;
//   - no Deployment NAME, and nothing of a zone not in want.zones: no
//     Deployment, ReplicaSet, PodDisruptionBudget or Pod labelled with it,
//     and for want.gone, no object of their names.
func (s *scenario) zonesConverged(b []byte, want zonesWant, nodeZones map[string]string) (*zonesObserved, error) {
	m, err := decodeMemcached(b)
	if err != nil {
		return nil, err
	}
	var zs zonesStatus
	if err := json.Unmarshal(b, &zs); err != nil {
		return nil, err
	}
	st, size, n := m.Status, want.size, int32(len(want.zones))
	switch {
	case st.ObservedGeneration != m.Metadata.Generation:
		return nil, fmt.Errorf("status.observedGeneration is %d, want the generation %d", st.ObservedGeneration, m.Metadata.Generation)
	case st.Replicas != size || st.ReadyReplicas != size:
		return nil, fmt.Errorf("status.replicas %d, readyReplicas %d; want %d, the Pods of the zone with fewest (conditions: %s)", st.Replicas, st.ReadyReplicas, size, m.conditions())
	case len(st.Nodes) != int(size*n) || len(st.Endpoints) != int(size*n):
		return nil, fmt.Errorf("status has %d nodes, %d endpoints; want %d of each, every zone's Pods", len(st.Nodes), len(st.Endpoints), size*n)
	case len(zs.Status.SlotTable.Slots) != 0:
		return nil, fmt.Errorf("status.slotTable has %d slots, want none with zones (each zone has its own)", len(zs.Status.SlotTable.Slots))
	}
	if err := checkConditions(m, convergedConditions(size)); err != nil {
		return nil, err
	}
	var names []string
	for _, z := range zs.Status.Zones {
		names = append(names, z.Name)
	}
	if !slices.Equal(names, want.zones) {
		return nil, fmt.Errorf("status.zones names %v, want %v", names, want.zones)
	}
	if want := fmt.Sprintf("%s%s.%s.svc:%d", m.Metadata.Name, v1alpha1.ProxySuffix, s.ns, memcachedPort); zs.Status.ProxyEndpoint != want {
		return nil, fmt.Errorf("status.proxyEndpoint is %q, want %q", zs.Status.ProxyEndpoint, want)
	}

	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	stdout, stderr, err := s.c.Kubectl("get", "deployments,replicasets,poddisruptionbudgets,pods", "-n", s.ns, "-o", "json")
	if err != nil {
		return nil, fmt.Errorf("kubectl get deployments,replicasets,poddisruptionbudgets,pods: %v: %s", err, stderr)
	}
	if err := json.Unmarshal([]byte(stdout), &list); err != nil {
		return nil, err
	}
	deployments := map[string]*appsv1.Deployment{}
	var pods []corev1.Pod
	exists := map[string]bool{} // "Kind/name"
	for _, raw := range list.Items {
		var o metav1.PartialObjectMetadata
		if err := json.Unmarshal(raw, &o); err != nil {
			return nil, err
		}
		exists[o.Kind+"/"+o.Name] = true
		if z, ok := o.Labels[v1alpha1.LabelZone]; ok && !slices.Contains(want.zones, z) {
			return nil, fmt.Errorf("%s %s of zone %s is left, want nothing of a zone not in %v", o.Kind, o.Name, z, want.zones)
		}
		switch o.Kind {
		case "Deployment":
			var d appsv1.Deployment
			if err := json.Unmarshal(raw, &d); err != nil {
				return nil, err
			}
			deployments[d.Name] = &d
		case "Pod":
			var p corev1.Pod
			if err := json.Unmarshal(raw, &p); err != nil {
				return nil, err
			}
			pods = append(pods, p)
		}
	}
	name := m.Metadata.Name
	if exists["Deployment/"+name] {
		return nil, fmt.Errorf("deployment %s exists, want none with zones (one per zone)", name)
	}
	for _, z := range want.gone {
		for _, k := range []string{"Deployment/" + name + "-" + z, "Deployment/" + name + v1alpha1.ProxySuffix + "-" + z, "PodDisruptionBudget/" + name + "-" + z, "PodDisruptionBudget/" + name + v1alpha1.ProxySuffix + "-" + z} {
			if exists[k] {
				return nil, fmt.Errorf("%s is left, want nothing of the removed zone %s", k, z)
			}
		}
	}
	if exists["PodDisruptionBudget/"+name+v1alpha1.ProxySuffix] {
		return nil, fmt.Errorf("PodDisruptionBudget %s%s spans every zone's proxies, want one per zone", name, v1alpha1.ProxySuffix)
	}
	for _, z := range want.zones {
		if !exists["PodDisruptionBudget/"+name+v1alpha1.ProxySuffix+"-"+z] {
			return nil, fmt.Errorf("no PodDisruptionBudget %s%s-%s for zone %s's proxies", name, v1alpha1.ProxySuffix, z, z)
		}
	}

	obs := &zonesObserved{mc: m, zs: &zs, pods: map[string][]corev1.Pod{}, proxies: map[string][]corev1.Pod{}}
	var endpoints, nodes []string
	for i, zone := range want.zones {
		d := deployments[name+"-"+zone]
		if d == nil {
			return nil, fmt.Errorf("no Deployment %s-%s for zone %s", name, zone, zone)
		}
		if err := rolledOut(d, size); err != nil {
			return nil, err
		}
		if img := containerImage(d.Spec.Template.Spec); img != st.Image {
			return nil, fmt.Errorf("deployment %s runs image %q, status.image says %q", d.Name, img, st.Image)
		}
		ps, err := podsOf(d, pods)
		if err != nil {
			return nil, err
		}
		if err := placed(ps, zone, nodeZones); err != nil {
			return nil, err
		}
		if len(ps) != int(size) {
			return nil, fmt.Errorf("deployment %s has %d live Pods, want %d", d.Name, len(ps), size)
		}
		for _, p := range ps {
			nodes = append(nodes, p.Name)
			endpoints = append(endpoints, net.JoinHostPort(p.Status.PodIP, strconv.Itoa(memcachedPort)))
		}
		obs.pods[zone] = ps
		if err := zoneTable(zs.Status.Zones[i], size, ps); err != nil {
			return nil, err
		}
		pdb := "PodDisruptionBudget/" + name + "-" + zone
		if exists[pdb] != (size > 1) {
			return nil, fmt.Errorf("at size %d %s exists: %v, want %v (one past one Pod a zone)", size, pdb, exists[pdb], size > 1)
		}

		proxy := deployments[name+v1alpha1.ProxySuffix+"-"+zone]
		if proxy == nil {
			return nil, fmt.Errorf("no Deployment %s%s-%s for zone %s", name, v1alpha1.ProxySuffix, zone, zone)
		}
		if env := envValue(proxy.Spec.Template.Spec, "proxy", "MEMCACHED_PROXY_LOCAL_ZONE"); env != zone {
			return nil, fmt.Errorf("deployment %s: the proxy's MEMCACHED_PROXY_LOCAL_ZONE is %q, want %q", proxy.Name, env, zone)
		}
		pps, err := podsOf(proxy, pods)
		if err != nil {
			return nil, err
		}
		if err := rolledOut(proxy, *proxy.Spec.Replicas); err != nil {
			return nil, err
		}
		if err := placed(pps, zone, nodeZones); err != nil {
			return nil, err
		}
		if len(pps) != int(*proxy.Spec.Replicas) {
			return nil, fmt.Errorf("deployment %s has %d live Pods, want %d", proxy.Name, len(pps), *proxy.Spec.Replicas)
		}
		obs.proxies[zone] = pps
	}
	slices.Sort(nodes)
	slices.Sort(endpoints)
	if !slices.Equal(nodes, st.Nodes) {
		return nil, fmt.Errorf("status.nodes is %v, the zones' Deployments have %v", st.Nodes, nodes)
	}
	if !slices.Equal(endpoints, st.Endpoints) {
		return nil, fmt.Errorf("status.endpoints is %v, the Pods' IPs give %v", st.Endpoints, endpoints)
	}
	return obs, nil
}

// rolledOut returns nil when the Deployment has rolled out replicas ready
// Pods of its current generation.
func rolledOut(d *appsv1.Deployment, replicas int32) error {
	ds := d.Status
	switch {
	case d.Spec.Replicas == nil || *d.Spec.Replicas != replicas:
		return fmt.Errorf("deployment %s has spec.replicas %v, want %d", d.Name, d.Spec.Replicas, replicas)
	case ds.ObservedGeneration != d.Generation:
		return fmt.Errorf("deployment %s status is of generation %d, want %d", d.Name, ds.ObservedGeneration, d.Generation)
	case ds.Replicas != replicas || ds.ReadyReplicas != replicas || ds.UpdatedReplicas != replicas || ds.AvailableReplicas != replicas:
		return fmt.Errorf("deployment %s has replicas %d, ready %d, updated %d, available %d; want %d of each",
			d.Name, ds.Replicas, ds.ReadyReplicas, ds.UpdatedReplicas, ds.AvailableReplicas, replicas)
	}
	return nil
}

// podsOf returns the live Pods among pods that the Deployment's selector
// selects, sorted by name.
func podsOf(d *appsv1.Deployment, pods []corev1.Pod) ([]corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("deployment %s: selector: %v", d.Name, err)
	}
	var out []corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp == nil && sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// placed returns nil when every Pod carries the zone's label and, if
// scheduled, is Running and Ready on a Node whose zone label is the zone.
// Unless scheduled is false, every Pod must be; if it is false, none may
// be: kube-scheduler found no Node of the zone it may run on.
func placed(pods []corev1.Pod, zone string, nodeZones map[string]string) error {
	for _, p := range pods {
		switch node := p.Spec.NodeName; {
		case p.Labels[v1alpha1.LabelZone] != zone:
			return fmt.Errorf("pod %s has %s=%q, want %q", p.Name, v1alpha1.LabelZone, p.Labels[v1alpha1.LabelZone], zone)
		case node == "":
			return fmt.Errorf("pod %s of zone %s is not scheduled (%s)", p.Name, zone, p.Status.Phase)
		case nodeZones[node] != zone:
			return fmt.Errorf("pod %s of zone %s runs on Node %s, of zone %q", p.Name, zone, node, nodeZones[node])
		case !podReady(&p):
			return fmt.Errorf("pod %s is %s, not Running and Ready", p.Name, p.Status.Phase)
		}
	}
	return nil
}

// zoneTable returns nil when a zone's status has size Pods, all ready, and
// a slot table of size Serving slots, 0 to size-1, held by exactly pods
// (each at its own address).
func zoneTable(z v1alpha1.ZoneStatus, size int32, pods []corev1.Pod) error {
	if z.Replicas != size || z.ReadyReplicas != size {
		return fmt.Errorf("status.zones %s: replicas %d, readyReplicas %d; want %d", z.Name, z.Replicas, z.ReadyReplicas, size)
	}
	ips := map[string]string{}
	for _, p := range pods {
		ips[p.Name] = p.Status.PodIP
	}
	slots := z.SlotTable.Slots
	if len(slots) != int(size) {
		return fmt.Errorf("status.zones %s: %d slots, want %d: %+v", z.Name, len(slots), size, slots)
	}
	var holders []string
	for i, e := range slots {
		ip, ok := ips[e.Pod]
		switch {
		case e.Slot != int32(i) || e.State != v1alpha1.SlotServing:
			return fmt.Errorf("status.zones %s: slot %d is %+v, want slot %d Serving", z.Name, i, e, i)
		case !ok:
			return fmt.Errorf("status.zones %s: slot %d is held by %s, not one of the zone's Pods %v", z.Name, i, e.Pod, slices.Sorted(maps.Keys(ips)))
		case e.IP != ip:
			return fmt.Errorf("status.zones %s: slot %d names %s at %s, the Pod has %s", z.Name, i, e.Pod, e.IP, ip)
		}
		holders = append(holders, e.Pod)
	}
	slices.Sort(holders)
	if len(slices.Compact(holders)) != len(pods) {
		return fmt.Errorf("status.zones %s: slots held by %v, want each of %d Pods once", z.Name, holders, len(pods))
	}
	if z.SlotTable.Version == 0 {
		return fmt.Errorf("status.zones %s: slot table version 0", z.Name)
	}
	return nil
}

// envValue is the value of a container's environment variable, "" if unset.
func envValue(spec corev1.PodSpec, container, name string) string {
	for _, c := range spec.Containers {
		if c.Name != container {
			continue
		}
		for _, e := range c.Env {
			if e.Name == name {
				return e.Value
			}
		}
	}
	return ""
}

// checkProxyService checks the one Service of every zone's proxies as the
// API server stores it: trafficDistribution PreferClose (kept because the
// suite's kube-apiserver 1.30 runs with its feature gate; see test/kube),
// a ClusterIP on 11211, selecting exactly every zone's live proxy Pods.
func (s *scenario) checkProxyService(name string, obs *zonesObserved) {
	s.t.Helper()
	proxy := name + v1alpha1.ProxySuffix
	var svc corev1.Service
	s.getJSON(&svc, "service", proxy)
	if td := svc.Spec.TrafficDistribution; td == nil || *td != corev1.ServiceTrafficDistributionPreferClose {
		s.t.Errorf("service %s has trafficDistribution %v, want %s", proxy, ptrString(td), corev1.ServiceTrafficDistributionPreferClose)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != memcachedPort || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		s.t.Errorf("service %s: clusterIP %q, ports %+v; want a ClusterIP on %d", proxy, svc.Spec.ClusterIP, svc.Spec.Ports, memcachedPort)
	}
	if !ownedBy(svc.OwnerReferences, string(obs.mc.Metadata.UID)) {
		s.t.Errorf("service %s has owners %v, want the Memcached", proxy, svc.OwnerReferences)
	}
	pods, err := s.livePods(labels.SelectorFromSet(svc.Spec.Selector).String())
	if err != nil {
		s.t.Fatal(err)
	}
	var got, want []string
	for _, p := range pods {
		got = append(got, p.Name)
	}
	for _, ps := range obs.proxies {
		for _, p := range ps {
			want = append(want, p.Name)
		}
	}
	slices.Sort(want)
	if len(svc.Spec.Selector) == 0 || !slices.Equal(got, want) {
		s.t.Errorf("service %s (selector %v) selects %v, want every zone's proxy Pods %v", proxy, svc.Spec.Selector, got, want)
	}
	var cm corev1.ConfigMap
	s.getJSON(&cm, "configmap", proxy)
	if cm.Data["config.lua"] == "" {
		s.t.Errorf("configmap %s holds no route configuration", proxy)
	}
}

// ptrString renders an optional string for a message.
func ptrString[T ~string](p *T) string {
	if p == nil {
		return "<unset>"
	}
	return string(*p)
}

// describePlacement renders where each zone's Pods run, for the log.
func describePlacement(obs *zonesObserved) string {
	var out []string
	for _, z := range obs.zs.Status.Zones {
		var where []string
		for _, p := range obs.pods[z.Name] {
			where = append(where, p.Name+"@"+p.Spec.NodeName)
		}
		for _, p := range obs.proxies[z.Name] {
			node := p.Spec.NodeName
			if node == "" {
				node = "unscheduled"
			}
			where = append(where, p.Name+"@"+node)
		}
		out = append(out, fmt.Sprintf("%s: %s (slot table version %d)", z.Name, strings.Join(where, " "), z.SlotTable.Version))
	}
	return strings.Join(out, "; ")
}

// checkSyncWritesNothing proves that the converged Memcached name, with
// uid, is at rest: once its children stop changing, two syncs that the
// test causes (annotations, which the hook copies nowhere) write nothing,
// neither a child nor the Memcached's status. Metacontroller syncs a
// Memcached one sync at a time, so once the second has called the hook
// the first is done; a hook whose answer changed from sync to sync (a
// loop) writes the status in it.
func (s *scenario) checkSyncWritesNothing(name, uid string) {
	s.t.Helper()
	before := s.stableChildren(uid)
	var m memcached
	s.getJSON(&m, "memcached", name)
	gen := m.Metadata.Generation
	calls := s.syncCallsAt(name, gen)
	rv := ""
	for i := 1; i <= 2; i++ {
		rv = s.kubectl("annotate", "memcached", name, "--overwrite", fmt.Sprintf("e2e.example.com/mark=at-rest-%d", i), "-o", "jsonpath={.metadata.resourceVersion}")
		s.poll(fmt.Sprintf("the hook to answer a sync for annotation %d", i), convergeTimeout, func() error {
			if got := s.syncCallsAt(name, gen); got < calls+i {
				return fmt.Errorf("%d sync calls at generation %d, want %d", got, gen, calls+i)
			}
			return nil
		})
	}
	var after memcached
	s.getJSON(&after, "memcached", name)
	if after.Metadata.ResourceVersion != rv {
		s.t.Errorf("the Memcached was written after its annotation (resourceVersion %s -> %s): a sync of a converged Memcached changed its status", rv, after.Metadata.ResourceVersion)
	}
	if d := diffChildren(before, s.children(uid)); len(d) > 0 {
		s.t.Errorf("syncs of a converged Memcached changed its children, want none: %v", d)
	}
	if err := checkConditions(&after, convergedConditions(*after.Spec.Size)); err != nil {
		s.t.Errorf("at rest: %v", err)
	}
}

// checkZonesExample applies an example with spec.zones as its comment
// says, listing the zones the cluster's Nodes carry: those of the Nodes
// that take any Pod (the example has no toleration, and the proxies take
// none), in place of the example's cloud zone names. It waits until every
// zone converges to the example's size, and checks the NetworkPolicy
// (every zone's memcached Pods) and the proxies' Service.
func (s *scenario) checkZonesExample(path string, ex *example) {
	s.t.Helper()
	zones := s.untaintedZones()
	b, err := os.ReadFile(path)
	if err != nil {
		s.t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(b, &obj); err != nil {
		s.t.Fatalf("%s: %v", path, err)
	}
	spec, _ := obj["spec"].(map[string]any)
	z, _ := spec["zones"].(map[string]any)
	if z == nil {
		s.t.Fatalf("%s: no spec.zones to list the cluster's zones in", path)
	}
	s.t.Logf("%s: spec.zones.names %v, here %v", filepath.Base(path), z["names"], zones)
	z["names"] = zones
	manifest, err := json.Marshal(obj)
	if err != nil {
		s.t.Fatal(err)
	}
	name := ex.Metadata.Name
	began := time.Now()
	s.kubectlStdin(string(manifest), "apply", "-f", "-")
	var m memcached
	s.getJSON(&m, "memcached", name)
	if m.Spec.Size == nil {
		s.t.Fatalf("memcached %s has no spec.size after defaulting", name)
	}
	obs, at := s.waitZonesConverged(name, zonesWant{size: *m.Spec.Size, zones: zones})
	record(s.t, fmt.Sprintf("create-to-ready/example-%s-size-%d", strings.TrimPrefix(name, "memcached-"), *m.Spec.Size), at.Sub(began), s.callsSince(began))
	s.checkNetworkPolicy(name, &observed{mc: obs.mc, pods: obs.allPods()})
	s.checkProxyService(name, obs)
}

// untaintedZones are the zones of the Nodes that have no taint that keeps
// Pods off, sorted.
func (s *scenario) untaintedZones() []string {
	s.t.Helper()
	var zones []string
	for _, n := range s.nodes() {
		z := n.Labels[v1alpha1.DefaultTopologyKey]
		if z == "" || slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Effect != corev1.TaintEffectPreferNoSchedule }) {
			continue
		}
		zones = append(zones, z)
	}
	slices.Sort(zones)
	zones = slices.Compact(zones)
	if len(zones) == 0 {
		s.t.Fatal("no Node without a taint carries a zone label")
	}
	return zones
}
