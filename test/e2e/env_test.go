package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example/memcached-operator/test/kube"
	"github.com/example/memcached-operator/test/playground"
	"github.com/example/memcached-operator/test/testutil"
)

// env is the system every scenario runs against: one control plane for the
// package, the hook, and the operator installed from manifests/, started by
// test/playground as make up starts it.
type env struct {
	sys  *playground.System
	c    *kube.Cluster
	hook *playground.Hook
	// dir holds the hook's binary and log and the install overlays.
	dir string
	// run counts TestE2E's runs on this system (go test -count=N runs it
	// N times in one process): the namespaces of a later run are named
	// apart from those the earlier ones left.
	run int
}

// Paths, relative to this package's directory.
const (
	manifestsDir      = "../../manifests"
	serviceMonitorDir = "../../manifests/overlays/servicemonitor"
	examplesGlob      = "../../examples/*.yaml"
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

// startEnv does system's work, setting sharedEnv.env as soon as there is
// a hook for stopEnv to stop. The caller holds sharedEnv.mu.
func startEnv(t *testing.T) error {
	kube.RequirePrograms(t, playground.Options)
	dir, err := os.MkdirTemp("", "e2e-")
	if err != nil {
		return err
	}
	sys, opts, err := playground.Prepare(context.Background(), playground.Config{Root: testutil.Root(), Dir: dir, Race: raceEnabled})
	if err != nil {
		return err
	}
	e := &env{sys: sys, hook: sys.Hook, dir: dir}
	sharedEnv.env = e
	e.c = kube.Shared(t, opts)
	sys.Cluster = e.c
	if err := sys.Check(); err != nil {
		return err
	}
	t.Logf("e2e: hook %s (log %s); Metacontroller metrics %s", e.hook.URL(), e.hook.LogPath(), e.c.MetacontrollerMetricsURL())
	return nil
}

// checkHookURLs fails unless every hook of the live CompositeController
// calls the loopback hook.
func (e *env) checkHookURLs() error {
	return playground.CheckHookURLs(e.c, e.hook.URL())
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
	s := testutil.BenchmarkLine("BenchmarkE2E/"+tm.name, "%.2f s", tm.seconds)
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
		testutil.PrintBenchmarkLine(tm.String())
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
	err := e.sys.StopHook()
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
