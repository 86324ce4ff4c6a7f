// Package integration proves the install path against a real kube-apiserver:
// the manifests are accepted, the CRD refuses what it should, the examples
// are accepted, and what the real hook answers for each example is accepted
// too, its status surviving the API server unpruned.
package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/test/kube"
)

const ns = "integration"

// TestInstall runs the whole install path on one API server, step by step:
// each step needs the ones before it.
func TestInstall(t *testing.T) {
	c := kube.Start(t)
	hook := startHook(t)

	kubectl(t, c, nil, "apply", "--server-side", "-f", "testdata/metacontroller-crds-v1.yaml")
	kubectl(t, c, nil, "wait", "--for=condition=established", "--timeout=60s", "crd/compositecontrollers.metacontroller.k8s.io")

	t.Run("manifests apply", func(t *testing.T) {
		out := kubectl(t, c, nil, "apply", "-k", "../../manifests")
		for _, want := range []string{
			"customresourcedefinition.apiextensions.k8s.io/memcacheds.cache.example.com",
			"compositecontroller.metacontroller.k8s.io/memcached",
			"deployment.apps/memcached-hook",
			"service/memcached-hook",
			"serviceaccount/memcached-hook",
			"poddisruptionbudget.policy/memcached-hook",
			"networkpolicy.networking.k8s.io/memcached-hook",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl apply -k manifests: output lacks %q:\n%s", want, out)
			}
		}
		kubectl(t, c, nil, "wait", "--for=condition=established", "--timeout=60s", "crd/memcacheds.cache.example.com")
		kubectl(t, c, nil, "create", "namespace", ns)
	})

	t.Run("overlays render and apply", func(t *testing.T) {
		kubectl(t, c, nil, "apply", "--dry-run=server", "-k", "../../manifests/overlays/servicemonitor")
	})

	t.Run("hook Pods meet the restricted standard", func(t *testing.T) {
		var dep struct {
			Spec struct {
				Template json.RawMessage `json:"template"`
			} `json:"spec"`
		}
		mustUnmarshal(t, []byte(kubectl(t, c, nil, "get", "-n", "memcached-operator", "deployment/memcached-hook", "-o", "json")), &dep)
		createPodFromTemplate(t, c, "memcached-operator", "memcached-hook-probe", dep.Spec.Template)
	})

	examples := exampleFiles(t)
	t.Run("examples are accepted", func(t *testing.T) {
		for _, f := range examples {
			kubectl(t, c, nil, "apply", "-n", ns, "-f", f)
		}
	})

	t.Run("tutorial object gets the defaults", func(t *testing.T) {
		got := getJSON(t, c, "memcached/memcached-sample")
		spec := got["spec"].(map[string]any)
		want := map[string]any{
			"size": 3.0,
			"memcached": map[string]any{
				"maxMemoryMB": 64.0, "maxConnections": 1024.0, "threads": 4.0, "maxItemSize": "1Mi", "verbosity": 0.0,
			},
		}
		if !reflect.DeepEqual(spec, want) {
			t.Errorf("spec after defaulting:\n got %v\nwant %v", spec, want)
		}
	})

	t.Run("kubectl scale changes spec.size", func(t *testing.T) {
		kubectl(t, c, nil, "scale", "-n", ns, "memcached/memcached-minimal", "--replicas=4")
		got := getJSON(t, c, "memcached/memcached-minimal")["spec"].(map[string]any)["size"]
		if got != 4.0 {
			t.Errorf("spec.size after kubectl scale --replicas=4 = %v, want 4", got)
		}
	})

	t.Run("kubectl get shows the columns", func(t *testing.T) {
		out := kubectl(t, c, nil, "get", "mc", "-n", ns)
		for _, col := range []string{"NAME", "SIZE", "READY", "AVAILABLE", "IMAGE", "AGE", "memcached-sample"} {
			if !strings.Contains(out, col) {
				t.Errorf("kubectl get mc lacks %q:\n%s", col, out)
			}
		}
		if out := kubectl(t, c, nil, "get", "all", "-n", ns); !strings.Contains(out, "memcached.cache.example.com/memcached-sample") {
			t.Errorf("kubectl get all does not list Memcached objects:\n%s", out)
		}
	})

	t.Run("invalid objects are refused", func(t *testing.T) {
		testInvalid(t, c)
	})

	t.Run("hook answers are accepted", func(t *testing.T) {
		kubectl(t, c, nil, "create", "namespace", "restricted")
		kubectl(t, c, nil, "label", "namespace", "restricted", "pod-security.kubernetes.io/enforce=restricted")
		// The placement example names a PriorityClass of the user's own.
		kubectl(t, c, nil, "create", "priorityclass", "memcached-critical", "--value=1000000")
		// A stand-in for the Prometheus Operator's CRD, so that the
		// ServiceMonitor the hook makes can be dry-run too.
		kubectl(t, c, []byte(serviceMonitorCRD), "apply", "-f", "-")
		kubectl(t, c, nil, "wait", "--for=condition=established", "--timeout=60s", "crd/servicemonitors.monitoring.coreos.com")
		for _, f := range examples {
			name := objectName(t, f)
			t.Run(name, func(t *testing.T) { testHookAnswer(t, c, hook, name) })
		}
	})
}

// testHookAnswer asks the real hook to sync a Memcached as the API server
// stores it, then proves every child would be accepted and the status reads
// back unchanged through the status subresource (nothing pruned, so
// Metacontroller would not rewrite it on every sync).
func testHookAnswer(t *testing.T, c *kube.Cluster, hook string, name string) {
	parent := getJSON(t, c, "memcached/"+name)
	req := map[string]any{
		"controller": map[string]any{},
		"parent":     parent,
		"children": map[string]any{
			"Deployment.apps/v1":            map[string]any{},
			"Service.v1":                    map[string]any{},
			"PodDisruptionBudget.policy/v1": map[string]any{},
			// As with the servicemonitor overlay.
			"ServiceMonitor.monitoring.coreos.com/v1": map[string]any{},
		},
		"related":    map[string]any{"Pod.v1": map[string]any{}},
		"finalizing": false,
	}
	var resp struct {
		Status   map[string]any   `json:"status"`
		Children []map[string]any `json:"children"`
	}
	post(t, hook+"/sync", req, &resp)
	if len(resp.Children) == 0 {
		t.Fatal("hook answered no children")
	}

	for _, child := range resp.Children {
		b, _ := json.Marshal(child)
		kubectl(t, c, b, "apply", "--dry-run=server", "-n", ns, "-f", "-")
		if child["kind"] == "Deployment" {
			tmpl, _ := json.Marshal(child["spec"].(map[string]any)["template"])
			createPodFromTemplate(t, c, "restricted", name, tmpl)
		}
	}

	parent["status"] = resp.Status
	b, _ := json.Marshal(parent)
	kubectl(t, c, b, "replace", "--subresource=status", "-f", "-")
	got := getJSON(t, c, "memcached/"+name)["status"]
	if !reflect.DeepEqual(got, normalize(t, resp.Status)) {
		gb, _ := json.MarshalIndent(got, "", "  ")
		wb, _ := json.MarshalIndent(resp.Status, "", "  ")
		t.Errorf("status read back differs from the status written:\n got %s\nwant %s", gb, wb)
	}

	// A second sync of the parent as stored now (status included), a
	// second later, must answer the same status: Metacontroller would write
	// nothing and the loop ends.
	time.Sleep(time.Second)
	req["parent"] = getJSON(t, c, "memcached/"+name)
	var again struct {
		Status map[string]any `json:"status"`
	}
	post(t, hook+"/sync", req, &again)
	if !reflect.DeepEqual(normalize(t, again.Status), got) {
		gb, _ := json.MarshalIndent(again.Status, "", "  ")
		wb, _ := json.MarshalIndent(got, "", "  ")
		t.Errorf("second sync changed the status:\n got %s\nwant %s", gb, wb)
	}
}

// serviceMonitorCRD stands in for the Prometheus Operator's: same group,
// version and kind, any content.
const serviceMonitorCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: servicemonitors.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  names: {kind: ServiceMonitor, listKind: ServiceMonitorList, plural: servicemonitors, singular: servicemonitor}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// createPodFromTemplate dry-runs a Pod made from a Pod template in a
// namespace, which proves the Pod passes admission there (Pod Security
// included), without a scheduler or kubelet.
func createPodFromTemplate(t *testing.T, c *kube.Cluster, namespace, name string, template json.RawMessage) {
	t.Helper()
	var tmpl struct {
		Metadata map[string]any `json:"metadata"`
		Spec     map[string]any `json:"spec"`
	}
	mustUnmarshal(t, template, &tmpl)
	meta := tmpl.Metadata
	if meta == nil {
		meta = map[string]any{}
	}
	meta["name"] = name
	meta["namespace"] = namespace
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": tmpl.Spec}
	b, _ := json.Marshal(pod)
	stdout, stderr, err := c.KubectlStdin(b, "create", "--dry-run=server", "-f", "-")
	if err != nil {
		t.Errorf("Pod from %s's template refused in namespace %s: %v\n%s%s", name, namespace, err, stdout, stderr)
	}
	if strings.Contains(stderr, "violate PodSecurity") {
		t.Errorf("Pod from %s's template warns of PodSecurity violations: %s", name, stderr)
	}
}

// invalidCase is a Memcached the CRD must refuse, and what the refusal must
// say.
type invalidCase struct {
	name string
	spec string // the spec in YAML flow style, braces optional
	want []string
}

func testInvalid(t *testing.T, c *kube.Cluster) {
	cases := []invalidCase{
		{"negative size", `size: -1`, []string{"spec.size", "greater than or equal to 0"}},
		{"size above bound", `size: 1001`, []string{"spec.size", "less than or equal to 1000"}},
		{"size as string", `size: "3"`, []string{"spec.size", "integer"}},
		{"empty image", `image: ""`, []string{"spec.image", "at least 1 chars long"}},
		{"image with space", `image: "memcached 1.6"`, []string{"spec.image", "must not contain spaces"}},
		{"memory too small", `memcached: {maxMemoryMB: 1}`, []string{"spec.memcached.maxMemoryMB", "greater than or equal to 2"}},
		{"connections zero", `memcached: {maxConnections: 0}`, []string{"spec.memcached.maxConnections"}},
		{"threads above 64", `memcached: {threads: 65}`, []string{"spec.memcached.threads", "less than or equal to 64"}},
		{"verbosity 3", `memcached: {verbosity: 3}`, []string{"spec.memcached.verbosity"}},
		{"item size in milli", `memcached: {maxItemSize: 1m}`, []string{"spec.memcached.maxItemSize", "between 1Ki and 1Gi"}},
		{"item size above 1Gi", `memcached: {maxMemoryMB: 8192, maxItemSize: 2Gi}`, []string{"spec.memcached.maxItemSize", "between 1Ki and 1Gi"}},
		{"item size over half memory", `memcached: {maxMemoryMB: 64, maxItemSize: 33Mi}`, []string{"spec.memcached.maxItemSize", "at most half of maxMemoryMB"}},
		{"extra arg sets memory", `memcached: {extraArgs: ["-m", "128"]}`, []string{"spec.memcached.extraArgs", "must not set a flag the operator manages"}},
		{"extra arg sets memory attached", `memcached: {extraArgs: ["-m128"]}`, []string{"spec.memcached.extraArgs", "must not set a flag the operator manages"}},
		{"extra arg long form", `memcached: {extraArgs: ["--memory-limit=128"]}`, []string{"spec.memcached.extraArgs", "must not set a flag the operator manages"}},
		{"extra arg verbosity", `memcached: {extraArgs: ["-vv"]}`, []string{"spec.memcached.extraArgs", "must not set a flag the operator manages"}},
		{"extra arg abbreviated long form", `memcached: {extraArgs: ["--thr=8"]}`, []string{"spec.memcached.extraArgs", "must not set a flag the operator manages"}},
		{"extra arg unix socket", `memcached: {extraArgs: ["-s", "/tmp/mc.sock"]}`, []string{"spec.memcached.extraArgs", "must not set a flag the operator manages"}},
		{"extra arg version exits", `memcached: {extraArgs: ["-V"]}`, []string{"spec.memcached.extraArgs", "must not set a flag the operator manages"}},
		{"memory limit too tight", `{memcached: {maxMemoryMB: 64}, resources: {limits: {memory: 90Mi}}}`, []string{"spec.resources.limits[memory]", "at least memcached.maxMemoryMB + 32Mi"}},
		{"request above limit", `resources: {requests: {memory: 1Gi}, limits: {memory: 512Mi}}`, []string{"spec.resources.requests[memory]", "must not exceed"}},
		{"pod label overrides selector", `podLabels: {app.kubernetes.io/instance: other}`, []string{"spec.podLabels", "the operator owns them"}},
		{"service monitor without metrics", `metrics: {serviceMonitor: {enabled: true}}`, []string{"spec.metrics.serviceMonitor.enabled", "needs metrics.enabled"}},
		{"bad scrape interval", `metrics: {enabled: true, serviceMonitor: {enabled: true, interval: soon}}`, []string{"spec.metrics.serviceMonitor.interval"}},
		{"unknown field", `sise: 3`, []string{"sise"}},
		{"tolerations not a list", `tolerations: dedicated`, []string{"spec.tolerations", "array"}},
		{"affinity not an object", `affinity: [zone-a]`, []string{"spec.affinity", "object"}},
		{"node selector value not a string", `nodeSelector: {disk: [ssd]}`, []string{"spec.nodeSelector.disk", "string"}},
		{"spread skew not a number", `topologySpreadConstraints: [{maxSkew: one, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway}]`, []string{"spec.topologySpreadConstraints[0].maxSkew", "integer"}},
		{"priority class name too long", `priorityClassName: ` + strings.Repeat("p", 254), []string{"spec.priorityClassName", "253"}},
		{"metrics enabled not a bool", `metrics: {enabled: "yes"}`, []string{"spec.metrics.enabled", "boolean"}},
		{"pod annotations not strings", `podAnnotations: {team: [a]}`, []string{"spec.podAnnotations.team", "string"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec
			if !strings.HasPrefix(spec, "{") {
				spec = "{" + spec + "}"
			}
			obj := fmt.Sprintf("apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: invalid, namespace: %s}\nspec: %s\n", ns, spec)
			stdout, stderr, err := c.KubectlStdin([]byte(obj), "create", "--dry-run=server", "--validate=strict", "-f", "-")
			if err == nil {
				t.Fatalf("accepted, want refused:\n%s\n%s", obj, stdout)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("refusal does not say %q:\n%s", w, stderr)
				}
			}
		})
	}
}

// startHook builds and starts the real hook binary on a loopback port and
// returns its base URL.
func startHook(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "memcached-hook")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/memcached-hook").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--listen-address=127.0.0.1:0", "--shutdown-delay=0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var line struct {
				Msg     string `json:"msg"`
				Address string `json:"address"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" {
				addr <- line.Address
			}
		}
	}()
	select {
	case a := <-addr:
		return "http://" + a
	case <-time.After(30 * time.Second):
		t.Fatalf("hook did not log its address within 30s; stderr:\n%s", logs.String())
	}
	return ""
}

func post(t *testing.T, url string, body, into any) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %s\n%s", url, resp.Status, rb)
	}
	mustUnmarshal(t, rb, into)
}

// kubectl runs kubectl and fails the test if it fails.
func kubectl(t *testing.T, c *kube.Cluster, stdin []byte, args ...string) string {
	t.Helper()
	stdout, stderr, err := c.KubectlStdin(stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, stdout, stderr)
	}
	return stdout
}

func getJSON(t *testing.T, c *kube.Cluster, what string) map[string]any {
	t.Helper()
	var obj map[string]any
	mustUnmarshal(t, []byte(kubectl(t, c, nil, "get", "-n", ns, what, "-o", "json")), &obj)
	return obj
}

func mustUnmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decoding %.200s: %v", b, err)
	}
}

// normalize round-trips v through JSON, so that it compares with what
// kubectl printed.
func normalize(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	mustUnmarshal(t, b, &out)
	return out
}

// exampleFiles lists the Memcached objects in examples/.
func exampleFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	sort.Strings(files)
	return files
}

func objectName(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var obj struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(b, &obj); err != nil || obj.Metadata.Name == "" {
		t.Fatalf("%s: no metadata.name (%v)", file, err)
	}
	return obj.Metadata.Name
}
