package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/example/memcached-operator/test/kube"
)

// metacontrollerCRDs are Metacontroller's CRDs, so that the API server
// knows (and validates) the CompositeController.
const metacontrollerCRDs = "../integration/testdata/metacontroller-crds-v1.yaml"

// TestChartInstallUpgradeUninstall follows the chart's README against a
// real API server: the install commands, then an upgrade whose CRD changed
// (helm upgrade leaves the CRD as it was; the README's kubectl apply
// --server-side --force-conflicts of crds/ updates it), then helm uninstall (the CRD stays,
// and with it every Memcached).
func TestChartInstallUpgradeUninstall(t *testing.T) {
	helm := newHelm(t)
	c := kube.Start(t, kube.Options{})
	kubectl := func(args ...string) string {
		t.Helper()
		stdout, stderr, err := c.Kubectl(args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, stdout, stderr)
		}
		return stdout
	}
	helmRun := func(args ...string) string {
		t.Helper()
		return helm.run(t, append(args, "--kubeconfig", c.Kubeconfig())...)
	}
	const crd = "crd/memcacheds.cache.example.com"
	shortNames := func() []string {
		t.Helper()
		var got struct {
			Spec struct {
				Names struct {
					ShortNames []string `json:"shortNames"`
				} `json:"names"`
			} `json:"spec"`
		}
		if err := json.Unmarshal([]byte(kubectl("get", crd, "-o", "json")), &got); err != nil {
			t.Fatal(err)
		}
		return got.Spec.Names.ShortNames
	}

	kubectl("apply", "--server-side", "-f", metacontrollerCRDs)
	kubectl("wait", "--for=condition=established", "--timeout=60s", "crd/compositecontrollers.metacontroller.k8s.io")

	// The README's install commands.
	kubectl("apply", "-f", "../../manifests/base/hook/namespace.yaml")
	helmRun("install", release, chartDir, "--namespace", namespace)
	kubectl("wait", "--for=condition=established", "--timeout=60s", crd)
	for _, obj := range []string{"compositecontroller/memcached", "clusterrole/memcached-operator:edit", "clusterrole/memcached-operator:view"} {
		kubectl("get", obj)
	}
	for _, obj := range []string{"deployment/memcached-hook", "service/memcached-hook", "serviceaccount/memcached-hook", "poddisruptionbudget/memcached-hook", "networkpolicy/memcached-hook"} {
		kubectl("get", "-n", namespace, obj)
	}
	if got, want := shortNames(), []string{"mc"}; !slices.Equal(got, want) {
		t.Fatalf("installed CRD's shortNames = %q, want %q", got, want)
	}

	// A next version of the chart whose CRD has one more short name.
	next := filepath.Join(t.TempDir(), "memcached-operator")
	if err := os.CopyFS(next, os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	crdFile := filepath.Join(next, "crds", "cache.example.com_memcacheds.yaml")
	data, err := os.ReadFile(crdFile)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(data), "    shortNames:\n    - mc\n", "    shortNames:\n    - mc\n    - mcd\n", 1)
	if changed == string(data) {
		t.Fatal("the CRD file has no shortNames [mc] to change")
	}
	if err := os.WriteFile(crdFile, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}

	helmRun("upgrade", release, next, "--namespace", namespace)
	if got, want := shortNames(), []string{"mc"}; !slices.Equal(got, want) {
		t.Errorf("after helm upgrade the CRD's shortNames = %q, want %q: helm does not upgrade crds/", got, want)
	}
	// Helm created the CRD, so it owns its fields: a plain server-side
	// apply conflicts with it, hence --force-conflicts in the README.
	if _, stderr, err := c.Kubectl("apply", "--server-side", "-f", filepath.Join(next, "crds")); err == nil || !strings.Contains(stderr, `conflict with "helm"`) {
		t.Errorf("kubectl apply --server-side without --force-conflicts: %v, %s; want a conflict with helm (else the README says too much)", err, stderr)
	}
	// The README's upgrade command.
	kubectl("apply", "--server-side", "--force-conflicts", "-f", filepath.Join(next, "crds"))
	if got, want := shortNames(), []string{"mc", "mcd"}; !slices.Equal(got, want) {
		t.Errorf("after kubectl apply --server-side of crds/ the CRD's shortNames = %q, want %q", got, want)
	}
	helmRun("upgrade", release, next, "--namespace", namespace)

	helmRun("uninstall", release, "--namespace", namespace)
	kubectl("get", crd)
	stdout := kubectl("get", "-n", namespace, "deployment", "-o", "name")
	if strings.TrimSpace(stdout) != "" {
		t.Errorf("after helm uninstall: %s", stdout)
	}
	if out := kubectl("get", "compositecontrollers", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Errorf("after helm uninstall: %s", out)
	}
}
