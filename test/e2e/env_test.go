package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/test/kube"
	"github.com/example/memcached-operator/test/testutil"
)

// env is the system every scenario runs against: one control plane for the
// package, the hook, and the operator installed from manifests/.
type env struct {
	c    *kube.Cluster
	hook *hook
	// dir holds the hook's binary and log and the install overlays.
	dir string
}

// The fake Nodes: three zones, every Node a cache Node for the placement
// example, and fake-2 reserved for Pods that tolerate dedicated=cache (the
// placement example's hard zone spread can only be met by putting one of
// its Pods there).
var nodes = []kube.Node{
	{Name: "fake-0", Labels: nodeLabels("zone-a", "m7i.large")},
	{Name: "fake-1", Labels: nodeLabels("zone-b", "m7i.xlarge")},
	{Name: "fake-2", Labels: nodeLabels("zone-c", "m7i.large"),
		Taints: []kube.Taint{{Key: "dedicated", Value: "cache", Effect: "NoSchedule"}}},
}

// nodeLabels are the labels a cloud Node of the placement example's kind
// would carry.
func nodeLabels(zone, instanceType string) map[string]string {
	return map[string]string{
		"topology.kubernetes.io/region":    "e2e",
		"topology.kubernetes.io/zone":      zone,
		"node.kubernetes.io/instance-type": instanceType,
		"node-role.example.com/cache":      "true",
	}
}

// Paths, relative to this package's directory.
const (
	// metacontrollerCRDs are Metacontroller's own CRDs, as its project
	// publishes them (the integration suite's copy).
	metacontrollerCRDs = "../integration/testdata/metacontroller-crds-v1.yaml"
	manifestsDir       = "../../manifests"
	serviceMonitorDir  = "../../manifests/overlays/servicemonitor"
	examplesGlob       = "../../examples/*.yaml"
)

// compositeController is the name of the operator's CompositeController.
const compositeController = "memcached"

// sharedEnv holds the package's env, started by the first test that asks.
var sharedEnv struct {
	mu      sync.Mutex
	started bool
	env     *env
	err     error
}

// system returns the package's env, starting it on first use: the hook is
// built and started while etcd and the API server start; then every CRD and
// the operator (manifests/ with the hook URLs on loopback) are installed,
// and only then the controller manager, the scheduler, kwok and
// Metacontroller start (their discovery would miss CRDs made later). It
// skips t (fails it under CI) when a program is missing.
func system(t *testing.T) *env {
	t.Helper()
	sharedEnv.mu.Lock()
	defer sharedEnv.mu.Unlock()
	if !sharedEnv.started {
		began := time.Now()
		returned := false
		defer func() {
			// t.Fatal in startEnv ends the test here: later tests
			// fail at once. (t.Skip does too, and there later tests
			// check again, and skip too.)
			if !returned && t.Failed() {
				sharedEnv.started, sharedEnv.err = true, errors.New("see the first test's output")
			}
		}()
		sharedEnv.err = startEnv(t)
		returned, sharedEnv.started = true, true
		if sharedEnv.err != nil {
			t.Fatalf("e2e: starting the system: %v", sharedEnv.err)
		}
		record(t, "start/control-plane+hook+install", time.Since(began), "")
	}
	if sharedEnv.err != nil {
		t.Fatalf("e2e: the system failed to start earlier: %v", sharedEnv.err)
	}
	return sharedEnv.env
}

// options are the control plane's, but for Setup.
var options = kube.Options{
	Controllers:    true,
	Nodes:          nodes,
	Metacontroller: true,
	// Metacontroller's API client allows 5 requests a second (burst 10)
	// by default. Every scenario creates Memcacheds at once, and at that
	// rate the figures measured Metacontroller's throttle (create to
	// ready 15 s instead of 3 s), not the operator.
	MetacontrollerArgs: []string{"--client-go-qps=50", "--client-go-burst=100"},
}

// startEnv does system's work, setting sharedEnv.env as soon as there is
// a hook for stopEnv to stop. The caller holds sharedEnv.mu.
func startEnv(t *testing.T) error {
	kube.RequirePrograms(t, options)
	dir, err := os.MkdirTemp("", "e2e-")
	if err != nil {
		return err
	}
	e := &env{dir: dir, hook: &hook{logPath: filepath.Join(dir, "hook.log")}}
	sharedEnv.env = e
	hookReady := make(chan error, 1)
	go func() {
		bin, err := buildHook(dir)
		if err == nil {
			e.hook.bin = bin
			err = e.hook.start("127.0.0.1:0")
		}
		hookReady <- err
	}()
	var hookErr error
	hookWaited := false
	opts := options
	opts.Setup = func(c *kube.Cluster) error {
		if !hookWaited {
			hookErr, hookWaited = <-hookReady, true
		}
		if hookErr != nil {
			return hookErr
		}
		return install(c, e.hook.url(), dir)
	}
	e.c = kube.SharedWith(t, opts)
	if err := e.checkHookURLs(); err != nil {
		return err
	}
	t.Logf("e2e: hook %s (log %s); Metacontroller metrics %s", e.hook.url(), e.hook.logPath, e.c.MetacontrollerMetricsURL())
	return nil
}

// install installs, before any controller runs: Metacontroller's CRDs, a
// stand-in for the ServiceMonitor CRD, and the operator as a user would,
// kubectl apply -k manifests/, through an overlay that only points the
// CompositeController's hooks at the hook on loopback.
func install(c *kube.Cluster, hookURL, dir string) error {
	if _, stderr, err := c.Kubectl("apply", "--server-side", "-f", metacontrollerCRDs); err != nil {
		return fmt.Errorf("applying Metacontroller's CRDs: %v: %s", err, stderr)
	}
	if _, stderr, err := c.KubectlStdin([]byte(testutil.ServiceMonitorCRD), "apply", "-f", "-"); err != nil {
		return fmt.Errorf("applying the ServiceMonitor CRD: %v: %s", err, stderr)
	}
	if _, stderr, err := c.Kubectl("wait", "--for=condition=established", "--timeout=60s",
		"crd/compositecontrollers.metacontroller.k8s.io", "crd/controllerrevisions.metacontroller.k8s.io",
		"crd/servicemonitors.monitoring.coreos.com"); err != nil {
		return fmt.Errorf("waiting for the CRDs: %v: %s", err, stderr)
	}
	if err := applyInstall(c, manifestsDir, hookURL, dir); err != nil {
		return err
	}
	if _, stderr, err := c.Kubectl("wait", "--for=condition=established", "--timeout=60s", "crd/memcacheds.cache.example.com"); err != nil {
		return fmt.Errorf("waiting for the Memcached CRD: %v: %s", err, stderr)
	}
	return nil
}

// applyInstall runs kubectl apply -k on an overlay of target (manifests/
// or one of its overlays) that replaces each hook's Service reference in
// the CompositeController with a URL on the loopback hook, keeping the
// rest (timeout, version) as the manifests say. The overlay is written
// from the rendered target, so a hook added to the manifests is pointed at
// the loopback hook too.
func applyInstall(c *kube.Cluster, target, hookURL, dir string) error {
	rendered, stderr, err := c.Kubectl("kustomize", target)
	if err != nil {
		return fmt.Errorf("kubectl kustomize %s: %v: %s", target, err, stderr)
	}
	var patches []map[string]any
	for doc := range strings.SplitSeq(rendered, "\n---\n") {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				Hooks map[string]struct {
					Webhook struct {
						Service map[string]any `json:"service"`
						Path    string         `json:"path"`
					} `json:"webhook"`
				} `json:"hooks"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return fmt.Errorf("decoding %s as rendered: %v", target, err)
		}
		if obj.Kind != "CompositeController" {
			continue
		}
		var ops []map[string]any
		for _, name := range slices.Sorted(maps.Keys(obj.Spec.Hooks)) {
			h := obj.Spec.Hooks[name]
			if h.Webhook.Service == nil {
				continue
			}
			base := "/spec/hooks/" + name + "/webhook"
			ops = append(ops,
				map[string]any{"op": "remove", "path": base + "/service"},
				map[string]any{"op": "remove", "path": base + "/path"},
				map[string]any{"op": "add", "path": base + "/url", "value": hookURL + h.Webhook.Path},
			)
		}
		patch, err := yaml.Marshal(ops)
		if err != nil {
			return err
		}
		patches = append(patches, map[string]any{
			"target": map[string]any{"group": "metacontroller.k8s.io", "kind": "CompositeController", "name": obj.Metadata.Name},
			"patch":  string(patch),
		})
	}
	if len(patches) == 0 {
		return fmt.Errorf("%s renders no CompositeController", target)
	}
	overlay := filepath.Join(dir, "install", filepath.Base(target))
	if err := os.MkdirAll(overlay, 0o700); err != nil {
		return err
	}
	abs, err := filepath.Abs(target)
	if err != nil {
		return err
	}
	// kustomize takes other kustomizations by relative path only.
	rel, err := filepath.Rel(overlay, abs)
	if err != nil {
		return err
	}
	kustomization, err := yaml.Marshal(map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"resources":  []string{rel},
		"patches":    patches,
	})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), kustomization, 0o600); err != nil {
		return err
	}
	if stdout, stderr, err := c.Kubectl("apply", "-k", overlay); err != nil {
		return fmt.Errorf("kubectl apply -k %s (over %s): %v\n%s%s", overlay, target, err, stdout, stderr)
	}
	return nil
}

// checkHookURLs fails unless every hook of the live CompositeController
// calls the loopback hook: a hook still naming the in-cluster Service
// would fail every call, and the scenarios would fail far from the cause.
func (e *env) checkHookURLs() error {
	cc, err := e.compositeController()
	if err != nil {
		return err
	}
	if len(cc.Spec.Hooks) == 0 {
		return errors.New("the CompositeController has no hooks")
	}
	for name, h := range cc.Spec.Hooks {
		if !strings.HasPrefix(h.Webhook.URL, e.hook.url()+"/") || h.Webhook.Service != nil {
			return fmt.Errorf("the CompositeController's %s hook calls url %q service %v, want %s/...", name, h.Webhook.URL, h.Webhook.Service, e.hook.url())
		}
	}
	return nil
}

// compositeControllerSpec is the part of the live CompositeController the
// scenarios read.
type compositeControllerSpec struct {
	Spec struct {
		ResyncPeriodSeconds *float64 `json:"resyncPeriodSeconds"`
		ChildResources      []struct {
			APIVersion string `json:"apiVersion"`
			Resource   string `json:"resource"`
		} `json:"childResources"`
		Hooks map[string]struct {
			Webhook struct {
				URL     string         `json:"url"`
				Service map[string]any `json:"service"`
			} `json:"webhook"`
		} `json:"hooks"`
	} `json:"spec"`
}

// compositeController reads the live CompositeController.
func (e *env) compositeController() (*compositeControllerSpec, error) {
	stdout, stderr, err := e.c.Kubectl("get", "compositecontroller", compositeController, "-o", "json")
	if err != nil {
		return nil, fmt.Errorf("kubectl get compositecontroller %s: %v: %s", compositeController, err, stderr)
	}
	var cc compositeControllerSpec
	if err := json.Unmarshal([]byte(stdout), &cc); err != nil {
		return nil, err
	}
	return &cc, nil
}

// childResources returns the resources (as kubectl names them:
// deployments.apps, services) of the children the live CompositeController
// manages, so that checks over "every child" cover a kind added later.
func (e *env) childResources(t *testing.T) []string {
	t.Helper()
	cc, err := e.compositeController()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range cc.Spec.ChildResources {
		name := r.Resource
		if group, _, ok := strings.Cut(r.APIVersion, "/"); ok {
			name += "." + group
		}
		out = append(out, name)
	}
	if len(out) == 0 {
		t.Fatal("the CompositeController manages no child resources")
	}
	return out
}

// timing is one figure the suite prints.
type timing struct {
	name    string
	seconds float64
	extra   string
}

// timings collects the figures, printed by TestMain.
var timings struct {
	mu   sync.Mutex
	list []timing
}

// record logs a figure and keeps it for the summary TestMain prints. extra
// is more of the line in benchmark form ("14 sync-calls"), or "".
func record(t *testing.T, name string, d time.Duration, extra string) {
	t.Helper()
	tm := timing{name: name, seconds: d.Seconds(), extra: extra}
	t.Logf("timing: %s", tm)
	timings.mu.Lock()
	defer timings.mu.Unlock()
	timings.list = append(timings.list, tm)
}

// String renders a figure as a line benchstat reads.
func (tm timing) String() string {
	s := fmt.Sprintf("BenchmarkE2E/%s 1 %.2f s", tm.name, tm.seconds)
	if tm.extra != "" {
		s += " " + tm.extra
	}
	return s
}

// printTimings prints every figure, for a regression to be visible run to
// run. They are not assertions: a loaded machine is slower.
func printTimings() {
	timings.mu.Lock()
	defer timings.mu.Unlock()
	if len(timings.list) == 0 {
		return
	}
	fmt.Println("e2e timings (seconds on this machine; figures, not assertions):")
	for _, tm := range timings.list {
		fmt.Println(tm)
	}
}

// stopEnv stops the hook once the tests are done, and returns an error if
// the race-built hook reported a data race. It removes the hook's files
// unless failed or it returns an error.
func stopEnv(failed bool) error {
	sharedEnv.mu.Lock()
	e := sharedEnv.env
	sharedEnv.mu.Unlock()
	if e == nil {
		return nil
	}
	err := e.hook.stop()
	switch {
	case err != nil:
		err = fmt.Errorf("%w (files kept in %s)", err, e.dir)
	case failed:
		fmt.Fprintf(os.Stderr, "e2e: the hook's log and the install overlays are kept in %s\n", e.dir)
	default:
		os.RemoveAll(e.dir)
	}
	return err
}
