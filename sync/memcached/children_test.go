package memcached_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/test/testutil"
)

// TestArgs checks memcached's argv: every flag and its value separate
// items, the defaults -p 11211 -m 64 -c 1024 -t 4 -I 1m, the spec's values
// in their place, verbosity as -v or -vv, and extraArgs last.
func TestArgs(t *testing.T) {
	tests := []struct {
		name      string
		memcached string
		want      []string
	}{
		{"defaults", `{}`, []string{"-p", "11211", "-m", "64", "-c", "1024", "-t", "4", "-I", "1m"}},
		{"maxItemSize 512Ki", `{"maxItemSize":"512Ki"}`, []string{"-p", "11211", "-m", "64", "-c", "1024", "-t", "4", "-I", "512k"}},
		{"maxItemSize 2Mi", `{"maxItemSize":"2Mi"}`, []string{"-p", "11211", "-m", "64", "-c", "1024", "-t", "4", "-I", "2m"}},
		{"maxItemSize 1.5Mi", `{"maxItemSize":"1.5Mi"}`, []string{"-p", "11211", "-m", "64", "-c", "1024", "-t", "4", "-I", "1536k"}},
		{"maxItemSize in bytes", `{"maxItemSize":"1572864"}`, []string{"-p", "11211", "-m", "64", "-c", "1024", "-t", "4", "-I", "1536k"}},
		{"maxItemSize the smallest", `{"maxItemSize":"512Ki"}`, []string{"-p", "11211", "-m", "64", "-c", "1024", "-t", "4", "-I", "512k"}},
		{"verbosity 0", `{"verbosity":0}`, []string{"-p", "11211", "-m", "64", "-c", "1024", "-t", "4", "-I", "1m"}},
		{"verbosity 1", `{"verbosity":1}`, []string{"-p", "11211", "-m", "64", "-c", "1024", "-t", "4", "-I", "1m", "-v"}},
		{"verbosity 2", `{"verbosity":2}`, []string{"-p", "11211", "-m", "64", "-c", "1024", "-t", "4", "-I", "1m", "-vv"}},
		{
			"every setting",
			`{"maxMemoryMB":2048,"maxConnections":10000,"threads":16,"maxItemSize":"8Mi","verbosity":1,"extraArgs":["-o","modern,idle_timeout=600","-R","40"]}`,
			[]string{"-p", "11211", "-m", "2048", "-c", "10000", "-t", "16", "-I", "8m", "-v", "-o", "modern,idle_timeout=600", "-R", "40"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := fixture{spec: `{"memcached":` + tt.memcached + `}`}.run(t, fixedNow)
			wantArgs(t, a, tt.want)
		})
	}
}

// defaultMemoryMi is the documented default memory of the memcached
// container, computed here independently: maxMemoryMB, 17 % more for the
// hash table, 24 KiB per connection, 0.15 MiB per thread and 8 MiB, each
// part rounded up to whole MiB.
func defaultMemoryMi(maxMemoryMB, maxConnections, threads int) int64 {
	hash := math.Ceil(float64(maxMemoryMB) * 0.17)
	conns := math.Ceil(float64(maxConnections) * 24 / 1024)
	thr := math.Ceil(float64(threads) * 0.15)
	return int64(maxMemoryMB) + int64(hash) + int64(conns) + int64(thr) + 8
}

// TestDefaultResources checks the memcached container's default resources
// against the rule in MemcachedResources's doc comment: memory request and
// limit equal, from maxMemoryMB and maxConnections; CPU request 100m; no CPU
// limit.
func TestDefaultResources(t *testing.T) {
	tests := []struct{ maxMemoryMB, maxConnections, threads int }{
		{64, 1024, 4},
		{100, 1000, 4},
		{2, 25, 1},
		{3, 205, 7},
		{1024, 65536, 64},
		{1 << 20, 65536, 16},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("maxMemoryMB %d maxConnections %d threads %d", tt.maxMemoryMB, tt.maxConnections, tt.threads), func(t *testing.T) {
			spec := fmt.Sprintf(`{"memcached":{"maxMemoryMB":%d,"maxConnections":%d,"threads":%d}}`, tt.maxMemoryMB, tt.maxConnections, tt.threads)
			r := fixture{spec: spec}.run(t, fixedNow).container(t, "memcached").Resources
			want := corev1.ResourceRequirements{
				Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("100m"),
					corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dMi", defaultMemoryMi(tt.maxMemoryMB, tt.maxConnections, tt.threads))),
				},
				Limits: corev1.ResourceList{
					corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dMi", defaultMemoryMi(tt.maxMemoryMB, tt.maxConnections, tt.threads))),
				},
			}
			if diff := cmp.Diff(quantities(r), quantities(want)); diff != "" {
				t.Errorf("resources (-got +want):\n%s", diff)
			}
		})
	}
}

// quantities flattens resource requirements to "requests.cpu" -> value in
// milli-units, so that equal quantities written differently compare equal.
func quantities(r corev1.ResourceRequirements) map[string]int64 {
	out := map[string]int64{}
	for name, q := range r.Requests {
		out["requests."+string(name)] = q.MilliValue()
	}
	for name, q := range r.Limits {
		out["limits."+string(name)] = q.MilliValue()
	}
	return out
}

// TestUserResources checks that the user's resources are laid over the
// defaults key by key, and that a user limit below a default request pulls
// the request down.
func TestUserResources(t *testing.T) {
	def := fmt.Sprintf("%dMi", defaultMemoryMi(64, 1024, 4))
	tests := []struct {
		name      string
		resources string
		want      map[string]string
	}{
		{
			name:      "CPU limit added",
			resources: `{"limits":{"cpu":"2"}}`,
			want:      map[string]string{"requests.cpu": "100m", "requests.memory": def, "limits.memory": def, "limits.cpu": "2"},
		},
		{
			name:      "CPU request replaced",
			resources: `{"requests":{"cpu":"500m"}}`,
			want:      map[string]string{"requests.cpu": "500m", "requests.memory": def, "limits.memory": def},
		},
		{
			name:      "memory limit raised",
			resources: `{"limits":{"memory":"1Gi"}}`,
			want:      map[string]string{"requests.cpu": "100m", "requests.memory": def, "limits.memory": "1Gi"},
		},
		{
			// The default is also the least limit a spec may set (see
			// TestInvalidSpec), so a memory limit only goes up.
			name:      "memory limit at the least allowed",
			resources: `{"limits":{"memory":"` + def + `"}}`,
			want:      map[string]string{"requests.cpu": "100m", "requests.memory": def, "limits.memory": def},
		},
		{
			name:      "CPU limit below the default request pulls it down",
			resources: `{"limits":{"cpu":"50m"}}`,
			want:      map[string]string{"requests.cpu": "50m", "requests.memory": def, "limits.memory": def, "limits.cpu": "50m"},
		},
		{
			name:      "user request kept under a raised limit",
			resources: `{"requests":{"memory":"97Mi"},"limits":{"memory":"1Gi"}}`,
			want:      map[string]string{"requests.cpu": "100m", "requests.memory": "97Mi", "limits.memory": "1Gi"},
		},
		{
			name:      "another resource",
			resources: `{"limits":{"ephemeral-storage":"1Gi"}}`,
			want:      map[string]string{"requests.cpu": "100m", "requests.memory": def, "limits.memory": def, "limits.ephemeral-storage": "1Gi"},
		},
		{
			name:      "empty",
			resources: `{}`,
			want:      map[string]string{"requests.cpu": "100m", "requests.memory": def, "limits.memory": def},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := fixture{spec: `{"resources":` + tt.resources + `}`}.run(t, fixedNow)
			want := map[string]int64{}
			for k, v := range tt.want {
				q := resource.MustParse(v)
				want[k] = q.MilliValue()
			}
			if diff := cmp.Diff(quantities(a.container(t, "memcached").Resources), want); diff != "" {
				t.Errorf("resources (-got +want):\n%s", diff)
			}
		})
	}
}

// TestRequestsNeverExceedLimits checks, for every container of the
// Deployment, that no request exceeds its limit: the API server refuses
// such a Deployment, and every sync then fails. A valid spec must never get
// there, whatever keys the user sets.
func TestRequestsNeverExceedLimits(t *testing.T) {
	tests := []struct {
		name string
		spec string
	}{
		{"memcached memory request above the default limit", `{"resources":{"requests":{"memory":"512Mi"}}}`},
		{"memcached CPU request under a larger CPU limit", `{"resources":{"requests":{"cpu":"4"},"limits":{"cpu":"8"}}}`},
		{"memcached memory request lowered", `{"resources":{"requests":{"memory":"64Mi"}}}`},
		{"exporter memory request above its default limit", `{"metrics":{"enabled":true,"resources":{"requests":{"memory":"128Mi"}}}}`},
		{"exporter memory limit below its default request", `{"metrics":{"enabled":true,"resources":{"limits":{"memory":"16Mi"}}}}`},
		{"exporter CPU limit", `{"metrics":{"enabled":true,"resources":{"limits":{"cpu":"5m"}}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := fixture{spec: tt.spec}.run(t, fixedNow)
			if c := a.condition(t, "Degraded"); c.Reason == "InvalidSpec" {
				t.Fatalf("spec is refused: %s", c.Message)
			}
			for _, c := range a.deployment(t).Spec.Template.Spec.Containers {
				for name, req := range c.Resources.Requests {
					if limit, ok := c.Resources.Limits[name]; ok && req.Cmp(limit) > 0 {
						t.Errorf("container %s: %s request %s exceeds its limit %s", c.Name, name, req.String(), limit.String())
					}
				}
			}
		})
	}
}

// TestMetrics checks the exporter: with metrics enabled, a second container
// on port 9150 named metrics, scraping memcached on localhost, and a metrics
// port on the Service; without, neither.
func TestMetrics(t *testing.T) {
	tests := []struct {
		name      string
		spec      string
		wantImage string // "" means no exporter
	}{
		{"absent", `{}`, ""},
		{"disabled", `{"metrics":{"enabled":false}}`, ""},
		{"enabled", `{"metrics":{"enabled":true}}`, v1alpha1.DefaultExporterImage},
		{"enabled with an image", `{"metrics":{"enabled":true,"image":"example.com/exporter:v1"}}`, "example.com/exporter:v1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := fixture{spec: tt.spec}.run(t, fixedNow)
			var names []string
			for _, c := range a.deployment(t).Spec.Template.Spec.Containers {
				names = append(names, c.Name)
			}
			var servicePorts []string
			for _, p := range a.service(t).Spec.Ports {
				servicePorts = append(servicePorts, fmt.Sprintf("%s %d %s %s", p.Name, p.Port, p.TargetPort.String(), p.Protocol))
			}
			if tt.wantImage == "" {
				if diff := cmp.Diff(names, []string{"memcached"}); diff != "" {
					t.Errorf("containers (-got +want):\n%s", diff)
				}
				if diff := cmp.Diff(servicePorts, []string{"memcached 11211 memcached TCP"}); diff != "" {
					t.Errorf("Service ports (-got +want):\n%s", diff)
				}
				return
			}
			if diff := cmp.Diff(names, []string{"memcached", "exporter"}); diff != "" {
				t.Errorf("containers (-got +want):\n%s", diff)
			}
			e := a.container(t, "exporter")
			if e.Image != tt.wantImage {
				t.Errorf("exporter image = %q, want %q", e.Image, tt.wantImage)
			}
			if len(e.Ports) != 1 || e.Ports[0].Name != "metrics" || e.Ports[0].ContainerPort != 9150 {
				t.Errorf("exporter ports = %+v, want metrics 9150", e.Ports)
			}
			if args := strings.Join(e.Args, " "); !strings.Contains(args, "localhost:11211") || !strings.Contains(args, ":9150") {
				t.Errorf("exporter args %q do not scrape localhost:11211 and listen on :9150", args)
			}
			if diff := cmp.Diff(servicePorts, []string{"memcached 11211 memcached TCP", "metrics 9150 metrics TCP"}); diff != "" {
				t.Errorf("Service ports (-got +want):\n%s", diff)
			}
		})
	}
}

// TestServiceMonitor checks that a ServiceMonitor is answered only when the
// spec wants one and the CompositeController manages ServiceMonitors, that
// it selects the Service's metrics port, and that a wanted but unmanaged one
// is reported in Degraded.
func TestServiceMonitor(t *testing.T) {
	allKinds := []string{memcached.DeploymentKey, memcached.ServiceKey, memcached.PDBKey, memcached.NetworkPolicyKey, memcached.ServiceMonitorKey}
	tests := []struct {
		name         string
		spec         string
		kinds        []string
		want         bool
		wantDegraded bool
	}{
		{"wanted and managed", `{"metrics":{"enabled":true,"serviceMonitor":{"enabled":true,"interval":"30s","labels":{"release":"prom"}}}}`, allKinds, true, false},
		{"wanted, not managed", `{"metrics":{"enabled":true,"serviceMonitor":{"enabled":true}}}`, nil, false, true},
		{"disabled, managed", `{"metrics":{"enabled":true,"serviceMonitor":{"enabled":false}}}`, allKinds, false, false},
		{"metrics without serviceMonitor, managed", `{"metrics":{"enabled":true}}`, allKinds, false, false},
		{"no metrics, managed", `{}`, allKinds, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := fixture{spec: tt.spec, kinds: tt.kinds}.run(t, fixedNow)
			sm, got := a.child(t, memcached.ServiceMonitorKey)
			if got != tt.want {
				t.Fatalf("ServiceMonitor answered = %v, want %v; children %v", got, tt.want, a.childKeys())
			}
			d := a.condition(t, "Degraded")
			if mentions := strings.Contains(d.Message, memcached.ServiceMonitorKey); d.Status == "True" != tt.wantDegraded || mentions != tt.wantDegraded {
				t.Errorf("Degraded = %s %s %q, want True naming %s: %v", d.Status, d.Reason, d.Message, memcached.ServiceMonitorKey, tt.wantDegraded)
			}
			if !got {
				return
			}
			svc := a.service(t)
			for k, v := range testutil.GetObject(sm, "spec", "selector", "matchLabels") {
				if svc.Labels[k] != v {
					t.Errorf("ServiceMonitor selects %s=%v, the Service has %q", k, v, svc.Labels[k])
				}
			}
			if ns := testutil.GetString(sm, "metadata", "namespace"); ns != svc.Namespace {
				t.Errorf("ServiceMonitor namespace = %q, want the Service's %q", ns, svc.Namespace)
			}
			if port, interval := testutil.GetString(sm, "spec", "endpoints", 0, "port"), testutil.GetString(sm, "spec", "endpoints", 0, "interval"); port != "metrics" || interval != "30s" {
				t.Errorf("ServiceMonitor endpoint = port %q interval %q, want metrics 30s", port, interval)
			}
			if l := testutil.GetString(sm, "metadata", "labels", "release"); l != "prom" {
				t.Errorf("ServiceMonitor label release = %q, want prom", l)
			}
		})
	}
}

// TestPodPlacement checks that the Pod placement fields pass through to the
// Pod template unchanged, and that user topologySpreadConstraints replace the
// default spread.
func TestPodPlacement(t *testing.T) {
	affinity := `{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"pool","operator":"In","values":["cache"]}]}]}}}`
	tolerations := `[{"key":"dedicated","operator":"Equal","value":"cache","effect":"NoSchedule"}]`
	spread := `[{"maxSkew":2,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"DoNotSchedule","labelSelector":{"matchLabels":{"app.kubernetes.io/instance":"cache-a"}}}]`
	spec := `{"affinity":` + affinity + `,"nodeSelector":{"disk":"ssd"},"tolerations":` + tolerations +
		`,"priorityClassName":"high","topologySpreadConstraints":` + spread + `}`
	a := fixture{spec: spec}.run(t, fixedNow)
	d, _ := a.child(t, memcached.DeploymentKey)
	podSpec := testutil.GetObject(d, "spec", "template", "spec")
	for _, tt := range []struct{ field, want string }{
		{"affinity", affinity},
		{"nodeSelector", `{"disk":"ssd"}`},
		{"tolerations", tolerations},
		{"priorityClassName", `"high"`},
		{"topologySpreadConstraints", spread},
	} {
		if diff := testutil.JSONDiff(t, testutil.MustMarshal(t, podSpec[tt.field]), []byte(tt.want)); diff != "" {
			t.Errorf("Pod template %s (-got +want):\n%s", tt.field, diff)
		}
	}
}

// TestDefaultSpread checks the default topology spread: soft, across nodes
// and zones, over this Memcached's Pods.
func TestDefaultSpread(t *testing.T) {
	a := fixture{spec: `{"size":3}`}.run(t, fixedNow)
	spread := a.deployment(t).Spec.Template.Spec.TopologySpreadConstraints
	var keys []string
	for _, c := range spread {
		keys = append(keys, c.TopologyKey)
		if c.WhenUnsatisfiable != corev1.ScheduleAnyway {
			t.Errorf("spread over %s is %s, want ScheduleAnyway", c.TopologyKey, c.WhenUnsatisfiable)
		}
		if c.LabelSelector == nil || !cmp.Equal(c.LabelSelector.MatchLabels, memcached.SelectorLabels(testName)) {
			t.Errorf("spread over %s selects %v, want this Memcached's Pods", c.TopologyKey, c.LabelSelector)
		}
	}
	slices.Sort(keys)
	if diff := cmp.Diff(keys, []string{"kubernetes.io/hostname", "topology.kubernetes.io/zone"}); diff != "" {
		t.Errorf("spread topology keys (-got +want):\n%s", diff)
	}
}

// TestPodLabelsAndSelector checks that podLabels and podAnnotations reach
// the Pod template, while the Deployment's, the Service's and the PDB's
// selectors stay the two selector labels.
func TestPodLabelsAndSelector(t *testing.T) {
	a := fixture{spec: `{"size":3,"podLabels":{"team":"web","tier":"cache"},"podAnnotations":{"example.com/note":"hi"}}`}.run(t, fixedNow)
	selector := map[string]string{"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": testName}
	d := a.deployment(t)
	wantLabels := map[string]string{"team": "web", "tier": "cache", "app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": testName}
	for k, v := range wantLabels {
		if got := d.Spec.Template.Labels[k]; got != v {
			t.Errorf("Pod template label %s = %q, want %q", k, got, v)
		}
	}
	if diff := cmp.Diff(d.Spec.Template.Annotations, map[string]string{"example.com/note": "hi"}); diff != "" {
		t.Errorf("Pod template annotations (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(d.Spec.Selector.MatchLabels, selector); diff != "" || len(d.Spec.Selector.MatchExpressions) != 0 {
		t.Errorf("Deployment selector (-got +want):\n%s%v", diff, d.Spec.Selector.MatchExpressions)
	}
	if diff := cmp.Diff(a.service(t).Spec.Selector, selector); diff != "" {
		t.Errorf("Service selector (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(a.pdb(t).Spec.Selector.MatchLabels, selector); diff != "" {
		t.Errorf("PDB selector (-got +want):\n%s", diff)
	}
}

// TestImage checks the memcached image: v1alpha1.DefaultImage unless the spec
// names one.
func TestImage(t *testing.T) {
	tests := []struct{ spec, want string }{
		{`{}`, v1alpha1.DefaultImage},
		{`{"image":""}`, v1alpha1.DefaultImage},
		{`{"image":"registry.example.com/memcached:1.6.40@sha256:0123"}`, "registry.example.com/memcached:1.6.40@sha256:0123"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got := fixture{spec: tt.spec}.run(t, fixedNow).container(t, "memcached").Image
			if got != tt.want {
				t.Errorf("image = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestChildrenHaveNoStatus checks that no child is answered with a status
// (it belongs to the child's controller) and that every child is in the
// parent's namespace, whatever the spec.
func TestChildrenHaveNoStatus(t *testing.T) {
	specs := []string{
		`{}`,
		`{"size":5,"metrics":{"enabled":true,"serviceMonitor":{"enabled":true}}}`,
		`{"size":0}`,
	}
	for _, spec := range specs {
		t.Run(spec, func(t *testing.T) {
			a := fixture{spec: spec, deployment: convergedDeploy(3), kinds: []string{memcached.DeploymentKey, memcached.ServiceKey, memcached.PDBKey, memcached.NetworkPolicyKey, memcached.ServiceMonitorKey}}.run(t, fixedNow)
			for _, c := range a.children {
				if _, ok := c["status"]; ok {
					t.Errorf("%s has a status field", childKey(c))
				}
				if ns := testutil.GetString(c, "metadata", "namespace"); ns != testNamespace {
					t.Errorf("%s namespace = %q, want %q", childKey(c), ns, testNamespace)
				}
			}
		})
	}
}
