package memcached_test

import (
	"maps"
	"testing"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/sync/memcached"
)

// TestProxyVersion checks status.slotTable.proxyVersion: the highest
// version of the table every live proxy has loaded, as the agents beside
// them reported in ConfigMap NAME-agent, which a copy waits for before it
// takes the proxies' clients as moved (#40, clients confirm).
func TestProxyVersion(t *testing.T) {
	kinds := []string{memcached.DeploymentKey, memcached.ServiceKey, memcached.PDBKey, memcached.NetworkPolicyKey,
		memcached.ServiceAccountKey, memcached.RoleKey, memcached.RoleBindingKey, memcached.ConfigMapKey}
	pods := readyPods("m", 2)
	table := &v1alpha1.SlotTable{Version: 700, Slots: []v1alpha1.Slot{
		{Slot: 0, Pod: "m-0", IP: "10.1.0.1", State: v1alpha1.SlotServing},
		{Slot: 1, Pod: "m-1", IP: "10.1.0.2", State: v1alpha1.SlotServing},
	}}
	proxyLabels := memcached.ProxySelectorLabels(testName)
	proxy := func(name string, ready bool) pod {
		return pod{name: name, ready: ready, ip: "10.9.0.1", labels: proxyLabels}
	}
	reports := func(data map[string]string) any {
		return map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": contract.AgentName(testName), "namespace": testNamespace},
			"data":     data}
	}
	said := func(v int64) string {
		return contract.ProxyReport{Loaded: map[string]int64{"": v}}.Encode()
	}
	const proxySpec = `{"size":2,"proxy":{"enabled":true}}`
	tests := []struct {
		name     string
		spec     string
		pods     []pod
		children []any
		want     int64
	}{{
		name: "no proxy tier: nothing to confirm",
		spec: `{"size":2}`, pods: append(pods, proxy("m-proxy-a", true)),
		children: []any{reports(map[string]string{contract.ProxyReportKey("m-proxy-a"): said(700)})},
		want:     0,
	}, {
		name: "every proxy loaded the table",
		spec: proxySpec, pods: append(pods, proxy("m-proxy-a", true), proxy("m-proxy-b", true)),
		children: []any{reports(map[string]string{contract.ProxyReportKey("m-proxy-a"): said(700), contract.ProxyReportKey("m-proxy-b"): said(700)})},
		want:     700,
	}, {
		name: "one proxy is a version behind: the lowest",
		spec: proxySpec, pods: append(pods, proxy("m-proxy-a", true), proxy("m-proxy-b", true)),
		children: []any{reports(map[string]string{contract.ProxyReportKey("m-proxy-a"): said(700), contract.ProxyReportKey("m-proxy-b"): said(650)})},
		want:     650,
	}, {
		name: "a Ready proxy that has not said: nothing confirmed",
		spec: proxySpec, pods: append(pods, proxy("m-proxy-a", true), proxy("m-proxy-b", true)),
		children: []any{reports(map[string]string{contract.ProxyReportKey("m-proxy-a"): said(700)})},
		want:     0,
	}, {
		name: "a proxy not Ready that has not said has no clients: left out",
		spec: proxySpec, pods: append(pods, proxy("m-proxy-a", true), proxy("m-proxy-b", false)),
		children: []any{reports(map[string]string{contract.ProxyReportKey("m-proxy-a"): said(700)})},
		want:     700,
	}, {
		name: "a gone proxy's report is not counted",
		spec: proxySpec, pods: append(pods, proxy("m-proxy-a", true)),
		children: []any{reports(map[string]string{contract.ProxyReportKey("m-proxy-a"): said(700), contract.ProxyReportKey("m-proxy-gone"): said(1)})},
		want:     700,
	}, {
		name: "a terminating proxy still serves its connections: waited for while it reports",
		spec: proxySpec, pods: append(pods, proxy("m-proxy-a", true), pod{name: "m-proxy-old", ready: true, deleting: true, ip: "10.9.0.2", labels: proxyLabels}),
		children: []any{reports(map[string]string{contract.ProxyReportKey("m-proxy-a"): said(700), contract.ProxyReportKey("m-proxy-old"): said(650)})},
		want:     650,
	}, {
		name: "a terminating proxy whose agent took its report out: left out",
		spec: proxySpec, pods: append(pods, proxy("m-proxy-a", true), pod{name: "m-proxy-old", ready: true, deleting: true, ip: "10.9.0.2", labels: proxyLabels}),
		children: []any{reports(map[string]string{contract.ProxyReportKey("m-proxy-a"): said(700)})},
		want:     700,
	}, {
		name: "a report from a newer status is not above the table",
		spec: proxySpec, pods: append(pods, proxy("m-proxy-a", true)),
		children: []any{reports(map[string]string{contract.ProxyReportKey("m-proxy-a"): said(900)})},
		want:     700,
	}, {
		name: "a report that does not decode is not a confirmation",
		spec: proxySpec, pods: append(pods, proxy("m-proxy-a", true)),
		children: []any{reports(map[string]string{contract.ProxyReportKey("m-proxy-a"): `{"loaded":{"":"700"}}`})},
		want:     0,
	}, {
		name: "no proxy Pod yet: nothing confirmed",
		spec: proxySpec, pods: pods,
		want: 0,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fixture{spec: tt.spec, kinds: kinds, deployment: convergedDeploy(2), pods: tt.pods, slotTable: table, children: tt.children}
			a := f.run(t, fixedNow)
			if got := a.status.SlotTable.Version; got != table.Version {
				t.Fatalf("the table's version moved to %d; the fixture wants a converged table at %d", got, table.Version)
			}
			if got := a.status.SlotTable.ProxyVersion; got != tt.want {
				t.Errorf("status.slotTable.proxyVersion = %d, want %d", got, tt.want)
			}
			if got := len(a.status.Endpoints); got != 2 {
				t.Errorf("status.endpoints has %d Pods, want the 2 memcached Pods (proxy Pods are not members)", got)
			}
		})
	}
}

// TestProxyVersionZones checks each zone's table gets what every proxy
// loaded of that zone, and that an invalid spec keeps what the status said.
func TestProxyVersionZones(t *testing.T) {
	zones := []string{"a", "b"}
	const spec = `{"size":2,"zones":{"names":["a","b"]},"proxy":{"enabled":true}}`
	first := zonedFixture(spec, zones, 2, nil).run(t, fixedNow)
	f := zonedFixture(spec, zones, 2, first.status.Zones)
	va, vb := first.status.Zones[0].SlotTable.Version, first.status.Zones[1].SlotTable.Version
	labels := memcached.ProxySelectorLabels(testName)
	f.pods = append(f.pods, pod{name: "m-proxy-a", ready: true, ip: "10.9.0.1", labels: labels}, pod{name: "m-proxy-b", ready: true, ip: "10.9.0.2", labels: labels})
	f.children = append(f.children, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": contract.AgentName(testName), "namespace": testNamespace},
		"data": map[string]string{
			contract.ProxyReportKey("m-proxy-a"): contract.ProxyReport{Loaded: map[string]int64{"a": va, "b": vb}}.Encode(),
			contract.ProxyReportKey("m-proxy-b"): contract.ProxyReport{Loaded: map[string]int64{"a": va, "b": vb - 1}}.Encode(),
		}})
	a := f.run(t, fixedNow)
	got := map[string]int64{}
	for _, z := range a.status.Zones {
		got[z.Name] = z.SlotTable.ProxyVersion
	}
	if want := map[string]int64{"a": va, "b": vb - 1}; !maps.Equal(got, want) {
		t.Fatalf("zones' proxyVersion = %v, want %v", got, want)
	}

	f.zones = a.status.Zones
	f.spec = `{"size":-1,"zones":{"names":["a","b"]},"proxy":{"enabled":true}}`
	f.children = f.children[:len(f.children)-1] // what the proxies said is gone: the status keeps its word
	invalid := f.run(t, fixedNow)
	for i, z := range invalid.status.Zones {
		if z.SlotTable.ProxyVersion != a.status.Zones[i].SlotTable.ProxyVersion {
			t.Errorf("an invalid spec changed zone %s's proxyVersion from %d to %d", z.Name, a.status.Zones[i].SlotTable.ProxyVersion, z.SlotTable.ProxyVersion)
		}
	}
}
