package memcached_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/test/testutil"
)

// allKinds are every child kind the hook makes but the ServiceMonitor, as
// a CompositeController from manifests/ manages them.
var allKinds = []string{memcached.DeploymentKey, memcached.ServiceKey, memcached.PDBKey, memcached.NetworkPolicyKey,
	memcached.ServiceAccountKey, memcached.RoleKey, memcached.RoleBindingKey, memcached.ConfigMapKey}

// zonePods are n ready Pods in each zone, named <zone>-<i>, labelled with
// their zone, with addresses apart per zone.
func zonePods(zones []string, n int) []pod {
	var ps []pod
	for zi, zone := range zones {
		for i := range n {
			l := memcached.ZoneSelectorLabels(testName, zone)
			ps = append(ps, pod{name: fmt.Sprintf("%s-%d", zone, i), labels: l, ready: true, ip: fmt.Sprintf("10.%d.0.%d", zi+1, i+1)})
		}
	}
	return ps
}

// zonedFixture is a Memcached of size Pods in each of zones, every Pod
// Ready and every zone's Deployment rolled out, with the status zones (nil
// before the first sync).
func zonedFixture(spec string, zones []string, size int32, status []v1alpha1.ZoneStatus) fixture {
	deps := map[string]*deploy{}
	for _, z := range zones {
		deps[z] = convergedDeploy(size)
	}
	return fixture{spec: spec, kinds: allKinds, zoneDeployments: deps, pods: zonePods(zones, int(size)), zones: status}
}

const zonesSpec = `{"size":2,"zones":{"names":["a","b","c"]}}`

// TestZonesGolden answers a Memcached of two Pods in each of three zones,
// converged (its second sync), and compares the answer with
// testdata/golden-zones/converged.json (-update rewrites it). A third
// sync, later, changes nothing.
func TestZonesGolden(t *testing.T) {
	zones := []string{"a", "b", "c"}
	first := zonedFixture(zonesSpec, zones, 2, nil).run(t, fixedNow)
	f := zonedFixture(zonesSpec, zones, 2, first.status.Zones)
	body := f.body(t)
	got := callHook(t, "sync", body, fixedNow)
	testutil.Golden(t, filepath.Join("testdata", "golden-zones", "converged.json"), got)
	checkAnswer(t, "sync", body, got)
	want := parseAnswer(t, got)
	f.zones, f.conditions = want.status.Zones, want.status.Conditions
	if again := f.run(t, fixedNow.Add(time.Hour)); !cmp.Equal(again.status, want.status) {
		t.Errorf("a later sync of the converged state changed the status:\n%s", cmp.Diff(want.status, again.status))
	}
}

// TestZonesChildren checks what each zone gets: a memcached Deployment and
// a proxy Deployment pinned to it, a PodDisruptionBudget past one Pod; and
// what the zones share: the headless Service, the proxy's one Service with
// trafficDistribution, its route configuration.
func TestZonesChildren(t *testing.T) {
	tests := []struct {
		name string
		spec string
		// wantTerms are the node selector terms every zone's memcached
		// Pods get, with ZONE standing for the zone; its proxies get the
		// zone's alone (spec.affinity is memcached's).
		wantTerms    string
		wantPDBs     bool
		wantKey      string
		wantReplicas int32
	}{{
		name:         "defaults",
		spec:         `{"size":2,"zones":{"names":["a","b"]}}`,
		wantTerms:    "[topology.kubernetes.io/zone In [ZONE]]",
		wantPDBs:     true,
		wantKey:      v1alpha1.DefaultTopologyKey,
		wantReplicas: 2,
	}, {
		name: "the user's node affinity: each of its terms also asks for the zone",
		spec: `{"size":1,"zones":{"names":["a","b"],"topologyKey":"example.com/rack-zone"},"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[` +
			`{"matchExpressions":[{"key":"disk","operator":"In","values":["ssd"]}]},{"matchExpressions":[{"key":"pool","operator":"Exists"}]}]}}}}`,
		wantTerms:    "[disk In [ssd] example.com/rack-zone In [ZONE]] [pool Exists [] example.com/rack-zone In [ZONE]]",
		wantPDBs:     false,
		wantKey:      "example.com/rack-zone",
		wantReplicas: 1,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := fixture{spec: tt.spec, kinds: allKinds}.run(t, fixedNow)
			if c := a.condition(t, "Degraded"); c.Reason != string(memcached.ReasonAsExpected) {
				t.Fatalf("Degraded is %s: %s", c.Reason, c.Message)
			}
			keys := childNames(a)
			if slices.Contains(keys, "Deployment/"+testName) {
				t.Errorf("children have the Deployment %s of a Memcached without zones: %v", testName, keys)
			}
			for _, zone := range []string{"a", "b"} {
				for _, name := range []string{testName + "-" + zone, testName + "-proxy-" + zone} {
					var d appsv1.Deployment
					c, ok := findChildNamed(a, "Deployment", name)
					if !ok {
						t.Fatalf("no Deployment %s in %v", name, keys)
					}
					a.decodeChild(t, c, &d)
					if got := d.Spec.Selector.MatchLabels[v1alpha1.LabelZone]; got != zone {
						t.Errorf("%s selects zone %q, want %q", name, got, zone)
					}
					if got := d.Spec.Template.Labels[v1alpha1.LabelZone]; got != zone {
						t.Errorf("%s's Pods are labelled zone %q, want %q", name, got, zone)
					}
					want := strings.ReplaceAll(tt.wantTerms, "ZONE", zone)
					if strings.Contains(name, "-proxy-") {
						want = fmt.Sprintf("[%s In [%s]]", tt.wantKey, zone)
					}
					if got := nodeTerms(d.Spec.Template.Spec.Affinity); got != want {
						t.Errorf("%s's node selector terms are %s, want %s", name, got, want)
					}
					for _, sc := range d.Spec.Template.Spec.TopologySpreadConstraints {
						if sc.LabelSelector.MatchLabels[v1alpha1.LabelZone] != zone {
							t.Errorf("%s spreads over Pods of other zones: %v", name, sc.LabelSelector.MatchLabels)
						}
					}
				}
				var d appsv1.Deployment
				c, _ := findChildNamed(a, "Deployment", testName+"-"+zone)
				a.decodeChild(t, c, &d)
				if *d.Spec.Replicas != tt.wantReplicas {
					t.Errorf("zone %s runs %d Pods, want spec.size, %d", zone, *d.Spec.Replicas, tt.wantReplicas)
				}
				if _, ok := findChildNamed(a, "PodDisruptionBudget", testName+"-"+zone); ok != tt.wantPDBs {
					t.Errorf("zone %s has a PodDisruptionBudget: %v, want %v", zone, ok, tt.wantPDBs)
				}
				if _, ok := findChildNamed(a, "PodDisruptionBudget", testName+"-proxy-"+zone); !ok {
					t.Errorf("zone %s's proxies have no PodDisruptionBudget of their own", zone)
				}
				var proxy appsv1.Deployment
				c, _ = findChildNamed(a, "Deployment", testName+"-proxy-"+zone)
				a.decodeChild(t, c, &proxy)
				if got := envOf(proxy.Spec.Template.Spec.Containers, "proxy", "MEMCACHED_PROXY_LOCAL_ZONE"); got != zone {
					t.Errorf("zone %s's proxy has MEMCACHED_PROXY_LOCAL_ZONE %q, want %q", zone, got, zone)
				}
			}
			if _, ok := findChildNamed(a, "PodDisruptionBudget", testName+"-proxy"); ok {
				t.Errorf("one PodDisruptionBudget spans every zone's proxies: one zone's unready proxies would block drains in the others")
			}
			var svc corev1.Service
			c, ok := findChildNamed(a, "Service", testName+"-proxy")
			if !ok {
				t.Fatalf("no Service %s-proxy in %v", testName, keys)
			}
			a.decodeChild(t, c, &svc)
			if td := svc.Spec.TrafficDistribution; td == nil || *td != corev1.ServiceTrafficDistributionPreferClose {
				t.Errorf("the proxy's Service has trafficDistribution %v, want PreferClose", td)
			}
			if svc.Spec.Selector[v1alpha1.LabelZone] != "" {
				t.Errorf("the proxy's Service selects one zone's proxies: %v", svc.Spec.Selector)
			}
			var cm corev1.ConfigMap
			c, _ = findChildNamed(a, "ConfigMap", testName+"-proxy")
			a.decodeChild(t, c, &cm)
			if cm.Data["config.lua"] != memcached.ProxyConfig {
				t.Errorf("the proxy's route configuration is not proxy.lua, which reads the zones from the pool file")
			}
		})
	}
}

// TestZoneTables follows three zones' slot tables through a lost Pod and
// a scale-up: each zone's table changes alone, with its own version, and
// every zone ends with the same number of slots.
func TestZoneTables(t *testing.T) {
	zones := []string{"a", "b", "c"}
	now := fixedNow
	f := zonedFixture(zonesSpec, zones, 2, nil)
	step := func(name string, change func(f *fixture)) []v1alpha1.ZoneStatus {
		t.Helper()
		before := map[string]v1alpha1.SlotTable{}
		for _, z := range f.zones {
			before[z.Name] = z.SlotTable
		}
		change(&f)
		now = now.Add(time.Minute)
		got := f.run(t, now).status
		f.zones = got.Zones
		if got.SlotTable.Version != 0 || len(got.SlotTable.Slots) != 0 {
			t.Errorf("%s: status.slotTable is %+v, want it empty with zones", name, got.SlotTable)
		}
		return got.Zones
	}
	got := step("first sync", func(*fixture) {})
	if names := zoneNames(got); !slices.Equal(names, zones) {
		t.Fatalf("status.zones are %v, want %v", names, zones)
	}
	for _, z := range got {
		if s := slotsOf(z.SlotTable); s != fmt.Sprintf("%[1]s-0:Serving %[1]s-1:Serving", z.Name) {
			t.Errorf("zone %s: slots %q", z.Name, s)
		}
	}
	first := got

	got = step("b-1 lost", func(f *fixture) { f.pods = slices.DeleteFunc(f.pods, func(p pod) bool { return p.name == "b-1" }) })
	for i, z := range got {
		changed := !cmp.Equal(z.SlotTable, first[i].SlotTable)
		if changed != (z.Name == "b") {
			t.Errorf("zone %s's table changed: %v, want only zone b's:\n%s", z.Name, changed, cmp.Diff(first[i].SlotTable, z.SlotTable))
		}
	}
	if s := slotsOf(got[1].SlotTable); s != "b-0:Serving -:Empty" {
		t.Errorf("zone b: slots %q, want b-0:Serving -:Empty", s)
	}
	if got[1].SlotTable.Version <= first[1].SlotTable.Version {
		t.Errorf("zone b's version %d did not rise from %d", got[1].SlotTable.Version, first[1].SlotTable.Version)
	}

	got = step("size 3", func(f *fixture) {
		f.spec = `{"size":3,"zones":{"names":["a","b","c"]}}`
		f.pods = zonePods(zones, 3)
		for _, z := range zones {
			f.zoneDeployments[z] = convergedDeploy(3)
		}
	})
	got = step("settled", func(*fixture) {})
	for _, z := range got {
		if len(z.SlotTable.Slots) != 3 || z.Replicas != 3 || z.ReadyReplicas != 3 {
			t.Errorf("zone %s after the scale-up: %d slots, %d Pods, %d ready, want 3 of each", z.Name, len(z.SlotTable.Slots), z.Replicas, z.ReadyReplicas)
		}
	}
}

// TestZonesStatus checks what the Memcached's own fields say with zones:
// replicas per zone (the fewest), Available per zone.
func TestZonesStatus(t *testing.T) {
	zones := []string{"a", "b", "c"}
	tests := []struct {
		name                    string
		drop                    []string // Pods gone
		notReady                []string
		wantReplicas, wantReady int32
		wantAvailable           bool
		wantMessage             string
	}{{
		name:         "all there",
		wantReplicas: 2, wantReady: 2, wantAvailable: true,
		wantMessage: "ready Pods of 2 in each zone: a 2, b 2, c 2 (1 needed in each)",
	}, {
		name:         "one Pod of zone c not ready",
		notReady:     []string{"c-0"},
		wantReplicas: 2, wantReady: 1, wantAvailable: true,
		wantMessage: "ready Pods of 2 in each zone: a 2, b 2, c 1 (1 needed in each)",
	}, {
		name:         "zone c lost",
		drop:         []string{"c-0", "c-1"},
		wantReplicas: 0, wantReady: 0, wantAvailable: false,
		wantMessage: "ready Pods of 2 in each zone: a 2, b 2, c 0 (1 needed in each)",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := zonedFixture(zonesSpec, zones, 2, nil)
			f.pods = slices.DeleteFunc(f.pods, func(p pod) bool { return slices.Contains(tt.drop, p.name) })
			for i := range f.pods {
				if slices.Contains(tt.notReady, f.pods[i].name) {
					f.pods[i].ready = false
				}
			}
			a := f.run(t, fixedNow)
			if a.status.Replicas != tt.wantReplicas || a.status.ReadyReplicas != tt.wantReady {
				t.Errorf("replicas %d, ready %d, want %d and %d", a.status.Replicas, a.status.ReadyReplicas, tt.wantReplicas, tt.wantReady)
			}
			if got := len(a.status.Nodes); got != 6-len(tt.drop) {
				t.Errorf("status.nodes has %d Pods, want every zone's, %d", got, 6-len(tt.drop))
			}
			c := a.condition(t, "Available")
			if (c.Status == "True") != tt.wantAvailable || c.Message != tt.wantMessage {
				t.Errorf("Available is %s (%s), want %v (%s)", c.Status, c.Message, tt.wantAvailable, tt.wantMessage)
			}
		})
	}
}

// TestZonesAddedAndRemoved: a zone removed from the list takes its
// Deployments and its status with it; a zone added gets them; the others
// keep their tables.
func TestZonesAddedAndRemoved(t *testing.T) {
	f := zonedFixture(zonesSpec, []string{"a", "b", "c"}, 2, nil)
	first := f.run(t, fixedNow).status.Zones
	f.zones = first
	f.spec = `{"size":2,"zones":{"names":["a","b","d"]}}`
	a := f.run(t, fixedNow.Add(time.Minute))
	keys := childNames(a)
	for _, gone := range []string{"Deployment/" + testName + "-c", "Deployment/" + testName + "-proxy-c", "PodDisruptionBudget/" + testName + "-c"} {
		if slices.Contains(keys, gone) {
			t.Errorf("zone c removed, but %s is still desired", gone)
		}
	}
	for _, added := range []string{"Deployment/" + testName + "-d", "Deployment/" + testName + "-proxy-d"} {
		if !slices.Contains(keys, added) {
			t.Errorf("zone d added, but %s is not desired: %v", added, keys)
		}
	}
	if names := zoneNames(a.status.Zones); !slices.Equal(names, []string{"a", "b", "d"}) {
		t.Errorf("status.zones are %v, want a, b, d", names)
	}
	for i := range 2 {
		if !cmp.Equal(a.status.Zones[i].SlotTable, first[i].SlotTable) {
			t.Errorf("zone %s's table changed when another zone went", first[i].Name)
		}
	}
	// Zone c's Pods, still running while their Deployment goes, are in
	// no table; zone d has none yet.
	if d := a.status.Zones[2]; len(d.SlotTable.Slots) != 2 || d.SlotTable.Slots[0].State != v1alpha1.SlotEmpty {
		t.Errorf("zone d's table is %q, want two empty slots", slotsOf(d.SlotTable))
	}
	if c := a.condition(t, "Progressing"); !strings.HasPrefix(c.Message, "zone d: ") {
		t.Errorf("Progressing says %q, want it to name zone d", c.Message)
	}
}

// TestZonesInvalidSpec: a zoned Memcached whose spec turns invalid keeps
// its children and its zones' tables.
func TestZonesInvalidSpec(t *testing.T) {
	zones := []string{"a", "b", "c"}
	f := zonedFixture(zonesSpec, zones, 2, nil)
	good := f.run(t, fixedNow)
	f.zones = good.status.Zones
	f.spec = `{"size":2,"zones":{"names":["a","b","c"]},"tls":{"secretName":"x"}}`
	a := f.run(t, fixedNow.Add(time.Minute))
	if c := a.condition(t, "Degraded"); c.Reason != string(memcached.ReasonInvalidSpec) || !strings.Contains(c.Message, "zones cannot be used with tls or auth") {
		t.Errorf("Degraded is %s: %q, want InvalidSpec naming zones and tls", c.Reason, c.Message)
	}
	for i, z := range a.status.Zones {
		if !cmp.Equal(z.SlotTable, good.status.Zones[i].SlotTable) {
			t.Errorf("zone %s's table changed with an invalid spec:\n%s", z.Name, cmp.Diff(good.status.Zones[i].SlotTable, z.SlotTable))
		}
	}
	if a.status.Replicas != 2 {
		t.Errorf("replicas %d, want 2 (the zones' Deployments', since the spec is invalid)", a.status.Replicas)
	}
}

// TestZonesRefused: what cannot go with zones is refused, naming why.
func TestZonesRefused(t *testing.T) {
	tests := []struct {
		name, spec, want string
	}{
		{"tls", `{"zones":{"names":["a"]},"tls":{"secretName":"s"}}`, "zones cannot be used with tls or auth"},
		{"auth", `{"zones":{"names":["a"]},"auth":{"secretName":"s"}}`, "zones cannot be used with tls or auth"},
		{"discovery", `{"zones":{"names":["a"]},"discovery":{"enabled":true}}`, "zones cannot be used with discovery or stableNames"},
		{"stable names", `{"zones":{"names":["a"]},"stableNames":{"enabled":true}}`, "zones cannot be used with discovery or stableNames"},
		{"a zone named proxy", `{"zones":{"names":["proxy"]}}`, "zones.names must be"},
		{"a zone that would take another's proxy name", `{"zones":{"names":["a","proxy-a"]}}`, "zones.names must be"},
		{"upper case", `{"zones":{"names":["Zone-A"]}}`, "zones.names must be"},
		{"twice", `{"zones":{"names":["a","a"]}}`, "Duplicate value"},
		{"none", `{"zones":{"names":[]}}`, "at least one zone"},
		{"a bad topology key", `{"zones":{"names":["a"],"topologyKey":"a b"}}`, "zones.topologyKey"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := fixture{spec: tt.spec, kinds: allKinds}.run(t, fixedNow)
			c := a.condition(t, "Degraded")
			if c.Reason != string(memcached.ReasonInvalidSpec) || !strings.Contains(c.Message, tt.want) {
				t.Errorf("Degraded is %s: %q, want InvalidSpec with %q", c.Reason, c.Message, tt.want)
			}
		})
	}
}

func zoneNames(zs []v1alpha1.ZoneStatus) []string {
	var names []string
	for _, z := range zs {
		names = append(names, z.Name)
	}
	return names
}

// childNames are the answer's children as Kind/name.
func childNames(a syncAnswer) []string {
	var names []string
	for _, c := range a.children {
		names = append(names, testutil.GetString(c, "kind")+"/"+testutil.GetString(c, "metadata", "name"))
	}
	return names
}

// findChildNamed finds a child of an answer by kind and name.
func findChildNamed(a syncAnswer, kind, name string) (map[string]any, bool) {
	for _, c := range a.children {
		if testutil.GetString(c, "kind") == kind && testutil.GetString(c, "metadata", "name") == name {
			return c, true
		}
	}
	return nil, false
}

// nodeTerms writes the required node selector terms as
// "[key Op [values] ...] ...".
func nodeTerms(a *corev1.Affinity) string {
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	var terms []string
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		var reqs []string
		for _, r := range term.MatchExpressions {
			reqs = append(reqs, fmt.Sprintf("%s %s %v", r.Key, r.Operator, r.Values))
		}
		terms = append(terms, "["+strings.Join(reqs, " ")+"]")
	}
	return strings.Join(terms, " ")
}

// envOf is the value of a container's environment variable.
func envOf(cs []corev1.Container, container, name string) string {
	for _, c := range cs {
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

// TestZonesKeepWarm replaces a Pod in zone b with keepWarm: the hand-off
// names the zone, and its items go to the Pod that took the slot in zone
// b's table; zone a's and c's tables and Pods are not involved.
func TestZonesKeepWarm(t *testing.T) {
	zones := []string{"a", "b", "c"}
	spec := `{"size":2,"zones":{"names":["a","b","c"]},"rollout":{"keepWarm":true}}`
	f := zonedFixture(spec, zones, 2, nil)
	f.kinds = allKinds
	f.zones = f.run(t, fixedNow).status.Zones
	// b-1 leaves, and b-2, Ready, takes its place in zone b.
	for i := range f.pods {
		if f.pods[i].name == "b-1" {
			f.pods[i].deleting = true
		}
	}
	f.pods = append(f.pods, pod{name: "b-2", labels: memcached.ZoneSelectorLabels(testName, "b"), ready: true, ip: "10.2.0.9"})
	a := f.run(t, fixedNow.Add(time.Minute))
	if c := a.condition(t, "Degraded"); c.Reason != string(memcached.ReasonAsExpected) {
		t.Fatalf("Degraded is %s: %s", c.Reason, c.Message)
	}
	if got, want := slotsOf(a.status.Zones[1].SlotTable), "b-0:Serving b-2:Serving"; got != want {
		t.Errorf("zone b's slots %q, want %q", got, want)
	}
	if len(a.status.Handoffs) != 1 {
		t.Fatalf("hand-offs %+v, want b-1's alone", a.status.Handoffs)
	}
	h := a.status.Handoffs[0]
	to, ip, _ := h.Successor()
	if h.Pod != "b-1" || h.Zone != "b" || h.Reason != v1alpha1.HandoffReplaced || to != "b-2" || ip != "10.2.0.9" {
		t.Errorf("hand-off %+v, want b-1 Replaced in zone b, to b-2 at 10.2.0.9", h)
	}
	if _, ok := findChildNamed(a, "Deployment", testName+"-agent"); !ok {
		t.Errorf("no agent Deployment to copy the items: %v", childNames(a))
	}
	// The next sync carries the entry forward, in its zone.
	f.zones, f.conditions = a.status.Zones, a.status.Conditions
	again := f.withHandoffs(a.status.Handoffs).run(t, fixedNow.Add(2*time.Minute))
	if !cmp.Equal(again.status.Handoffs, a.status.Handoffs) {
		t.Errorf("the next sync changed the hand-offs:\n%s", cmp.Diff(a.status.Handoffs, again.status.Handoffs))
	}
}

// refills are a status's Refill hand-offs as "source slot->filled@zone".
func refills(hs []v1alpha1.Handoff) []string {
	var out []string
	for _, h := range hs {
		if s, to, _, ok := h.Refilled(); ok {
			r := fmt.Sprintf("%s %d->%s@%s", h.Pod, s, to, h.Zone)
			if h.Flush {
				r += " flush"
			}
			out = append(out, r)
		}
	}
	return out
}

// TestZonesRefill: a slot taken with nothing handed over is filled from
// the same slot of another zone, once, and only then.
func TestZonesRefill(t *testing.T) {
	zones := []string{"a", "b", "c"}
	newPod := func(name, zone, ip string) pod {
		return pod{name: name, labels: memcached.ZoneSelectorLabels(testName, zone), ready: true, ip: ip}
	}
	tests := []struct {
		name   string
		spec   string
		change func(f *fixture)
		want   []string
	}{{
		name:   "nothing changed",
		change: func(*fixture) {},
	}, {
		name: "a Pod lost without grace, its replacement Ready: filled from zone a",
		change: func(f *fixture) {
			f.pods = slices.DeleteFunc(f.pods, func(p pod) bool { return p.name == "b-1" })
			f.pods = append(f.pods, newPod("b-2", "b", "10.2.0.9"))
		},
		want: []string{"a-1 1->b-2@b"},
	}, {
		name: "the same slot lost in two zones: one source a Pod, the other starts cold",
		change: func(f *fixture) {
			f.pods = slices.DeleteFunc(f.pods, func(p pod) bool { return p.name == "a-1" || p.name == "b-1" })
			f.pods = append(f.pods, newPod("a-2", "a", "10.1.0.9"), newPod("b-2", "b", "10.2.0.9"))
		},
		want: []string{"c-1 1->a-2@a"},
	}, {
		name: "a zone added: each of its slots filled from the first zone that has it",
		spec: `{"size":2,"zones":{"names":["a","b","c","d"]}}`,
		change: func(f *fixture) {
			f.pods = append(f.pods, newPod("d-0", "d", "10.4.0.1"), newPod("d-1", "d", "10.4.0.2"))
			f.zoneDeployments["d"] = convergedDeploy(2)
		},
		want: []string{"a-0 0->d-0@d", "a-1 1->d-1@d"},
	}, {
		name: "a Pod back in its slot after it was not Ready: filled, and emptied first",
		change: func(f *fixture) {
			// The sync that saw it not Ready.
			for i := range f.pods {
				if f.pods[i].name == "b-1" {
					f.pods[i].ready = false
				}
			}
			g := *f
			a := g.run(t, fixedNow.Add(30*time.Second))
			f.zones, f.conditions = a.status.Zones, a.status.Conditions
			for i := range f.pods {
				if f.pods[i].name == "b-1" {
					f.pods[i].ready = true
				}
			}
		},
		want: []string{"a-1 1->b-1@b flush"},
	}, {
		name: "a scale-up adds slots in every zone: no zone has their keys",
		spec: `{"size":3,"zones":{"names":["a","b","c"]}}`,
		change: func(f *fixture) {
			f.pods = append(f.pods, newPod("a-2", "a", "10.1.0.9"), newPod("b-2", "b", "10.2.0.9"), newPod("c-2", "c", "10.3.0.9"))
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := zonedFixture(zonesSpec, zones, 2, nil)
			first := f.run(t, fixedNow)
			if got := refills(first.status.Handoffs); got != nil {
				t.Fatalf("a Memcached made fills %v, want nothing: no zone has keys yet", got)
			}
			f.zones, f.conditions = first.status.Zones, first.status.Conditions
			if tt.spec != "" {
				f.spec = tt.spec
			}
			tt.change(&f)
			a := f.run(t, fixedNow.Add(time.Minute))
			if got := refills(a.status.Handoffs); !slices.Equal(got, tt.want) {
				t.Errorf("refills %q, want %q", got, tt.want)
			}
		})
	}
}

// TestZonesRefillDown: the slot a Refill fills is Filling, with no Pod
// to serve it, so that its zone's pool has it down (the proxies read its
// keys from another zone rather than the empty Pod), until the agent
// reports the copy copied, or the bound after the Pod turned Ready
// passed; with keepWarm or without (zones refill either way).
func TestZonesRefillDown(t *testing.T) {
	for name, spec := range map[string]string{
		"zones":          zonesSpec,
		"zones,keepWarm": `{"size":2,"zones":{"names":["a","b","c"]},"rollout":{"keepWarm":true}}`,
	} {
		t.Run(name, func(t *testing.T) { refillDown(t, spec) })
	}
}

// refillDown is TestZonesRefillDown for one spec.
func refillDown(t *testing.T, spec string) {
	t.Helper()
	zones := []string{"a", "b", "c"}
	took := fixedNow.Add(time.Minute)
	f := zonedFixture(spec, zones, 2, nil)
	first := f.run(t, fixedNow)
	f.zones, f.conditions = first.status.Zones, first.status.Conditions
	f.pods = slices.DeleteFunc(f.pods, func(p pod) bool { return p.name == "b-1" })
	f.pods = append(f.pods, pod{name: "b-2", labels: memcached.ZoneSelectorLabels(testName, "b"), ready: true, readyAt: took.Add(-5 * time.Second), ip: "10.2.0.9"})
	// checkDown checks zone b's slot 1, b-2's, in a status and its pool.
	checkDown := func(t *testing.T, st v1alpha1.MemcachedStatus, want bool) {
		t.Helper()
		var slot v1alpha1.Slot
		for _, z := range st.Zones {
			if z.Name == "b" {
				slot = z.SlotTable.Slots[1]
			}
		}
		if down := slot.State == v1alpha1.SlotFilling; down != want || slot.Pod != "b-2" || slot.From != "" {
			t.Errorf("zone b's slot 1 is %+v, want b-2 Filling (down) %t, from no Pod", slot, want)
		}
		pool, err := contract.RenderPool(st.Zones)
		if err != nil {
			t.Fatal(err)
		}
		if down := strings.Contains(string(pool.Content), contract.ZoneDownLabel("b", 1)); down != want {
			t.Errorf("the pool has zone b's slot 1 down %t, want %t:\n%s", down, want, pool.Content)
		}
	}
	a := f.run(t, took)
	if r := refills(a.status.Handoffs); !slices.Equal(r, []string{"a-1 1->b-2@b"}) {
		t.Fatalf("refills %q, want b-2 filled from a-1", r)
	}
	checkDown(t, a.status, true)
	h := a.status.Handoffs[0]
	f.zones, f.conditions, f.handoffs = a.status.Zones, a.status.Conditions, a.status.Handoffs
	report := func(state v1alpha1.HandoffState) []any {
		return []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": testName + "-agent", "namespace": testNamespace},
			"data":     map[string]string{contract.ReportKey(h): fmt.Sprintf(`{"state":%q,"items":5}`, state)}}}
	}
	later := took.Add(10 * time.Second)
	for _, tt := range []struct {
		name     string
		children []any
		at       time.Time
		wantDown bool
	}{
		{name: "nothing reported", at: later, wantDown: true},
		{name: "copying", children: report(v1alpha1.HandoffCopying), at: later, wantDown: true},
		{name: "copied", children: report(v1alpha1.HandoffCopied), at: later},
		{name: "done", children: report(v1alpha1.HandoffDone), at: later},
		{name: "failed", children: report(v1alpha1.HandoffFailed), at: later},
		{name: "the bound passed", children: report(v1alpha1.HandoffCopying), at: took.Add(time.Hour)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := f
			g.children = tt.children
			checkDown(t, g.run(t, tt.at).status, tt.wantDown)
		})
	}
}

// TestZonesRefillCarried: a refill is carried forward, with the agent's
// progress, until the agent reports it ended, or the filled Pod stops
// serving its slot.
func TestZonesRefillCarried(t *testing.T) {
	zones := []string{"a", "b", "c"}
	f := zonedFixture(zonesSpec, zones, 2, nil)
	first := f.run(t, fixedNow)
	f.zones, f.conditions = first.status.Zones, first.status.Conditions
	f.pods = slices.DeleteFunc(f.pods, func(p pod) bool { return p.name == "b-1" })
	f.pods = append(f.pods, pod{name: "b-2", labels: memcached.ZoneSelectorLabels(testName, "b"), ready: true, ip: "10.2.0.9"})
	a := f.run(t, fixedNow.Add(time.Minute))
	if len(a.status.Handoffs) != 1 {
		t.Fatalf("hand-offs %+v, want one refill", a.status.Handoffs)
	}
	h := a.status.Handoffs[0]
	f.zones, f.conditions, f.handoffs = a.status.Zones, a.status.Conditions, a.status.Handoffs
	report := func(state v1alpha1.HandoffState) any {
		return map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": testName + "-agent", "namespace": testNamespace},
			"data":     map[string]string{contract.ReportKey(h): fmt.Sprintf(`{"state":%q,"items":5}`, state)}}
	}
	tests := []struct {
		name     string
		children []any
		change   func(f *fixture)
		want     []string
		wantProg v1alpha1.HandoffState
	}{
		{name: "nothing reported: carried", want: []string{"a-1 1->b-2@b"}},
		{name: "copying: carried with its progress", children: []any{report(v1alpha1.HandoffCopying)}, want: []string{"a-1 1->b-2@b"}, wantProg: v1alpha1.HandoffCopying},
		{name: "copied: carried, while the agent waits for clients to move", children: []any{report(v1alpha1.HandoffCopied)}, want: []string{"a-1 1->b-2@b"}, wantProg: v1alpha1.HandoffCopied},
		{name: "done: ends", children: []any{report(v1alpha1.HandoffDone)}},
		{name: "failed: ends", children: []any{report(v1alpha1.HandoffFailed)}},
		{name: "the filled Pod lost: ends", change: func(f *fixture) {
			f.pods = slices.DeleteFunc(f.pods, func(p pod) bool { return p.name == "b-2" })
		}},
		{name: "the source lost: ends", change: func(f *fixture) {
			f.pods = slices.DeleteFunc(f.pods, func(p pod) bool { return p.name == "a-1" })
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := f
			g.pods = slices.Clone(f.pods)
			g.children = tt.children
			if tt.change != nil {
				tt.change(&g)
			}
			got := g.run(t, fixedNow.Add(2*time.Minute)).status.Handoffs
			if r := refills(got); !slices.Equal(r, tt.want) {
				t.Fatalf("refills %q, want %q", r, tt.want)
			}
			if tt.wantProg != "" && (got[0].Progress == nil || got[0].Progress.State != tt.wantProg || got[0].Progress.Items != 5) {
				t.Errorf("progress %+v, want %s with 5 items", got[0].Progress, tt.wantProg)
			}
		})
	}
}
