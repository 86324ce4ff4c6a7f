package memcached_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/memcached"
)

// namesKinds are the kinds a CompositeController with stable names
// manages.
var namesKinds = []string{memcached.DeploymentKey, memcached.ServiceKey, memcached.PDBKey, memcached.NetworkPolicyKey, memcached.EndpointSliceKey}

// endpointsOf is an EndpointSlice's endpoints as "hostname=address
// ready/serving/terminating pod" words, in order.
func endpointsOf(s discoveryv1.EndpointSlice) []string {
	var out []string
	flag := func(b *bool) string {
		switch {
		case b == nil:
			return "-"
		case *b:
			return "1"
		}
		return "0"
	}
	for _, e := range s.Endpoints {
		pod := "-"
		if e.TargetRef != nil {
			pod = e.TargetRef.Kind + "/" + e.TargetRef.Namespace + "/" + e.TargetRef.Name
		}
		out = append(out, *e.Hostname+"="+e.Addresses[0]+" "+flag(e.Conditions.Ready)+flag(e.Conditions.Serving)+flag(e.Conditions.Terminating)+" "+pod)
	}
	return out
}

func slotTableOf(slots ...v1alpha1.Slot) *v1alpha1.SlotTable {
	for i := range slots {
		slots[i].Slot = int32(i)
	}
	return &v1alpha1.SlotTable{Version: 5, Slots: slots}
}

func TestStableNames(t *testing.T) {
	spec := `{"size":3,"stableNames":{"enabled":true}}`
	three := []pod{{name: "m-a", ready: true, ip: "10.0.0.1"}, {name: "m-b", ready: true, ip: "10.0.0.2"}, {name: "m-c", ready: true, ip: "10.0.0.3"}}
	serving := slotTableOf(
		v1alpha1.Slot{Pod: "m-a", IP: "10.0.0.1", State: v1alpha1.SlotServing},
		v1alpha1.Slot{Pod: "m-b", IP: "10.0.0.2", State: v1alpha1.SlotServing},
		v1alpha1.Slot{Pod: "m-c", IP: "10.0.0.3", State: v1alpha1.SlotServing})
	// What Metacontroller observes once it applied the first answer.
	observed := func(t *testing.T, f fixture) []any {
		t.Helper()
		a := f.run(t, fixedNow)
		var out []any
		for _, k := range []string{memcached.ServiceKey, memcached.EndpointSliceKey} {
			for _, c := range a.children {
				if childKey(c) == k && slices.Contains([]string{testName + "-slots"}, c["metadata"].(map[string]any)["name"].(string)) {
					out = append(out, c)
				}
			}
		}
		return out
	}
	firstSync := fixture{spec: spec, kinds: namesKinds, deployment: convergedDeploy(3), pods: three, slotTable: serving}
	tests := []struct {
		name          string
		f             fixture
		wantEndpoints map[string][]string // by EndpointSlice name; nil: no slot children
		wantAddresses []string
		wantDegraded  memcached.Reason
	}{{
		name: "first sync: the Service and the slots, no addresses before they are observed",
		f:    firstSync,
		wantEndpoints: map[string][]string{testName + "-slots": {
			"cache-a-0=10.0.0.1 110 Pod/cache/m-a", "cache-a-1=10.0.0.2 110 Pod/cache/m-b", "cache-a-2=10.0.0.3 110 Pod/cache/m-c"}},
		wantDegraded: memcached.ReasonAsExpected,
	}, {
		name: "observed: the status gives the slots' addresses in slot order",
		f:    fixture{spec: spec, kinds: namesKinds, deployment: convergedDeploy(3), pods: three, slotTable: serving, children: observed(t, firstSync)},
		wantEndpoints: map[string][]string{testName + "-slots": {
			"cache-a-0=10.0.0.1 110 Pod/cache/m-a", "cache-a-1=10.0.0.2 110 Pod/cache/m-b", "cache-a-2=10.0.0.3 110 Pod/cache/m-c"}},
		wantAddresses: []string{"cache-a-0.cache-a-slots.cache.svc:11211", "cache-a-1.cache-a-slots.cache.svc:11211", "cache-a-2.cache-a-slots.cache.svc:11211"},
		wantDegraded:  memcached.ReasonAsExpected,
	}, {
		// The name stays, at the address it had, not ready: clients that
		// hash on names miss on that slot alone instead of moving keys.
		name: "a Pod lost: its slot keeps its name at its last address",
		f: fixture{spec: spec, kinds: namesKinds, deployment: convergedDeploy(3), pods: []pod{three[0], three[2]}, slotTable: serving,
			children: observed(t, firstSync)},
		wantEndpoints: map[string][]string{testName + "-slots": {
			"cache-a-0=10.0.0.1 110 Pod/cache/m-a", "cache-a-1=10.0.0.2 100 -", "cache-a-2=10.0.0.3 110 Pod/cache/m-c"}},
		wantAddresses: []string{"cache-a-0.cache-a-slots.cache.svc:11211", "cache-a-1.cache-a-slots.cache.svc:11211", "cache-a-2.cache-a-slots.cache.svc:11211"},
		wantDegraded:  memcached.ReasonAsExpected,
	}, {
		name: "a lost Pod's slot with no name observed before has none",
		f:    fixture{spec: spec, kinds: namesKinds, deployment: convergedDeploy(3), pods: []pod{three[0], three[2]}, slotTable: serving},
		wantEndpoints: map[string][]string{testName + "-slots": {
			"cache-a-0=10.0.0.1 110 Pod/cache/m-a", "cache-a-2=10.0.0.3 110 Pod/cache/m-c"}},
		wantDegraded: memcached.ReasonAsExpected,
	}, {
		name: "a leaving and a not-ready Pod keep their names (published ready); the leaving one still serves",
		f: fixture{spec: spec, kinds: namesKinds, deployment: convergedDeploy(3), slotTable: serving,
			pods: []pod{three[0], {name: "m-b", deleting: true, ready: true, ip: "10.0.0.2"}, {name: "m-c", ip: "10.0.0.3"}}},
		wantEndpoints: map[string][]string{testName + "-slots": {
			"cache-a-0=10.0.0.1 110 Pod/cache/m-a", "cache-a-1=10.0.0.2 111 Pod/cache/m-b", "cache-a-2=10.0.0.3 100 Pod/cache/m-c"}},
		wantDegraded: memcached.ReasonAsExpected,
	}, {
		name: "IPv6 Pods: a slice of their own, and an empty IPv4 one",
		f: fixture{spec: `{"size":1,"stableNames":{"enabled":true}}`, kinds: namesKinds, deployment: convergedDeploy(1),
			pods: []pod{{name: "m-a", ready: true, ip: "fd00::1"}}, slotTable: slotTableOf(v1alpha1.Slot{Pod: "m-a", IP: "fd00::1", State: v1alpha1.SlotServing})},
		wantEndpoints: map[string][]string{testName + "-slots": nil, testName + "-slots-ipv6": {"cache-a-0=fd00::1 110 Pod/cache/m-a"}},
		wantDegraded:  memcached.ReasonAsExpected,
	}, {
		name: "an IPv4-mapped IPv6 address is written as the IPv4 address it is",
		f: fixture{spec: `{"size":1,"stableNames":{"enabled":true}}`, kinds: namesKinds, deployment: convergedDeploy(1),
			pods: []pod{{name: "m-a", ready: true, ip: "::ffff:10.0.0.9"}}, slotTable: slotTableOf(v1alpha1.Slot{Pod: "m-a", IP: "::ffff:10.0.0.9", State: v1alpha1.SlotServing})},
		wantEndpoints: map[string][]string{testName + "-slots": {"cache-a-0=10.0.0.9 110 Pod/cache/m-a"}},
		wantDegraded:  memcached.ReasonAsExpected,
	}, {
		name:         "a CompositeController without EndpointSlices: no slot children, Degraded names the kind",
		f:            fixture{spec: spec, deployment: convergedDeploy(3), pods: three, slotTable: serving},
		wantDegraded: memcached.ReasonChildKindNotManaged,
	}, {
		name:         "off by default",
		f:            fixture{spec: `{"size":3}`, kinds: namesKinds, deployment: convergedDeploy(3), pods: three, slotTable: serving, children: observed(t, firstSync)},
		wantDegraded: memcached.ReasonAsExpected,
	}, {
		name: "an invalid spec keeps the addresses the status gave",
		f: fixture{spec: `{"size":-1,"stableNames":{"enabled":true}}`, kinds: namesKinds, deployment: convergedDeploy(3), pods: three,
			slotTable: serving, children: observed(t, firstSync), statusAddresses: []string{"kept:11211"}},
		wantAddresses: []string{"kept:11211"},
		wantDegraded:  memcached.ReasonInvalidSpec,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := tt.f.run(t, fixedNow)
			if c := a.condition(t, "Degraded"); c.Reason != string(tt.wantDegraded) {
				t.Errorf("Degraded = %s (%s), want %s", c.Reason, c.Message, tt.wantDegraded)
			}
			if got := a.status.SlotAddresses; !slices.Equal(got, tt.wantAddresses) {
				t.Errorf("slotAddresses = %q, want %q", got, tt.wantAddresses)
			}
			if tt.wantDegraded == memcached.ReasonInvalidSpec {
				return // the children are kept as observed
			}
			var svc *corev1.Service
			gotEndpoints := map[string][]string{}
			for _, c := range a.children {
				name := c["metadata"].(map[string]any)["name"].(string)
				switch childKey(c) {
				case memcached.ServiceKey:
					if name == testName+"-slots" {
						svc = &corev1.Service{}
						a.decodeChild(t, c, svc)
					}
				case memcached.EndpointSliceKey:
					var s discoveryv1.EndpointSlice
					a.decodeChild(t, c, &s)
					gotEndpoints[name] = endpointsOf(s)
					checkSlice(t, s)
					// An empty list is left out: the API server gives
					// it back as null, and Metacontroller would update
					// a [] on every sync.
					if _, ok := c["endpoints"]; ok && len(s.Endpoints) == 0 {
						t.Errorf("%s: endpoints answered empty, want the key left out", name)
					}
				}
			}
			if tt.wantEndpoints == nil {
				if svc != nil || len(gotEndpoints) > 0 {
					t.Fatalf("slot children in the answer: %v", a.childKeys())
				}
				return
			}
			if diff := cmp.Diff(gotEndpoints, tt.wantEndpoints); diff != "" {
				t.Errorf("endpoints (-got +want):\n%s", diff)
			}
			if svc == nil {
				t.Fatalf("no Service %s-slots in the answer: %v", testName, a.childKeys())
			}
			if svc.Spec.Selector != nil || svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses ||
				len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "memcached" || svc.Spec.Ports[0].Port != 11211 {
				t.Errorf("Service spec = %+v, want headless, no selector, publishNotReadyAddresses, port memcached 11211", svc.Spec)
			}
		})
	}
}

// checkSlice checks what keeps an EndpointSlice the DNS's and ours alone:
// the Service it belongs to, a manager that is not the EndpointSlice
// controller, and the port the SRV record is named after.
func checkSlice(t *testing.T, s discoveryv1.EndpointSlice) {
	t.Helper()
	if got := s.Labels[discoveryv1.LabelServiceName]; got != testName+"-slots" {
		t.Errorf("%s: %s = %q, want %s-slots", s.Name, discoveryv1.LabelServiceName, got, testName)
	}
	if got := s.Labels[discoveryv1.LabelManagedBy]; got == "" || got == "endpointslice-controller.k8s.io" || got == "endpointslicemirroring-controller.k8s.io" {
		t.Errorf("%s: %s = %q, want the operator's", s.Name, discoveryv1.LabelManagedBy, got)
	}
	if len(s.Ports) != 1 || *s.Ports[0].Name != "memcached" || *s.Ports[0].Port != 11211 {
		t.Errorf("%s: ports %+v, want memcached 11211", s.Name, s.Ports)
	}
}

// TestClientMoveSeconds checks where the wait for clients to move lands:
// the agent's --handoff-settle and the memcached Pods' grace period, only
// when the spec or stable names set it.
func TestClientMoveSeconds(t *testing.T) {
	tests := []struct {
		name       string
		spec       string
		wantSettle string // "" means no flag: the agent's default
		wantGrace  int64
	}{
		{"keepWarm alone: the agent's default, the templates as before", `{"rollout":{"keepWarm":true}}`, "", 10 + 30 + 2 + 5},
		{"stable names: dskit's period, the DNS TTL and a margin", `{"stableNames":{"enabled":true},"rollout":{"keepWarm":true}}`, "--handoff-settle=40s", 10 + 30 + 2 + 40 + 5},
		{"the spec's", `{"stableNames":{"enabled":true},"rollout":{"keepWarm":true,"clientMoveSeconds":12}}`, "--handoff-settle=12s", 10 + 30 + 2 + 12 + 5},
		{"the spec's, without stable names", `{"rollout":{"keepWarm":true,"clientMoveSeconds":0}}`, "--handoff-settle=0s", 10 + 30 + 2 + 0 + 5},
	}
	kinds := append(slices.Clone(namesKinds), memcached.ServiceAccountKey, memcached.RoleKey, memcached.RoleBindingKey, memcached.ConfigMapKey)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := fixture{spec: tt.spec, kinds: kinds}.run(t, fixedNow)
			if got := a.deployment(t).Spec.Template.Spec.TerminationGracePeriodSeconds; got == nil || *got != tt.wantGrace {
				t.Errorf("grace period = %v, want %d", got, tt.wantGrace)
			}
			var agent struct {
				Spec struct {
					Template corev1.PodTemplateSpec `json:"template"`
				} `json:"spec"`
			}
			c, ok := a.agentChild(t, memcached.DeploymentKey)
			if !ok {
				t.Fatalf("no agent Deployment: %v", a.childKeys())
			}
			a.decodeChild(t, c, &agent)
			var settle []string
			for _, arg := range agent.Spec.Template.Spec.Containers[0].Args {
				if len(arg) > 16 && arg[:16] == "--handoff-settle" {
					settle = append(settle, arg)
				}
			}
			want := []string{tt.wantSettle}
			if tt.wantSettle == "" {
				want = nil
			}
			if !slices.Equal(settle, want) {
				t.Errorf("agent's settle flags %q, want %q", settle, want)
			}
		})
	}
}
