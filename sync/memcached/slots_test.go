package memcached_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/test/testutil"
)

// slotsOf writes a status's slot table as "pod:State" per slot.
func slotsOf(tb v1alpha1.SlotTable) string {
	var parts []string
	for _, e := range tb.Slots {
		if e.Pod == "" {
			parts = append(parts, "-:"+string(e.State))
			continue
		}
		parts = append(parts, e.Pod+":"+string(e.State))
	}
	return strings.Join(parts, " ")
}

// TestSlotTableThroughTheHook runs a Memcached of three Pods through what
// happens to it, feeding each answer's status back as the parent's, as
// Metacontroller does, and checks the table and its version at each step.
func TestSlotTableThroughTheHook(t *testing.T) {
	now := fixedNow
	pods := []pod{
		{name: "m-c", ready: true, ip: "10.0.0.3"},
		{name: "m-a", ready: true, ip: "10.0.0.1"},
		{name: "m-b", ready: true, ip: "10.0.0.2"},
	}
	var table *v1alpha1.SlotTable
	step := func(name, spec string, want string, versionRises bool) {
		t.Helper()
		now = now.Add(time.Minute)
		before := int64(0)
		if table != nil {
			before = table.Version
		}
		f := fixture{spec: spec, deployment: convergedDeploy(3), pods: pods, slotTable: table}
		got := f.run(t, now).status.SlotTable
		if s := slotsOf(got); s != want {
			t.Errorf("%s: slots %q, want %q", name, s, want)
		}
		switch {
		case versionRises && got.Version <= before:
			t.Errorf("%s: version %d, want above %d", name, got.Version, before)
		case versionRises && got.Version < now.UnixMilli():
			t.Errorf("%s: version %d, want at least the time, %d", name, got.Version, now.UnixMilli())
		case !versionRises && got.Version != before:
			t.Errorf("%s: version %d, want %d unchanged", name, got.Version, before)
		}
		// Converged: the same request, later, changes nothing.
		f.slotTable = &got
		if again := f.run(t, now.Add(time.Hour)).status.SlotTable; !cmp.Equal(again, got) {
			t.Errorf("%s: a second sync changed the table:\n%+v\n%+v", name, got, again)
		}
		table = &got
	}
	step("first sync", `{"size":3}`, "m-a:Serving m-b:Serving m-c:Serving", true)
	step("nothing changed", `{"size":3}`, "m-a:Serving m-b:Serving m-c:Serving", false)

	set := func(name string, change func(p *pod)) {
		t.Helper()
		for i := range pods {
			if pods[i].name == name {
				change(&pods[i])
				return
			}
		}
		t.Fatalf("no Pod %s", name)
	}
	set("m-b", func(p *pod) { p.ready = false })
	step("m-b not ready", `{"size":3}`, "m-a:Serving m-b:NotReady m-c:Serving", true)
	set("m-b", func(p *pod) { p.ready = true })
	step("m-b ready again, in its slot", `{"size":3}`, "m-a:Serving m-b:Serving m-c:Serving", true)

	pods = append(pods, pod{name: "m-d", ready: true, ip: "10.0.0.4"})
	step("a surge Pod waits", `{"size":3}`, "m-a:Serving m-b:Serving m-c:Serving", false)
	set("m-a", func(p *pod) { p.deleting = true })
	step("m-a terminating: m-d takes its slot", `{"size":3}`, "m-d:Serving m-b:Serving m-c:Serving", true)
	pods = slices.DeleteFunc(pods, func(p pod) bool { return p.name == "m-a" })
	step("m-a gone", `{"size":3}`, "m-d:Serving m-b:Serving m-c:Serving", false)

	pods = append(pods, pod{name: "m-e", ready: true, ip: "10.0.0.5"})
	step("scale up", `{"size":4}`, "m-d:Serving m-b:Serving m-c:Serving m-e:Serving", true)
	set("m-b", func(p *pod) { p.deleting = true })
	step("scale down, m-b leaving: m-e moves into its slot", `{"size":3}`, "m-d:Serving m-e:Serving m-c:Serving", true)

	table = nil
	step("status wiped: rebuilt by name", `{"size":3}`, "m-c:Serving m-d:Serving m-e:Serving", true)
}

// TestSlotTableWithAnInvalidSpec keeps the table following the Pods while
// the children are kept: clients still need the list.
func TestSlotTableWithAnInvalidSpec(t *testing.T) {
	prev := &v1alpha1.SlotTable{Version: 7, Slots: []v1alpha1.Slot{
		{Slot: 0, Pod: "m-a", IP: "10.0.0.1", State: v1alpha1.SlotServing},
		{Slot: 1, Pod: "m-b", IP: "10.0.0.2", State: v1alpha1.SlotServing},
	}}
	got := fixture{
		spec:       `{"size":-1}`,
		deployment: convergedDeploy(2),
		pods:       []pod{{name: "m-a", ready: true, ip: "10.0.0.1"}, {name: "m-b", deleting: true, ip: "10.0.0.2"}, {name: "m-c", ready: true, ip: "10.0.0.3"}},
		slotTable:  prev,
	}.run(t, fixedNow)
	if c := got.condition(t, "Degraded"); c.Reason != string(memcached.ReasonInvalidSpec) {
		t.Fatalf("Degraded = %s, want InvalidSpec", c.Reason)
	}
	if s := slotsOf(got.status.SlotTable); s != "m-a:Serving m-c:Serving" {
		t.Errorf("slots %q, want m-c in m-b's slot", s)
	}
	if got.status.SlotTable.Version <= prev.Version {
		t.Errorf("version %d, want above %d", got.status.SlotTable.Version, prev.Version)
	}
}

func TestDiscovery(t *testing.T) {
	spec := `{"size":2,"discovery":{"enabled":true}}`
	allKinds := []string{memcached.DeploymentKey, memcached.ServiceKey, memcached.PDBKey, memcached.NetworkPolicyKey,
		memcached.ServiceAccountKey, memcached.RoleKey, memcached.RoleBindingKey}
	discoveryService := map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": testName + "-discovery", "namespace": testNamespace},
	}
	tests := []struct {
		name         string
		f            fixture
		wantAgent    bool
		wantEndpoint string
		wantDegraded memcached.Reason
	}{{
		name:         "first sync: the agent's children, no endpoint before its Service exists",
		f:            fixture{spec: spec, kinds: allKinds},
		wantAgent:    true,
		wantDegraded: memcached.ReasonAsExpected,
	}, {
		name:         "the Service observed: status names the endpoint",
		f:            fixture{spec: spec, kinds: allKinds, children: []any{discoveryService}},
		wantAgent:    true,
		wantEndpoint: testName + "-discovery." + testNamespace + ".svc:11211",
		wantDegraded: memcached.ReasonAsExpected,
	}, {
		name:         "off by default",
		f:            fixture{spec: `{"size":2}`, kinds: allKinds},
		wantDegraded: memcached.ReasonAsExpected,
	}, {
		name:         "a CompositeController without the agent's kinds",
		f:            fixture{spec: spec},
		wantDegraded: memcached.ReasonChildKindNotManaged,
	}, {
		name:         "a hook without --agent-image",
		f:            fixture{spec: spec, kinds: allKinds, options: &memcached.Options{}},
		wantDegraded: memcached.ReasonAgentImageUnset,
	}, {
		name:         "an invalid spec keeps the endpoint the status named",
		f:            fixture{spec: `{"size":-1,"discovery":{"enabled":true}}`, kinds: allKinds, conditions: nil, children: []any{discoveryService}},
		wantDegraded: memcached.ReasonInvalidSpec,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := tt.f.run(t, fixedNow)
			_, gotAgent := a.agentChild(t, memcached.DeploymentKey)
			if gotAgent != tt.wantAgent {
				t.Errorf("agent Deployment in the answer: %v, want %v (children %v)", gotAgent, tt.wantAgent, a.childKeys())
			}
			if tt.wantAgent {
				for _, k := range []string{memcached.ServiceAccountKey, memcached.RoleKey, memcached.RoleBindingKey, memcached.ServiceKey, memcached.PDBKey, memcached.NetworkPolicyKey} {
					if _, ok := a.agentChild(t, k); !ok {
						t.Errorf("no agent %s in the answer", k)
					}
				}
			}
			if got := a.status.ConfigurationEndpoint; got != tt.wantEndpoint {
				t.Errorf("configurationEndpoint = %q, want %q", got, tt.wantEndpoint)
			}
			if c := a.condition(t, "Degraded"); c.Reason != string(tt.wantDegraded) {
				t.Errorf("Degraded = %s (%s), want %s", c.Reason, c.Message, tt.wantDegraded)
			}
		})
	}
}

// TestAgentRole checks the one permission the agent gets: reading its own
// Memcached.
func TestAgentRole(t *testing.T) {
	a := fixture{spec: `{"discovery":{"enabled":true}}`, kinds: []string{memcached.DeploymentKey, memcached.ServiceKey, memcached.PDBKey,
		memcached.NetworkPolicyKey, memcached.ServiceAccountKey, memcached.RoleKey, memcached.RoleBindingKey}}.run(t, fixedNow)
	role, ok := a.agentChild(t, memcached.RoleKey)
	if !ok {
		t.Fatal("no Role")
	}
	got := fmt.Sprint(role["rules"])
	want := fmt.Sprintf("[map[apiGroups:[cache.example.com] resourceNames:[%s] resources:[memcacheds] verbs:[get list watch]]]", testName)
	if got != want {
		t.Errorf("rules = %s, want %s", got, want)
	}
}

// TestHandoffsThroughTheHook checks what a keepWarm Memcached's status says
// of a leaving Pod, from the table the status held, that the agent's
// report in its ConfigMap reaches the status, and that the slot m-c took
// is Filling (m-b served) until that report says the copy to m-c ended.
func TestHandoffsThroughTheHook(t *testing.T) {
	kinds := []string{memcached.DeploymentKey, memcached.ServiceKey, memcached.PDBKey, memcached.NetworkPolicyKey,
		memcached.ServiceAccountKey, memcached.RoleKey, memcached.RoleBindingKey, memcached.ConfigMapKey}
	prev := &v1alpha1.SlotTable{Version: 7, Slots: []v1alpha1.Slot{
		{Slot: 0, Pod: "m-a", IP: "10.0.0.1", State: v1alpha1.SlotServing},
		{Slot: 1, Pod: "m-b", IP: "10.0.0.2", State: v1alpha1.SlotServing},
	}}
	pods := []pod{{name: "m-a", ready: true, ip: "10.0.0.1"}, {name: "m-b", ready: true, deleting: true, deletedAgo: 5 * time.Second, ip: "10.0.0.2"}, {name: "m-c", ready: true, ip: "10.0.0.3"}}
	report := map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": testName + "-agent", "namespace": testNamespace},
		"data": map[string]string{
			"m-b":   `{"state":"Copying","items":1200,"bytes":1228800,"seconds":1}`,
			"other": `not json`,
		},
	}
	reported := func(progress string) map[string]any {
		r := maps.Clone(report)
		r["data"] = map[string]string{"m-b": progress}
		return r
	}
	tests := []struct {
		name     string
		f        fixture
		want     string
		wantSlot string
	}{{
		name:     "keepWarm: m-c takes m-b's slot, the agent reports the copy",
		f:        fixture{spec: `{"size":2,"rollout":{"keepWarm":true}}`, kinds: kinds, deployment: convergedDeploy(2), pods: pods, slotTable: prev, children: []any{report}},
		want:     "m-b:Replaced>m-c@1[Copying 1200 items 1228800 bytes]",
		wantSlot: "m-c Filling from m-b, served 10.0.0.2",
	}, {
		name:     "keepWarm, nothing reported yet",
		f:        fixture{spec: `{"size":2,"rollout":{"keepWarm":true}}`, kinds: kinds, deployment: convergedDeploy(2), pods: pods, slotTable: prev},
		want:     "m-b:Replaced>m-c@1",
		wantSlot: "m-c Filling from m-b, served 10.0.0.2",
	}, {
		name: "keepWarm, the copy to m-c is done: m-c serves",
		f: fixture{spec: `{"size":2,"rollout":{"keepWarm":true}}`, kinds: kinds, deployment: convergedDeploy(2), pods: pods, slotTable: prev,
			children: []any{reported(`{"state":"Done","items":1300,"bytes":1331200,"seconds":1,"to":"m-c"}`)}},
		want:     "m-b:Replaced>m-c@1[Done 1300 items 1331200 bytes]",
		wantSlot: "m-c Serving from , served 10.0.0.3",
	}, {
		name: "keepWarm, a copy to another Pod is done: m-c is still filled",
		f: fixture{spec: `{"size":2,"rollout":{"keepWarm":true}}`, kinds: kinds, deployment: convergedDeploy(2), pods: pods, slotTable: prev,
			children: []any{reported(`{"state":"Done","items":1300,"bytes":1331200,"seconds":1,"to":"m-x"}`)}},
		want:     "m-b:Replaced>m-c@1[Done 1300 items 1331200 bytes]",
		wantSlot: "m-c Filling from m-b, served 10.0.0.2",
	}, {
		// m-b was deleted a minute ago: past 10 + 32 - 2 - 2 s.
		name: "keepWarm, past the bound: m-c serves with what it has",
		f: fixture{spec: `{"size":2,"rollout":{"keepWarm":true}}`, kinds: kinds, deployment: convergedDeploy(2), slotTable: prev,
			pods: []pod{pods[0], {name: "m-b", ready: true, deleting: true, ip: "10.0.0.2"}, pods[2]}},
		want:     "m-b:Replaced>m-c@1",
		wantSlot: "m-c Serving from , served 10.0.0.3",
	}, {
		// 36 s after m-b's deletion: within 10 + 32 - 2 - 2 s.
		name: "keepWarm, 36 s after the deletion: m-c is still filled",
		f: fixture{spec: `{"size":2,"rollout":{"keepWarm":true}}`, kinds: kinds, deployment: convergedDeploy(2), slotTable: prev,
			pods: []pod{pods[0], {name: "m-b", ready: true, deleting: true, deletedAgo: 36 * time.Second, ip: "10.0.0.2"}, pods[2]}},
		want:     "m-b:Replaced>m-c@1",
		wantSlot: "m-c Filling from m-b, served 10.0.0.2",
	}, {
		// With the proxy tier the bound leaves the proxies' confirmation
		// (contract.ProxyConfirm, 6 s) before the preStop ends: past
		// 10 + 32 - 6 - 2 s.
		name: "keepWarm and the proxy, 36 s after the deletion: m-c serves with what it has",
		f: fixture{spec: `{"size":2,"rollout":{"keepWarm":true},"proxy":{"enabled":true}}`, kinds: kinds, deployment: convergedDeploy(2), slotTable: prev,
			pods: []pod{pods[0], {name: "m-b", ready: true, deleting: true, deletedAgo: 36 * time.Second, ip: "10.0.0.2"}, pods[2]}},
		want:     "m-b:Replaced>m-c@1",
		wantSlot: "m-c Serving from , served 10.0.0.3",
	}, {
		name:     "without keepWarm, no hand-off: m-c serves at once",
		f:        fixture{spec: `{"size":2}`, kinds: kinds, deployment: convergedDeploy(2), pods: pods, slotTable: prev, children: []any{report}},
		want:     "",
		wantSlot: "m-c Serving from , served 10.0.0.3",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := tt.f.run(t, fixedNow)
			var parts []string
			for _, h := range a.status.Handoffs {
				s := fmt.Sprintf("%s:%s>%s@%d", h.Pod, h.Reason, h.To, *h.Slot)
				if p := h.Progress; p != nil {
					s += fmt.Sprintf("[%s %d items %d bytes]", p.State, p.Items, p.Bytes)
				}
				parts = append(parts, s)
			}
			if got := strings.Join(parts, " "); got != tt.want {
				t.Errorf("hand-offs %q, want %q", got, tt.want)
			}
			e := a.status.SlotTable.Slots[1]
			if got := fmt.Sprintf("%s %s from %s, served %s", e.Pod, e.State, e.From, e.ServedIP()); got != tt.wantSlot {
				t.Errorf("slot 1: %s, want %s", got, tt.wantSlot)
			}
		})
	}
}

// TestKeepWarmPodTemplate checks what keepWarm changes in the memcached
// Pods: a preStop that waits for the agent's word and a grace period that
// fits it, both following maxMemoryMB or handoffSeconds.
func TestKeepWarmPodTemplate(t *testing.T) {
	tests := []struct {
		spec      string
		wantGrace int64
		wantWait  string // in the preStop script; "" means the plain sleep
	}{
		{`{}`, 30, ""},
		{`{"rollout":{"keepWarm":true}}`, 10 + 30 + 2 + 5, "+ 32 ))"},
		{`{"rollout":{"keepWarm":true},"memcached":{"maxMemoryMB":1024}}`, 10 + 30 + 21 + 5, "+ 51 ))"},
		{`{"rollout":{"keepWarm":true,"handoffSeconds":600}}`, 10 + 600 + 5, "+ 600 ))"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			a := fixture{spec: tt.spec}.run(t, fixedNow)
			d := a.deployment(t)
			if got := *d.Spec.Template.Spec.TerminationGracePeriodSeconds; got != tt.wantGrace {
				t.Errorf("grace period %d, want %d", got, tt.wantGrace)
			}
			pre := a.container(t, "memcached").Lifecycle.PreStop
			switch {
			case tt.wantWait == "" && (pre.Sleep == nil || pre.Sleep.Seconds != 10):
				t.Errorf("preStop %+v, want a 10 s sleep", pre)
			case tt.wantWait != "" && (pre.Exec == nil || !strings.Contains(pre.Exec.Command[2], tt.wantWait) || !strings.Contains(pre.Exec.Command[2], contract.DoneKey)):
				t.Errorf("preStop %+v, want a wait for %s with %q", pre, contract.DoneKey, tt.wantWait)
			}
		})
	}
}

func TestProxy(t *testing.T) {
	all := []string{memcached.DeploymentKey, memcached.ServiceKey, memcached.PDBKey, memcached.NetworkPolicyKey,
		memcached.ServiceAccountKey, memcached.RoleKey, memcached.RoleBindingKey, memcached.ConfigMapKey}
	proxyService := map[string]any{"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": testName + "-proxy", "namespace": testNamespace}}
	tests := []struct {
		name         string
		f            fixture
		wantProxy    bool
		wantAgentDep bool
		wantEndpoint string
		wantDegraded memcached.Reason
		wantEnv      map[string]string
	}{{
		name:         "defaults: the proxy tier, the agent's identity, no agent Deployment",
		f:            fixture{spec: `{"size":3,"proxy":{"enabled":true}}`, kinds: all},
		wantProxy:    true,
		wantDegraded: memcached.ReasonAsExpected,
		wantEnv: map[string]string{"MEMCACHED_PROXY_CONNECT_TIMEOUT": "1", "MEMCACHED_PROXY_READ_TIMEOUT": "1",
			"MEMCACHED_PROXY_RETRY_WAIT": "1", "MEMCACHED_PROXY_FAILURE_LIMIT": "3", "MEMCACHED_PROXY_POOL_FILE": memcached.ProxyPoolFile},
	}, {
		name:         "route settings",
		f:            fixture{spec: `{"proxy":{"enabled":true,"connectTimeout":"250ms","readTimeout":"2s","retryAfter":"2500ms","failureLimit":0}}`, kinds: all},
		wantProxy:    true,
		wantDegraded: memcached.ReasonAsExpected,
		wantEnv: map[string]string{"MEMCACHED_PROXY_CONNECT_TIMEOUT": "0.25", "MEMCACHED_PROXY_READ_TIMEOUT": "2",
			"MEMCACHED_PROXY_RETRY_WAIT": "3", "MEMCACHED_PROXY_FAILURE_LIMIT": "0"},
	}, {
		name:         "the Service observed: status names the endpoint",
		f:            fixture{spec: `{"proxy":{"enabled":true}}`, kinds: all, children: []any{proxyService}},
		wantProxy:    true,
		wantEndpoint: testName + "-proxy." + testNamespace + ".svc:11211",
		wantDegraded: memcached.ReasonAsExpected,
	}, {
		name:         "with discovery too: both",
		f:            fixture{spec: `{"proxy":{"enabled":true},"discovery":{"enabled":true}}`, kinds: all},
		wantProxy:    true,
		wantAgentDep: true,
		wantDegraded: memcached.ReasonAsExpected,
	}, {
		name:         "a CompositeController without ConfigMaps",
		f:            fixture{spec: `{"proxy":{"enabled":true}}`, kinds: all[:7]},
		wantDegraded: memcached.ReasonChildKindNotManaged,
	}, {
		name:         "a hook without --agent-image",
		f:            fixture{spec: `{"proxy":{"enabled":true}}`, kinds: all, options: &memcached.Options{}},
		wantDegraded: memcached.ReasonAgentImageUnset,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := tt.f.run(t, fixedNow)
			dep, gotProxy := a.proxyChild(t, memcached.DeploymentKey)
			if gotProxy != tt.wantProxy {
				t.Fatalf("proxy Deployment in the answer: %v, want %v (children %v)", gotProxy, tt.wantProxy, a.childKeys())
			}
			if _, got := a.agentChild(t, memcached.DeploymentKey); got != tt.wantAgentDep {
				t.Errorf("agent Deployment in the answer: %v, want %v", got, tt.wantAgentDep)
			}
			if c := a.condition(t, "Degraded"); c.Reason != string(tt.wantDegraded) {
				t.Errorf("Degraded = %s (%s), want %s", c.Reason, c.Message, tt.wantDegraded)
			}
			if got := a.status.ProxyEndpoint; got != tt.wantEndpoint {
				t.Errorf("proxyEndpoint = %q, want %q", got, tt.wantEndpoint)
			}
			if !tt.wantProxy {
				return
			}
			for _, k := range []string{memcached.ConfigMapKey, memcached.ServiceKey, memcached.PDBKey, memcached.NetworkPolicyKey} {
				if _, ok := a.proxyChild(t, k); !ok {
					t.Errorf("no proxy %s in the answer", k)
				}
			}
			for _, k := range []string{memcached.ServiceAccountKey, memcached.RoleKey, memcached.RoleBindingKey} {
				if _, ok := a.agentChild(t, k); !ok {
					t.Errorf("no agent %s in the answer: the pool writer needs it", k)
				}
			}
			cm, _ := a.proxyChild(t, memcached.ConfigMapKey)
			if got := testutil.GetString(cm, "data", "config.lua"); got != memcached.ProxyConfig {
				t.Errorf("the proxy's ConfigMap holds %d bytes of config.lua, want proxy.lua's %d", len(got), len(memcached.ProxyConfig))
			}
			var d appsv1.Deployment
			if err := json.Unmarshal(testutil.MustMarshal(t, dep), &d); err != nil {
				t.Fatal(err)
			}
			env := map[string]string{}
			var args []string
			for _, c := range d.Spec.Template.Spec.Containers {
				if c.Name == "proxy" {
					args = c.Args
					for _, e := range c.Env {
						env[e.Name] = e.Value
					}
				}
			}
			if !slices.Contains(args, "proxy_config=routelib,proxy_arg=/etc/memcached-proxy/config.lua") {
				t.Errorf("proxy args %v", args)
			}
			for k, v := range tt.wantEnv {
				if env[k] != v {
					t.Errorf("proxy env %s=%q, want %q", k, env[k], v)
				}
			}
		})
	}
}

// TestAgentChildrenStayWhileTheyCannotBeBuilt answers, after a sync that
// made the agent's and the proxy tier's children, a sync in which the hook
// cannot build them (no --agent-image, or a kind the CompositeController
// stopped managing): every observed child must be answered as it was, or
// Metacontroller would delete the proxy and the configuration endpoint
// under their clients; Degraded says why.
func TestAgentChildrenStayWhileTheyCannotBeBuilt(t *testing.T) {
	spec := `{"size":3,"discovery":{"enabled":true},"proxy":{"enabled":true},"rollout":{"keepWarm":true}}`
	body := withSpec(t, withAllKinds(t, testutil.CaptureBody(t, "v2/0040-sync.json", "sync")), spec)
	first := parseAnswer(t, callHook(t, "sync", body, fixedNow))
	if _, ok := first.proxyChild(t, memcached.DeploymentKey); !ok {
		t.Fatalf("the first answer has no proxy Deployment: %v", first.childKeys())
	}
	observed := nextRequest(t, body, first.raw)
	withoutRoles := testutil.DecodeObject(t, observed)
	delete(testutil.GetObject(withoutRoles, "children"), memcached.RoleKey)

	for _, tt := range []struct {
		name         string
		body         []byte
		opts         memcached.Options
		wantDegraded memcached.Reason
	}{
		{"a hook without --agent-image", observed, memcached.Options{}, memcached.ReasonAgentImageUnset},
		{"Roles no longer managed", testutil.MustMarshal(t, withoutRoles), hookOptions, memcached.ReasonChildKindNotManaged},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := parseAnswer(t, callHookWith(t, "sync", tt.body, fixedNow.Add(time.Hour), tt.opts))
			// Metacontroller adds controller-uid to what it applies;
			// the hook's own children come without it.
			got := withoutControllerUID(sortedChildren(t, a))
			want := withoutControllerUID(lastAppliedOf(t, tt.body))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("children changed (-observed +answered):\n%s", diff)
			}
			if c := a.condition(t, "Degraded"); c.Reason != string(tt.wantDegraded) {
				t.Errorf("Degraded = %s (%s), want %s", c.Reason, c.Message, tt.wantDegraded)
			}
		})
	}
}

// sortedChildren is an answer's children decoded, sorted as lastAppliedOf
// sorts the observed ones: by kind, then namespace/name.
func sortedChildren(t *testing.T, a syncAnswer) []any {
	t.Helper()
	type keyed struct {
		key string
		obj any
	}
	var all []keyed
	for _, c := range a.childrenRaw {
		obj := testutil.DecodeObject(t, c)
		key := childKey(obj) + " " + testutil.GetString(obj, "metadata", "namespace") + "/" + testutil.GetString(obj, "metadata", "name")
		all = append(all, keyed{key, testutil.DecodeAny(t, c)})
	}
	slices.SortFunc(all, func(x, y keyed) int { return strings.Compare(x.key, y.key) })
	out := []any{}
	for _, k := range all {
		out = append(out, k.obj)
	}
	return out
}

// withoutControllerUID removes the controller-uid label from each object.
func withoutControllerUID(objs []any) []any {
	for _, o := range objs {
		if labels, ok := testutil.Get(o.(map[string]any), "metadata", "labels"); ok {
			delete(labels.(map[string]any), "controller-uid")
		}
	}
	return objs
}
