// Package chart checks the Helm chart in manifests/helm against the
// kustomize manifests it is generated from (cmd/chartgen): helm template,
// with the values of any valid combination of components, renders the
// objects kubectl kustomize builds for the same components (compared as
// decoded objects, not text), the chart refuses what the components refuse
// together, and helm lint --strict passes.
//
// It runs the helm and kubectl that `make test` builds (HELM_BIN,
// KUBECTL_BIN); without one it skips, or fails when CI is set.
package chart

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/test/testutil"
)

const (
	manifests = "../../manifests"
	chartDir  = "../../manifests/helm/memcached-operator"
	// namespace is the one manifests/ installs into, and so the release's
	// namespace the chart is rendered for when compared with it.
	namespace = "memcached-operator"
	release   = "memcached-operator"
)

// components are manifests/components in the order the overlays apply
// them, each with the chart value that turns it on. This is the test's
// own statement of the contract, not read from the generator.
var components = []struct{ dir, key string }{
	{"prometheusrule", "prometheusRule"},
	{"tls", "tls"},
	{"client-tls", "clientTLS"},
	{"auth-token", "authToken"},
	{"basic-auth", "basicAuth"},
	{"servicemonitor", "serviceMonitor"},
	{"dashboard", "grafanaDashboard"},
}

// valid says whether the hook (and Metacontroller) accept a combination of
// components: client-tls needs tls, and auth-token and basic-auth exclude
// each other.
func valid(on map[string]bool) bool {
	return (!on["client-tls"] || on["tls"]) && !(on["auth-token"] && on["basic-auth"])
}

// TestComponentsAreKnown fails when manifests/components gains or loses a
// component, so that the table above (and the chart) follow.
func TestComponentsAreKnown(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join(manifests, "components"))
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, e := range entries {
		if e.IsDir() {
			got = append(got, e.Name())
		}
	}
	for _, c := range components {
		want = append(want, c.dir)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("manifests/components has %q, the test knows %q: add the new component to the table (and its value to cmd/chartgen)", got, want)
	}
}

// TestChartRendersTheKustomizeBuild compares helm template with kubectl
// kustomize: manifests/ with the default values, each overlay of
// manifests/overlays with the values of its components, every valid
// combination of components, and the hook's image, resources, GOMEMLIMIT
// and Metacontroller's namespace set both ways. The Namespace object is
// left out of the kustomize side: the chart does not make it (it carries
// the Pod Security label, which helm --create-namespace cannot set).
func TestChartRendersTheKustomizeBuild(t *testing.T) {
	helm := newHelm(t)
	kubectl := testutil.Program(t, "KUBECTL_BIN", "kubectl")

	type testCase struct {
		name   string
		target string   // what kubectl kustomize builds
		values []string // helm --set
		file   string   // a values file for helm, if any
	}
	var tests []testCase
	tests = append(tests, testCase{name: "manifests", target: manifests})

	overlays, err := filepath.Glob(filepath.Join(manifests, "overlays", "*", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(overlays) == 0 {
		t.Fatal("no overlays in manifests/overlays")
	}
	for _, f := range overlays {
		dir := filepath.Dir(f)
		var kz struct {
			Components []string `json:"components"`
		}
		readYAML(t, f, &kz)
		tc := testCase{name: "overlays/" + filepath.Base(dir), target: dir}
		for _, c := range kz.Components {
			tc.values = append(tc.values, valueOf(t, filepath.Base(c))+".enabled=true")
		}
		tests = append(tests, tc)
	}

	// Every valid combination, through an overlay listing the components
	// in the table's order.
	work := t.TempDir()
	for mask := 1; mask < 1<<len(components); mask++ {
		on := map[string]bool{}
		var dirs, values []string
		for i, c := range components {
			if mask&(1<<i) != 0 {
				on[c.dir] = true
				dirs = append(dirs, c.dir)
				values = append(values, c.key+".enabled=true")
			}
		}
		if !valid(on) {
			continue
		}
		name := strings.Join(dirs, "+")
		dir := filepath.Join(work, name)
		var comps []string
		for _, d := range dirs {
			comps = append(comps, relTo(t, dir, filepath.Join(manifests, "components", d)))
		}
		writeKustomization(t, dir, map[string]any{
			"resources":  []string{relTo(t, dir, manifests)},
			"components": comps,
		})
		tests = append(tests, testCase{name: "components/" + name, target: dir, values: values})
	}

	// The values that are fields of the base, set to something else.
	dir := filepath.Join(work, "values")
	patch := func(path string, value any) map[string]any {
		return map[string]any{"op": "replace", "path": path, "value": value}
	}
	container := "/spec/template/spec/containers/0"
	ops, err := yaml.Marshal([]any{
		patch(container+"/resources", map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "128Mi"}, "limits": map[string]any{"memory": "1Gi"}}),
		patch(container+"/env/0/value", "920MiB"),
	})
	if err != nil {
		t.Fatal(err)
	}
	npOps, err := yaml.Marshal([]any{patch("/spec/ingress/0/from/0/namespaceSelector/matchLabels/kubernetes.io~1metadata.name", "mc-system")})
	if err != nil {
		t.Fatal(err)
	}
	crbOps, err := yaml.Marshal([]any{patch("/subjects/0/namespace", "mc-system")})
	if err != nil {
		t.Fatal(err)
	}
	// An overlay that moves the image or Metacontroller's namespace must
	// move their copies too, as manifests/README.md says: the agent's
	// image (the base's replacement, done again after this overlay's
	// images) and Metacontroller's ServiceAccount in its ClusterRoleBinding.
	writeKustomization(t, dir, map[string]any{
		"resources": []string{relTo(t, dir, manifests)},
		"images":    []any{map[string]any{"name": "ghcr.io/example/memcached-hook", "newName": "registry.example.com:5000/team/memcached-hook", "newTag": "v1.2.3-rc.1"}},
		"patches": []any{
			map[string]any{"target": map[string]any{"kind": "Deployment", "name": "memcached-hook"}, "patch": string(ops)},
			map[string]any{"target": map[string]any{"kind": "NetworkPolicy", "name": "memcached-hook"}, "patch": string(npOps)},
			map[string]any{"target": map[string]any{"kind": "ClusterRoleBinding", "name": "memcached-operator:metacontroller"}, "patch": string(crbOps)},
		},
		"replacements": agentImageReplacement(t),
	})
	valuesFile := filepath.Join(work, "values.yaml")
	if err := os.WriteFile(valuesFile, []byte(`image:
  repository: registry.example.com:5000/team/memcached-hook
  tag: v1.2.3-rc.1
resources:
  requests:
    cpu: 100m
    memory: 128Mi
  limits:
    memory: 1Gi
goMemLimit: 920MiB
metacontrollerNamespace: mc-system
`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests = append(tests, testCase{name: "image resources goMemLimit metacontrollerNamespace", target: dir, file: valuesFile})

	// monitoringLabels: the label a Prometheus selects rules and monitors
	// by, as an overlay of the prometheusrule component adds it to each;
	// and prometheusNamespace, where the overlay moves the hook's
	// NetworkPolicy's rule for Prometheus.
	dir = filepath.Join(work, "monitoringLabels")
	labelOps, err := yaml.Marshal([]any{map[string]any{"op": "add", "path": "/metadata/labels/release", "value": "kube-prometheus-stack"}})
	if err != nil {
		t.Fatal(err)
	}
	var labelPatches []any
	for _, kind := range []string{"PrometheusRule", "PodMonitor", "ServiceMonitor"} {
		labelPatches = append(labelPatches, map[string]any{"target": map[string]any{"group": "monitoring.coreos.com", "kind": kind}, "patch": string(labelOps)})
	}
	promOps, err := yaml.Marshal([]any{patch("/spec/ingress/1/from/0/namespaceSelector/matchLabels/kubernetes.io~1metadata.name", "prom-system")})
	if err != nil {
		t.Fatal(err)
	}
	writeKustomization(t, dir, map[string]any{
		"resources":  []string{relTo(t, dir, manifests)},
		"components": []string{relTo(t, dir, filepath.Join(manifests, "components", "prometheusrule"))},
		"patches": append(labelPatches,
			map[string]any{"target": map[string]any{"kind": "NetworkPolicy", "name": "memcached-hook"}, "patch": string(promOps)}),
	})
	tests = append(tests, testCase{name: "monitoringLabels prometheusNamespace", target: dir,
		values: []string{"prometheusRule.enabled=true", "monitoringLabels.release=kube-prometheus-stack", "prometheusNamespace=prom-system"}})

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			built := run(t, kubectl, "kustomize", tt.target)
			var want []map[string]any
			for _, o := range decode(t, built) {
				if o["kind"] != "Namespace" {
					want = append(want, o)
				}
			}
			args := []string{"template", release, chartDir, "--namespace", namespace, "--include-crds"}
			for _, v := range tt.values {
				args = append(args, "--set", v)
			}
			if tt.file != "" {
				args = append(args, "--values", tt.file)
			}
			got := decode(t, helm.run(t, args...))
			compare(t, got, want)
		})
	}
}

// TestChartRefusesWhatTheComponentsRefuse checks that values.schema.json
// refuses every combination the hook refuses to start with, and values
// that do not exist.
func TestChartRefusesWhatTheComponentsRefuse(t *testing.T) {
	helm := newHelm(t)
	tests := []struct {
		name    string
		values  []string
		wantErr string
	}{
		{name: "unknown value", values: []string{"tsl.enabled=true"}, wantErr: "'tsl' not allowed"},
		{name: "image without tag", values: []string{"image.tag="}, wantErr: "/image/tag"},
		{name: "bad GOMEMLIMIT", values: []string{"goMemLimit=460M"}, wantErr: "/goMemLimit"},
	}
	n := 0
	for mask := range 1 << len(components) {
		on := map[string]bool{}
		var dirs, values []string
		for i, c := range components {
			if mask&(1<<i) != 0 {
				on[c.dir] = true
				dirs = append(dirs, c.dir)
				values = append(values, c.key+".enabled=true")
			}
		}
		if valid(on) {
			continue
		}
		n++
		wantErr := "/basicAuth/enabled" // must be false
		if !on["tls"] && on["client-tls"] {
			wantErr = "/tls/enabled" // must be true
		}
		tests = append(tests, struct {
			name    string
			values  []string
			wantErr string
		}{name: strings.Join(dirs, "+"), values: values, wantErr: wantErr})
	}
	if n == 0 {
		t.Fatal("no invalid combination of components: is valid() right?")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"template", release, chartDir, "--namespace", namespace}
			for _, v := range tt.values {
				args = append(args, "--set", v)
			}
			stdout, stderr, err := helm.try(args...)
			if err == nil {
				t.Fatalf("helm %s rendered, want a refusal:\n%s", strings.Join(args, " "), stdout)
			}
			if !strings.Contains(stderr, "values don't meet the specifications of the schema") || !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("helm %s: %v, stderr:\n%s\nwant the schema's refusal naming %s", strings.Join(args, " "), err, stderr, tt.wantErr)
			}
		})
	}
}

// TestChartInstallsIntoTheReleaseNamespace renders the chart for another
// namespace: every namespace in it, the objects' and those of the Secrets
// and Service the CompositeController names, is the release's.
func TestChartInstallsIntoTheReleaseNamespace(t *testing.T) {
	helm := newHelm(t)
	const ns = "cache-system"
	out := helm.run(t, "template", release, chartDir, "--namespace", ns,
		"--set", "tls.enabled=true,clientTLS.enabled=true,authToken.enabled=true")
	found := 0
	for _, o := range decode(t, out) {
		if o["kind"] == "ClusterRoleBinding" && name(o) == "memcached-operator:metacontroller" {
			// Binds Metacontroller's ServiceAccount, in Metacontroller's
			// namespace (metacontrollerNamespace), not the release's.
			continue
		}
		walk(o, "", func(key string, v any) {
			if key == "namespace" {
				found++
				if v != ns {
					t.Errorf("%s %s: namespace %v, want the release's, %s", o["kind"], name(o), v, ns)
				}
			}
		})
	}
	if found == 0 {
		t.Error("the chart names no namespace at all")
	}
}

// TestChartLints runs helm lint --strict with the default values and with
// each overlay's.
func TestChartLints(t *testing.T) {
	helm := newHelm(t)
	sets := [][]string{nil}
	overlays, err := filepath.Glob(filepath.Join(manifests, "overlays", "*", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range overlays {
		var kz struct {
			Components []string `json:"components"`
		}
		readYAML(t, f, &kz)
		var set []string
		for _, c := range kz.Components {
			set = append(set, valueOf(t, filepath.Base(c))+".enabled=true")
		}
		sets = append(sets, set)
	}
	for _, set := range sets {
		name := strings.Join(set, ",")
		if name == "" {
			name = "defaults"
		}
		t.Run(name, func(t *testing.T) {
			args := []string{"lint", "--strict", chartDir, "--namespace", namespace}
			if len(set) > 0 {
				args = append(args, "--set", strings.Join(set, ","))
			}
			out := helm.run(t, args...)
			if !strings.Contains(out, "0 chart(s) failed") {
				t.Errorf("helm %s:\n%s", strings.Join(args, " "), out)
			}
		})
	}
}

// compare fails t unless got and want hold the same objects.
func compare(t *testing.T, got, want []map[string]any) {
	t.Helper()
	index := func(objs []map[string]any, side string) map[string]map[string]any {
		m := map[string]map[string]any{}
		for _, o := range objs {
			k := key(o)
			if _, dup := m[k]; dup {
				t.Errorf("%s has %s twice", side, k)
			}
			m[k] = o
		}
		return m
	}
	g, w := index(got, "helm template"), index(want, "kubectl kustomize")
	for _, k := range slices.Sorted(mapKeys(w)) {
		if _, ok := g[k]; !ok {
			t.Errorf("helm template lacks %s", k)
			continue
		}
		if diff := cmp.Diff(w[k], g[k]); diff != "" {
			t.Errorf("%s differs (-kubectl kustomize +helm template):\n%s", k, diff)
		}
	}
	for _, k := range slices.Sorted(mapKeys(g)) {
		if _, ok := w[k]; !ok {
			t.Errorf("helm template has %s, which kubectl kustomize does not build", k)
		}
	}
}

func key(o map[string]any) string {
	meta, _ := o["metadata"].(map[string]any)
	return fmt.Sprintf("%v %v %v/%v", o["apiVersion"], o["kind"], meta["namespace"], meta["name"])
}

func name(o map[string]any) string {
	meta, _ := o["metadata"].(map[string]any)
	return fmt.Sprint(meta["name"])
}

func mapKeys[V any](m map[string]V) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// walk calls f with every map key and its value in v.
func walk(v any, key string, f func(key string, v any)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			f(k, x)
			walk(x, k, f)
		}
	case []any:
		for _, x := range v {
			walk(x, key, f)
		}
	}
}

// decode decodes a stream of YAML documents, skipping empty ones.
func decode(t *testing.T, s string) []map[string]any {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(s)))
	var objs []map[string]any
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatal(err)
		}
		var o map[string]any
		if err := yaml.Unmarshal(doc, &o); err != nil {
			t.Fatalf("decoding %q: %v", doc, err)
		}
		if o != nil {
			objs = append(objs, o)
		}
	}
}

func valueOf(t *testing.T, dir string) string {
	t.Helper()
	for _, c := range components {
		if c.dir == dir {
			return c.key
		}
	}
	t.Fatalf("component %s is not in the test's table", dir)
	return ""
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// writeKustomization writes a kustomization.yaml into dir.
func writeKustomization(t *testing.T, dir string, kz map[string]any) {
	t.Helper()
	kz["apiVersion"] = "kustomize.config.k8s.io/v1beta1"
	kz["kind"] = "Kustomization"
	out, err := yaml.Marshal(kz)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), out, 0o600); err != nil {
		t.Fatal(err)
	}
}

// relTo is target relative to dir: kustomize takes other kustomizations by
// relative path only.
func relTo(t *testing.T, dir, target string) string {
	t.Helper()
	absDir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	absTarget, err := filepath.Abs(target)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(absDir, absTarget)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

// helmCmd runs helm with its configuration, cache and data in a temporary
// directory, so that nothing of the user's (repositories, plugins) counts.
type helmCmd struct {
	path string
	env  []string
}

func newHelm(t *testing.T) helmCmd {
	t.Helper()
	path := testutil.Program(t, "HELM_BIN", "helm")
	home := t.TempDir()
	return helmCmd{path: path, env: append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)}
}

func (h helmCmd) try(args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	cmd := exec.Command(h.path, args...)
	cmd.Env = h.env
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

func (h helmCmd) run(t *testing.T, args ...string) string {
	t.Helper()
	stdout, stderr, err := h.try(args...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout, stderr)
	}
	return stdout
}

// run runs a program and returns its standard output.
func run(t *testing.T, program string, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command(program, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(program), strings.Join(args, " "), err, errOut.String())
	}
	return out.String()
}

// agentImageReplacement is base/kustomization.yaml's replacements: the
// copy of the hook's image into MEMCACHED_HOOK_AGENT_IMAGE.
func agentImageReplacement(t *testing.T) any {
	t.Helper()
	var kz struct {
		Replacements any `json:"replacements"`
	}
	readYAML(t, filepath.Join(manifests, "base", "kustomization.yaml"), &kz)
	if kz.Replacements == nil {
		t.Fatal("base/kustomization.yaml has no replacements")
	}
	return kz.Replacements
}
