package memcached_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/sync/slots"
	"github.com/example/memcached-operator/test/testutil"
	"sigs.k8s.io/yaml"
)

// exampleGoldenDir holds one golden answer per Memcached in examples/: the
// children and status each feature's example produces.
var exampleGoldenDir = filepath.Join("testdata", "golden-examples")

// TestGoldenExamples answers a first sync for every Memcached in examples/,
// as a CompositeController managing every child kind the hook can make
// (servicemonitor overlay included) would send it, and compares the answer
// with testdata/golden-examples/<file>.json.
func TestGoldenExamples(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testutil.Root(), "examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	want := map[string]bool{}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		golden := filepath.Join(exampleGoldenDir, name+".json")
		want[golden] = true
		t.Run(name, func(t *testing.T) {
			body := exampleRequest(t, file)
			got := callHook(t, "sync", body, fixedNow)
			testutil.Golden(t, golden, got)
			checkAnswer(t, "sync", body, got)
			checkFacts(t, body, got)
			if bytes := callHook(t, "sync", body, fixedNow); string(bytes) != string(got) {
				t.Errorf("same request, different bytes:\n%s\n%s", got, bytes)
			}
			cond := parseAnswer(t, got).condition(t, "Degraded")
			if cond.Reason == "InvalidSpec" {
				t.Errorf("example %s is invalid: %s", file, cond.Message)
			}
		})
	}
	goldens, _ := filepath.Glob(filepath.Join(exampleGoldenDir, "*.json"))
	for _, g := range goldens {
		if !want[g] {
			t.Errorf("golden file %s answers no example: delete it", g)
		}
	}
}

// exampleRequest builds the first sync request Metacontroller would send for
// an example Memcached: nothing observed yet.
func exampleRequest(t *testing.T, file string) []byte {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var parent map[string]any
	if err := yaml.Unmarshal(data, &parent); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	meta := parent["metadata"].(map[string]any)
	meta["namespace"] = "default"
	meta["generation"] = 1
	meta["uid"] = "00000000-0000-0000-0000-000000000001"
	return testutil.MustMarshal(t, testutil.FirstSync(parent))
}

// TestCurlRequests answers every request in examples/requests as the curl
// walk-through in cmd/memcached-hook/README.md does, on the hook the
// walk-through names, and checks what the walk-through says of each answer,
// so that it stays true.
func TestCurlRequests(t *testing.T) {
	walk := curlWalkthrough(t)
	dir := filepath.Join(testutil.Root(), "examples", "requests")
	tests := []struct {
		file  string
		hook  string
		check func(t *testing.T, raw []byte)
	}{
		{"customize.json", "customize", func(t *testing.T, raw []byte) {
			rules := testutil.At(testutil.DecodeObject(t, raw), "relatedResources").([]any)
			if len(rules) != 2 {
				t.Fatalf("customize answer = %s, want two rules (the memcached Pods, the proxies')", raw)
			}
			for _, r := range rules {
				if testutil.GetString(r, "resource") != "pods" || testutil.GetString(r, "namespace") != "cache" {
					t.Errorf("customize answer = %s, want rules for the Pods of namespace cache", raw)
				}
			}
		}},
		{"sync-new.json", "sync", func(t *testing.T, raw []byte) {
			a := parseAnswer(t, raw)
			wantReplicas(t, a, 3)
			if len(a.status.Nodes) != 0 {
				t.Errorf("nodes = %v, want none: nothing runs yet", a.status.Nodes)
			}
		}},
		{"sync.json", "sync", func(t *testing.T, raw []byte) {
			a := parseAnswer(t, raw)
			wantReplicas(t, a, 5)
			wantKinds(t, a, memcached.DeploymentKey, memcached.ServiceKey, memcached.PDBKey, memcached.NetworkPolicyKey)
			if len(a.status.Nodes) != 5 || !slices.IsSorted(a.status.Nodes) || len(a.status.Endpoints) != 5 {
				t.Errorf("nodes %v, endpoints %v: want the 5 Pods, sorted, all ready", a.status.Nodes, a.status.Endpoints)
			}
			// The captured Deployment runs the recording hook's image;
			// the spec names none, so the answer moves it to the default.
			if a.status.Image != "memcached:1.6.38-alpine" || a.container(t, "memcached").Image != v1alpha1.DefaultImage {
				t.Errorf("status.image %q, answered image %q: want the observed 1.6.38 and the default %s", a.status.Image, a.container(t, "memcached").Image, v1alpha1.DefaultImage)
			}
		}},
		{"sync-v1.json", "sync", func(t *testing.T, raw []byte) {
			a := parseAnswer(t, raw)
			wantReplicas(t, a, 2)
			if len(a.status.Nodes) != 5 {
				t.Errorf("nodes = %v, want the 5 Pods still running", a.status.Nodes)
			}
		}},
		{"sync-invalid-spec.json", "sync", func(t *testing.T, raw []byte) {
			a := parseAnswer(t, raw)
			if d := a.condition(t, memcached.ConditionDegraded); d.Reason != string(memcached.ReasonInvalidSpec) || !namesField(d.Message, "spec.size") {
				t.Errorf("Degraded = %s %q, want InvalidSpec naming spec.size", d.Reason, d.Message)
			}
			wantKinds(t, a, memcached.DeploymentKey)
		}},
		{"sync-tls.json", "sync", func(t *testing.T, raw []byte) {
			a := parseAnswer(t, raw)
			wantKinds(t, a, memcached.DeploymentKey, memcached.ServiceKey, memcached.PDBKey, memcached.NetworkPolicyKey)
			args := strings.Join(a.container(t, "memcached").Args, " ")
			if !strings.Contains(args, "-Z") || !strings.Contains(args, "ssl_verify_mode=2") || !strings.Contains(args, "notls:127.0.0.1:11212") {
				t.Errorf("memcached args %q: want TLS, client certificates required, plain text on loopback only", args)
			}
			if v := a.deployment(t).Spec.Template.Spec.Volumes; len(v) != 1 || v[0].Secret == nil || v[0].Secret.SecretName != "cache-a-tls" {
				t.Errorf("volumes %+v, want Secret cache-a-tls", v)
			}
		}},
		{"sync-auth.json", "sync", func(t *testing.T, raw []byte) {
			a := parseAnswer(t, raw)
			if args := a.container(t, "memcached").Args; !slices.Contains(args, "-S") {
				t.Errorf("memcached args %q: want SASL (-S)", args)
			}
			d := a.condition(t, memcached.ConditionDegraded)
			if d.Status != "True" || d.Reason != string(memcached.ReasonSecretNotUsable) ||
				!strings.Contains(d.Message, `spec.auth.secretName: Secret "cache-a-users" has no users`) || !strings.Contains(d.Message, "cache-a-6f9c8d7b54-q7x2m") {
				t.Errorf("Degraded = %s %s %q, want True SecretNotUsable naming the field, the Secret and the Pod", d.Status, d.Reason, d.Message)
			}
			if av := a.condition(t, memcached.ConditionAvailable); av.Status != "True" {
				t.Errorf("Available = %s %q, want True: the old Pods still serve", av.Status, av.Message)
			}
		}},
		{"finalize.json", "finalize", func(t *testing.T, raw []byte) {
			a := parseAnswer(t, raw)
			if len(a.children) != 0 || a.finalized {
				t.Errorf("children %d, finalized %v: want none, and not finalized while the Deployment is there", len(a.children), a.finalized)
			}
		}},
		{"finalize-done.json", "finalize", func(t *testing.T, raw []byte) {
			if a := parseAnswer(t, raw); len(a.children) != 0 || !a.finalized {
				t.Errorf("children %d, finalized %v: want none, and finalized", len(a.children), a.finalized)
			}
		}},
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) != len(tests) {
		t.Errorf("examples/requests holds %d requests, the walk-through checks %d: %v", len(files), len(tests), err)
	}
	checked := map[string]bool{}
	for _, tt := range tests {
		checked[tt.file] = true
		if hook, ok := walk.requests[tt.file]; !ok {
			t.Errorf("the walk-through does not send %s", tt.file)
		} else if hook != tt.hook {
			t.Errorf("the walk-through sends %s to /%s, want /%s", tt.file, hook, tt.hook)
		}
	}
	for file := range walk.requests {
		if !checked[file] {
			t.Errorf("the walk-through sends %s, which this test does not check", file)
		}
	}
	for _, bad := range walk.inline {
		if _, err := tryHook(bad.hook, []byte(bad.body), fixedNow); err == nil {
			t.Errorf("the walk-through says %s to /%s is refused; the hook answered it", bad.body, bad.hook)
		}
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join(dir, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			raw := callHook(t, tt.hook, body, fixedNow)
			checkAnswer(t, tt.hook, body, raw)
			tt.check(t, raw)
		})
	}
}

// walkthrough is what the curl walk-through sends: the request files, each
// with the hook it goes to, and the bodies written inline, which it says
// are refused.
type walkthrough struct {
	requests map[string]string
	inline   []struct{ body, hook string }
}

// curlWalkthrough reads the first sh block after "## Try it with curl" in
// cmd/memcached-hook/README.md.
func curlWalkthrough(t *testing.T) walkthrough {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testutil.Root(), "cmd", "memcached-hook", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Try it with curl\n")
	if !ok {
		t.Fatal("cmd/memcached-hook/README.md has no section ## Try it with curl")
	}
	_, block, ok := strings.Cut(section, "```sh\n")
	block, _, ok2 := strings.Cut(block, "\n```")
	if !ok || !ok2 {
		t.Fatal("the curl walk-through has no sh block")
	}
	w := walkthrough{requests: map[string]string{}}
	fromFile := regexp.MustCompile(`--data @examples/requests/(\S+) 127\.0\.0\.1:8080/(\w+)$`)
	inline := regexp.MustCompile(`--data '([^']*)' 127\.0\.0\.1:8080/(\w+)$`)
	for _, line := range strings.Split(block, "\n") {
		if !strings.HasPrefix(line, "curl ") {
			continue
		}
		if m := fromFile.FindStringSubmatch(line); m != nil {
			w.requests[m[1]] = m[2]
		} else if m := inline.FindStringSubmatch(line); m != nil {
			w.inline = append(w.inline, struct{ body, hook string }{m[1], m[2]})
		} else {
			t.Errorf("the walk-through's line %q sends no request this test reads", line)
		}
	}
	if len(w.requests) == 0 {
		t.Fatal("the curl walk-through sends no request")
	}
	return w
}

// TestAutoscalingExamples checks the HorizontalPodAutoscalers in
// examples/autoscaling (kept out of examples/*.yaml, which every suite
// reads as Memcached objects): each is an autoscaling/v2 object with no
// unknown field, it scales a Memcached example that keeps the cache warm
// through a scale-up (spec.rollout.keepWarm), by name, and the CRD serves
// the scale subresource it goes through, on spec.size.
func TestAutoscalingExamples(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testutil.Root(), "examples", "autoscaling", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no autoscaling examples: %v", err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name         string `json:"name"`
				Subresources struct {
					Scale *struct {
						SpecReplicasPath  string `json:"specReplicasPath"`
						LabelSelectorPath string `json:"labelSelectorPath"`
					} `json:"scale"`
				} `json:"subresources"`
			} `json:"versions"`
		} `json:"spec"`
	}
	b, err := os.ReadFile(filepath.Join(testutil.Root(), "manifests", "base", "crd", "cache.example.com_memcacheds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	scaled := false
	for _, v := range crd.Spec.Versions {
		if "cache.example.com/"+v.Name == v1alpha1.APIVersion && v.Subresources.Scale != nil {
			scaled = v.Subresources.Scale.SpecReplicasPath == ".spec.size" && v.Subresources.Scale.LabelSelectorPath == ".status.selector"
		}
	}
	if !scaled {
		t.Errorf("the CRD's %s has no scale subresource on .spec.size and .status.selector: %+v", v1alpha1.APIVersion, crd.Spec.Versions)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var hpa autoscalingv2.HorizontalPodAutoscaler
			if err := yaml.UnmarshalStrict(b, &hpa); err != nil {
				t.Fatalf("not a HorizontalPodAutoscaler: %v", err)
			}
			if hpa.APIVersion != "autoscaling/v2" || hpa.Kind != "HorizontalPodAutoscaler" {
				t.Errorf("%s %s, want autoscaling/v2 HorizontalPodAutoscaler", hpa.APIVersion, hpa.Kind)
			}
			ref := hpa.Spec.ScaleTargetRef
			if ref.APIVersion != v1alpha1.APIVersion || ref.Kind != v1alpha1.Kind {
				t.Fatalf("it scales a %s %s, want a %s %s", ref.APIVersion, ref.Kind, v1alpha1.APIVersion, v1alpha1.Kind)
			}
			var target *v1alpha1.Memcached
			examples, _ := filepath.Glob(filepath.Join(testutil.Root(), "examples", "*.yaml"))
			for _, ex := range examples {
				b, err := os.ReadFile(ex)
				if err != nil {
					t.Fatal(err)
				}
				var m v1alpha1.Memcached
				if err := yaml.Unmarshal(b, &m); err == nil && m.Name == ref.Name {
					target = &m
				}
			}
			switch {
			case target == nil:
				t.Errorf("it scales Memcached %s, which no example in examples/ is", ref.Name)
			case target.Spec.Rollout == nil || !target.Spec.Rollout.KeepWarm:
				t.Errorf("it scales Memcached %s, which does not keep the cache warm through a scale-up (spec.rollout.keepWarm)", ref.Name)
			}
			if hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas < 1 || hpa.Spec.MaxReplicas > slots.MaxSlots {
				t.Errorf("minReplicas %v, maxReplicas %d: want from 1 to spec.size's bound %d", hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas, slots.MaxSlots)
			}
		})
	}
}
