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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/test/kube"
	"github.com/example/memcached-operator/test/playground"
	"github.com/example/memcached-operator/test/testutil"
)

const ns = "integration"

// TestInstall runs the whole install path on one API server, step by step:
// each step needs the ones before it.
func TestInstall(t *testing.T) {
	c := kube.Start(t, kube.Options{})
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
		kubectl(t, c, []byte(playground.ServiceMonitorCRD), "apply", "-f", "-")
		kubectl(t, c, nil, "wait", "--for=condition=established", "--timeout=60s", "crd/servicemonitors.monitoring.coreos.com")
		for _, f := range examples {
			name := objectName(t, f)
			t.Run(name, func(t *testing.T) { testHookAnswer(t, c, hook, name) })
		}
	})

	t.Run("the NetworkPolicy selects exactly the Memcached's Pods", func(t *testing.T) {
		testNetworkPolicySelects(t, c, hook)
	})
}

// testNetworkPolicySelects creates, for real, Pods from the templates the
// hook answers for two Memcacheds and a Pod that carries only some of the
// labels, applies the NetworkPolicy the hook answers for the first, and
// asks the API server which Pods its podSelector selects (what a network
// plugin enforces it on): the first Memcached's Pods, and nothing else.
func testNetworkPolicySelects(t *testing.T, c *kube.Cluster, hook string) {
	const selectNS = "np-select"
	kubectl(t, c, nil, "create", "namespace", selectNS)
	answer := func(name string) (policy map[string]any, template json.RawMessage) {
		t.Helper()
		var resp struct {
			Children []map[string]any `json:"children"`
		}
		post(t, hook+"/sync", testutil.FirstSync(getJSON(t, c, "memcached/"+name)), &resp)
		for _, child := range resp.Children {
			switch child["kind"] {
			case "NetworkPolicy":
				policy = child
			case "Deployment":
				template, _ = json.Marshal(child["spec"].(map[string]any)["template"])
			}
		}
		if policy == nil || template == nil {
			t.Fatalf("the hook answers %s no NetworkPolicy or no Deployment", name)
		}
		return policy, template
	}
	policy, own := answer("memcached-auth")
	_, other := answer("memcached-tls")
	createPod := func(name string, template json.RawMessage) {
		t.Helper()
		var tmpl struct {
			Metadata map[string]any `json:"metadata"`
			Spec     map[string]any `json:"spec"`
		}
		mustUnmarshal(t, template, &tmpl)
		tmpl.Metadata["name"], tmpl.Metadata["namespace"] = name, selectNS
		b, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": tmpl.Metadata, "spec": tmpl.Spec})
		kubectl(t, c, b, "create", "-f", "-")
	}
	createPod("auth-0", own)
	createPod("auth-1", own)
	createPod("tls-0", other)
	kubectl(t, c, nil, "run", "-n", selectNS, "lookalike", "--image=memcached", "--labels=app.kubernetes.io/name=memcached,app.kubernetes.io/managed-by=memcached-operator")

	policy["metadata"].(map[string]any)["namespace"] = selectNS
	b, _ := json.Marshal(policy)
	kubectl(t, c, b, "apply", "-f", "-")
	var stored struct {
		Spec struct {
			PodSelector metav1.LabelSelector `json:"podSelector"`
		} `json:"spec"`
	}
	mustUnmarshal(t, []byte(kubectl(t, c, nil, "get", "-n", selectNS, "networkpolicy/memcached-auth", "-o", "json")), &stored)
	selector, err := metav1.LabelSelectorAsSelector(&stored.Spec.PodSelector)
	if err != nil || selector.Empty() {
		t.Fatalf("the stored podSelector %v selects every Pod or is invalid: %v", stored.Spec.PodSelector, err)
	}
	got := strings.Fields(kubectl(t, c, nil, "get", "pods", "-n", selectNS, "-l", selector.String(), "-o", "jsonpath={.items[*].metadata.name}"))
	if want := []string{"auth-0", "auth-1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("the NetworkPolicy (podSelector %s) selects %v, want %v", selector, got, want)
	}
}

// testHookAnswer asks the real hook to sync a Memcached as the API server
// stores it, then proves every child would be accepted and the status reads
// back unchanged through the status subresource (nothing pruned, so
// Metacontroller would not rewrite it on every sync).
func testHookAnswer(t *testing.T, c *kube.Cluster, hook string, name string) {
	parent := getJSON(t, c, "memcached/"+name)
	req := testutil.FirstSync(parent)
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
		var stored map[string]any
		mustUnmarshal(t, []byte(kubectl(t, c, b, "apply", "--dry-run=server", "-n", ns, "-o", "json", "-f", "-")), &stored)
		if lost := notKept(fmt.Sprint(child["kind"]), normalize(t, child), stored); len(lost) > 0 {
			t.Errorf("the API server does not keep what the hook sent:\n  %s", strings.Join(lost, "\n  "))
		}
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
	stdout, stderr, err := c.KubectlStdin(b, "create", "--dry-run=server", "-o", "json", "-f", "-")
	if err != nil {
		t.Errorf("Pod from %s's template refused in namespace %s: %v\n%s%s", name, namespace, err, stdout, stderr)
		return
	}
	var stored map[string]any
	mustUnmarshal(t, []byte(stdout), &stored)
	if lost := notKept("Pod", normalize(t, pod), stored); len(lost) > 0 {
		t.Errorf("the API server does not keep the Pod from %s's template as sent:\n  %s", name, strings.Join(lost, "\n  "))
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
	// objName is the object's metadata.name; "" means "invalid".
	objName string
}

func testInvalid(t *testing.T, c *kube.Cluster) {
	cases := []invalidCase{
		{name: "negative size", spec: `size: -1`, want: []string{"spec.size", "greater than or equal to 0"}},
		{name: "extstore without a size", spec: `extstore: {threads: 4}`, want: []string{"spec.extstore.size", "Required value"}},
		{name: "extstore of four pages", spec: `extstore: {size: 256Mi}`, want: []string{"spec.extstore.size", "extstore.size must be from 320Mi"}},
		{name: "extstore write buffer of 3 MB", spec: `extstore: {size: 1Gi, writeBufferMB: 3, expectedItemSize: 65536}`, want: []string{"spec.extstore.writeBufferMB", "2, 4, 8, 16, 32 or 64"}},
		{name: "maxItemSize above the write buffer", spec: `{memcached: {maxMemoryMB: 1024, maxItemSize: 16Mi}, extstore: {size: 1Gi, expectedItemSize: 65536}}`, want: []string{"spec.extstore.writeBufferMB", "at least memcached.maxItemSize"}},
		{name: "extstore headers over half of maxMemoryMB", spec: `{memcached: {maxMemoryMB: 4096}, extstore: {size: 100Gi}}`, want: []string{"spec.extstore.size", "too large for memcached.maxMemoryMB"}},
		{name: "extstore threads 0", spec: `extstore: {size: 1Gi, threads: 0, expectedItemSize: 65536}`, want: []string{"spec.extstore.threads", "from 1 to 64"}},
		{name: "memory limit without extstore's buffers", spec: `{memcached: {maxMemoryMB: 1024}, extstore: {size: 10Gi, expectedItemSize: 65536}, resources: {limits: {memory: 1260Mi}}}`, want: []string{"spec.resources.limits[memory]", "at least what memcached can use"}},
		{name: "size above bound", spec: `size: 1001`, want: []string{"spec.size", "less than or equal to 1000"}},
		{name: "size as string", spec: `size: "3"`, want: []string{"spec.size", "integer"}},
		{name: "empty image", spec: `image: ""`, want: []string{"spec.image", "at least 1 chars long"}},
		{name: "image with space", spec: `image: "memcached 1.6"`, want: []string{"spec.image", "must not contain white space"}},
		{name: "memory too small", spec: `memcached: {maxMemoryMB: 1}`, want: []string{"spec.memcached.maxMemoryMB", "greater than or equal to 2"}},
		{name: "connections zero", spec: `memcached: {maxConnections: 0}`, want: []string{"spec.memcached.maxConnections", "greater than or equal to 25"}},
		{name: "threads above 64", spec: `memcached: {threads: 65}`, want: []string{"spec.memcached.threads", "less than or equal to 64"}},
		{name: "verbosity 3", spec: `memcached: {verbosity: 3}`, want: []string{"spec.memcached.verbosity"}},
		{name: "item size in milli", spec: `memcached: {maxItemSize: 1m}`, want: []string{"spec.memcached.maxItemSize", "multiple of 512Ki from 512Ki to 1Gi"}},
		{name: "item size above 1Gi", spec: `memcached: {maxMemoryMB: 8192, maxItemSize: 2Gi}`, want: []string{"spec.memcached.maxItemSize", "multiple of 512Ki from 512Ki to 1Gi"}},
		{name: "item size under the slab chunk", spec: `memcached: {maxItemSize: 100Ki}`, want: []string{"spec.memcached.maxItemSize", "multiple of 512Ki"}},
		{name: "item size not a multiple of the slab chunk", spec: `memcached: {maxItemSize: 1000Ki}`, want: []string{"spec.memcached.maxItemSize", "multiple of 512Ki"}},
		{name: "connections above the open-files bound", spec: `memcached: {maxConnections: 65537}`, want: []string{"spec.memcached.maxConnections", "less than or equal to 65536"}},
		{name: "pod label controller-uid", spec: `podLabels: {controller-uid: x}`, want: []string{"spec.podLabels", "controller-uid"}},
		{name: "service monitor label controller-uid", spec: `metrics: {enabled: true, serviceMonitor: {enabled: true, labels: {controller-uid: x}}}`, want: []string{"spec.metrics.serviceMonitor.labels", "controller-uid"}},
		{name: "item size over half memory", spec: `memcached: {maxMemoryMB: 64, maxItemSize: 33Mi}`, want: []string{"spec.memcached.maxItemSize", "at most half of maxMemoryMB"}},
		{name: "extra arg sets memory", spec: `memcached: {extraArgs: ["-m", "128"]}`, want: []string{"spec.memcached.extraArgs", "must not set a flag the operator manages"}},
		{name: "extra arg sets memory attached", spec: `memcached: {extraArgs: ["-m128"]}`, want: []string{"spec.memcached.extraArgs", "must not set a flag the operator manages"}},
		{name: "extra arg long form", spec: `memcached: {extraArgs: ["--memory-limit=128"]}`, want: []string{"spec.memcached.extraArgs", "must not set a flag the operator manages"}},
		{name: "extra arg verbosity", spec: `memcached: {extraArgs: ["-vv"]}`, want: []string{"spec.memcached.extraArgs", "must not set a flag the operator manages"}},
		{name: "extra arg abbreviated long form", spec: `memcached: {extraArgs: ["--thr=8"]}`, want: []string{"spec.memcached.extraArgs", "must not set a flag the operator manages"}},
		{name: "extra arg unix socket", spec: `memcached: {extraArgs: ["-s", "/tmp/mc.sock"]}`, want: []string{"spec.memcached.extraArgs", "must not set a flag the operator manages"}},
		{name: "extra arg version exits", spec: `memcached: {extraArgs: ["-V"]}`, want: []string{"spec.memcached.extraArgs", "must not set a flag the operator manages"}},
		{name: "memory limit too tight", spec: `{memcached: {maxMemoryMB: 64}, resources: {limits: {memory: 107Mi}}}`, want: []string{"spec.resources.limits[memory]", "at least what memcached can use"}},
		{name: "memory limit too tight for the connections", spec: `{memcached: {maxConnections: 19000}, resources: {limits: {memory: 205Mi}}}`, want: []string{"spec.resources.limits[memory]", "at least what memcached can use"}},
		{name: "too few connections for the threads", spec: `memcached: {maxConnections: 100, threads: 64}`, want: []string{"spec.memcached.maxConnections", "at least 5 × threads + 20"}},
		{name: "extra args end with -o", spec: `memcached: {extraArgs: ["-o", "modern", "-o"]}`, want: []string{"spec.memcached.extraArgs", "nor end with an option that needs a value"}},
		{name: "extra arg -Z", spec: `memcached: {extraArgs: ["-Z"]}`, want: []string{"spec.memcached.extraArgs", "must not set a flag the operator manages"}},
		{name: "liveness check unknown", spec: `livenessCheck: HTTP`, want: []string{"spec.livenessCheck", "Unsupported value"}},
		{name: "request above limit", spec: `resources: {requests: {memory: 1Gi}, limits: {memory: 512Mi}}`, want: []string{"spec.resources.requests[memory]", "must not exceed"}},
		{name: "pod label overrides selector", spec: `podLabels: {app.kubernetes.io/instance: other}`, want: []string{"spec.podLabels", "the operator and Metacontroller own them"}},
		{name: "service monitor without metrics", spec: `metrics: {serviceMonitor: {enabled: true}}`, want: []string{"spec.metrics.serviceMonitor.enabled", "needs metrics.enabled"}},
		{name: "bad scrape interval", spec: `metrics: {enabled: true, serviceMonitor: {enabled: true, interval: soon}}`, want: []string{"spec.metrics.serviceMonitor.interval"}},
		{name: "unknown field", spec: `sise: 3`, want: []string{"sise"}},
		{name: "name with a dot", spec: `size: 1`, want: []string{"metadata.name must be a DNS label"}, objName: "my.cache"},
		{name: "name starting with a digit", spec: `size: 1`, want: []string{"metadata.name must be a DNS label"}, objName: "1cache"},
		{name: "tolerations not a list", spec: `tolerations: dedicated`, want: []string{"spec.tolerations", "array"}},
		{name: "affinity not an object", spec: `affinity: [zone-a]`, want: []string{"spec.affinity", "object"}},
		{name: "node selector value not a string", spec: `nodeSelector: {disk: [ssd]}`, want: []string{"spec.nodeSelector.disk", "string"}},
		{name: "spread skew not a number", spec: `topologySpreadConstraints: [{maxSkew: one, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway}]`, want: []string{"spec.topologySpreadConstraints[0].maxSkew", "integer"}},
		{name: "priority class name too long", spec: `priorityClassName: ` + strings.Repeat("p", 254), want: []string{"spec.priorityClassName", "253"}},
		{name: "metrics enabled not a bool", spec: `metrics: {enabled: "yes"}`, want: []string{"spec.metrics.enabled", "boolean"}},
		{name: "tls without a Secret", spec: `tls: {}`, want: []string{"spec.tls.secretName", "Required value"}},
		{name: "tls Secret name not a name", spec: `tls: {secretName: Cache_TLS}`, want: []string{"spec.tls.secretName", "must be a Secret's name"}},
		{name: "tls client certificates unknown", spec: `tls: {secretName: c, clientCertificates: Optional}`, want: []string{"spec.tls.clientCertificates", "Unsupported value"}},
		{name: "tls 1.1", spec: `tls: {secretName: c, minVersion: "1.1"}`, want: []string{"spec.tls.minVersion", "Unsupported value"}},
		{name: "auth without a Secret", spec: `auth: {mode: SASL}`, want: []string{"spec.auth.secretName", "Required value"}},
		{name: "auth mode unknown", spec: `auth: {secretName: u, mode: PLAIN}`, want: []string{"spec.auth.mode", "Unsupported value"}},
		{name: "auth with metrics", spec: `{auth: {secretName: u}, metrics: {enabled: true}}`, want: []string{"spec.metrics.enabled", "cannot go with auth"}},
		{name: "memory limit too tight over TLS", spec: `{tls: {secretName: c}, resources: {limits: {memory: 147Mi}}}`, want: []string{"spec.resources.limits[memory]", "at least what memcached can use"}},
		{name: "extra arg -S", spec: `memcached: {extraArgs: ["-S"]}`, want: []string{"spec.memcached.extraArgs", "must not set a flag the operator manages"}},
		{name: "network policy allowAll and from", spec: `networkPolicy: {memcached: {allowAll: true, from: [{podSelector: {}}]}}`, want: []string{"spec.networkPolicy.memcached.allowAll", "set one or the other"}},
		{name: "network policy peer not an object", spec: `networkPolicy: {metrics: {from: [monitoring]}}`, want: []string{"spec.networkPolicy.metrics.from[0]", "object"}},
		{name: "pod annotations not strings", spec: `podAnnotations: {team: [a]}`, want: []string{"spec.podAnnotations.team", "string"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec
			if !strings.HasPrefix(spec, "{") {
				spec = "{" + spec + "}"
			}
			name := tc.objName
			if name == "" {
				name = "invalid"
			}
			obj := fmt.Sprintf("apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: %q, namespace: %s}\nspec: %s\n", name, ns, spec)
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
	cmd := exec.CommandContext(ctx, bin, "--listen-address=127.0.0.1:0", "--shutdown-delay=0", "--agent-image=ghcr.io/example/memcached-hook:test")
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
