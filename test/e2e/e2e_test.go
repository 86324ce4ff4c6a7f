// Package e2e runs the operator as a user does: a real control plane on
// loopback (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
// and kwok's fake Nodes, on which Pods become Running and Ready), the real
// Metacontroller, the hook built from this checkout, and manifests/
// installed with kubectl apply -k (only the hook URLs point at the loopback
// hook). Each scenario checks what kubectl shows, and counts hook calls with
// Metacontroller's own metrics.
//
// TestE2E is the package's one test, so that go test -shuffle cannot
// reorder it: its subtests run in this order. Scenarios (independent
// scenarios in parallel, each in its own namespace), then the phases that
// need the system to themselves, one at a time: SteadyState
// (Metacontroller's call counts are cluster-wide, and what the scenarios
// left running counts too), HookOutage (it stops the hook),
// InvalidSpecPastCRD (it loosens the CRD), ServiceMonitorOverlay (it
// changes the CompositeController), and last LoopbackOnly (every process on
// 127.0.0.1 only, once all have run).
//
// To add a scenario that needs nothing but a namespace of its own, write
// a func(s *scenario) and add a row to parallelScenarios; one that changes
// what all share gets a row of its own in exclusivePhases.
package e2e

import (
	"flag"
	"fmt"
	"os"
	"path"
	"strconv"
	"testing"

	"github.com/example/memcached-operator/test/kube"
)

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		// The scenarios wait on the cluster, not on the CPU: run them all
		// at once rather than GOMAXPROCS at a time (two on CI).
		_ = flag.Set("test.parallel", strconv.Itoa(maxParallel))
	}
	code := kube.RunMain(m)
	if err := stopEnv(code != 0); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		code = 1
	}
	printTimings()
	os.Exit(code)
}

// maxParallel is how many scenarios run at once unless -parallel says.
const maxParallel = 32

// parallelScenarios are the scenarios that need only namespaces of their
// own; TestE2E's subtest Scenarios runs them at once.
var parallelScenarios = []struct {
	name string
	run  func(t *testing.T, e *env)
}{
	{"tutorial Memcached converges", inNamespace(testTutorial)},
	{"resize up and down", inNamespace(testResize)},
	{"kubectl scale", inNamespace(testKubectlScale)},
	{"deleted Pod leaves status.nodes", inNamespace(testDeletedPod)},
	{"changed image rolls one Pod at a time", inNamespace(testImageRollout)},
	{"invalid spec leaves children untouched", testInvalidSpecs},
	{"deletion removes every child", inNamespace(testDeletion)},
	{"examples converge", testExamples},
	{"the agent serves the Ready Pods in slot order", inNamespace(testAgentOnLoopback)},
	{"a keepWarm rollout hands each slot to a Ready Pod", inNamespace(testKeepWarmRollout)},
	{"the proxy tier converges and its pool follows the slot table", inNamespace(testProxyOnLoopback)},
	{"stable names follow the slot table in the cluster's EndpointSlices", inNamespace(testStableNames)},
	{"zones: each zone's Deployments land in their zone", inNamespace(testZones)},
	{"extstore: the Pods carry the disk and its request through a scale", inNamespace(testExtstore)},
}

// inNamespace runs a scenario in a namespace of its own.
func inNamespace(f func(s *scenario)) func(t *testing.T, e *env) {
	return func(t *testing.T, e *env) { f(e.newScenario(t, path.Base(t.Name()))) }
}

// exclusivePhases are the phases that need the system to themselves:
// TestE2E runs them one at a time, in this order, once every scenario has
// ended.
var exclusivePhases = []struct {
	name string
	run  func(t *testing.T, e *env)
}{
	// Converged Memcacheds cost nothing: no hook calls beyond
	// Metacontroller's resync, and no writes to their children or to them,
	// counted cluster-wide.
	{"SteadyState", inNamespace(testSteadyState)},
	// The hook, which all Memcacheds share, is down for a while.
	{"HookOutage", inNamespace(testHookOutage)},
	// The CRD, which all Memcacheds share, is loosened for a while.
	{"InvalidSpecPastCRD", inNamespace(testInvalidSpecPastCRD)},
	// The servicemonitor overlay changes the CompositeController
	// (Metacontroller restarts its controller and syncs every Memcached).
	{"ServiceMonitorOverlay", inNamespace(testServiceMonitorOverlay)},
	// Once the others have run, every process of the system (the control
	// plane, kwok, Metacontroller, the hook) listens on 127.0.0.1 only and
	// has no connection elsewhere.
	{"LoopbackOnly", func(t *testing.T, e *env) { checkLoopbackOnly(t, e.sys.PIDs()) }},
}

// TestE2E runs the independent scenarios in parallel (the subtest
// Scenarios, which ends when the last of them does), then each exclusive
// phase alone, in order. One test function holds them all because the
// order matters (SteadyState counts what the scenarios left; LoopbackOnly
// comes last) and go test -shuffle reorders top-level tests, never
// subtests. A phase runs even when one before it failed, as separate tests
// did.
func TestE2E(t *testing.T) {
	e := system(t)
	e.run++
	before := e.metacontrollerCalls(t)
	t.Run("Scenarios", func(t *testing.T) {
		for _, sc := range parallelScenarios {
			t.Run(sc.name, func(t *testing.T) {
				t.Parallel()
				sc.run(t, e)
			})
		}
	})
	t.Logf("hook calls Metacontroller made during the scenarios: %v", e.metacontrollerCalls(t).since(before))
	for _, ph := range exclusivePhases {
		t.Run(ph.name, func(t *testing.T) { ph.run(t, e) })
	}
}
