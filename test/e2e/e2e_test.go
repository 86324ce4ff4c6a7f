// Package e2e runs the operator as a user does: a real control plane on
// loopback (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
// and kwok's fake Nodes, on which Pods become Running and Ready), the real
// Metacontroller, the hook built from this checkout, and manifests/
// installed with kubectl apply -k (only the hook URLs point at the loopback
// hook). Each scenario checks what kubectl shows, and counts hook calls with
// Metacontroller's own metrics.
//
// The tests run in this order: TestScenarios (independent scenarios in
// parallel, each in its own namespace), then the ones that need the system
// to themselves, one at a time: TestSteadyState (Metacontroller's call
// counts are cluster-wide), TestHookOutage (it stops the hook),
// TestInvalidSpecPastCRD (it loosens the CRD), TestServiceMonitorOverlay
// (it changes the CompositeController), and last TestLoopbackOnly (every
// process on 127.0.0.1 only).
//
// To add a scenario that needs nothing but a namespace of its own, write
// a func(s *scenario) and add a row to parallelScenarios; one that changes
// what all share goes in a Test function of its own, below TestScenarios.
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
// own; TestScenarios runs them at once.
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
}

// inNamespace runs a scenario in a namespace of its own.
func inNamespace(f func(s *scenario)) func(t *testing.T, e *env) {
	return func(t *testing.T, e *env) { f(e.newScenario(t, path.Base(t.Name()))) }
}

// TestScenarios runs the independent scenarios in parallel.
func TestScenarios(t *testing.T) {
	e := system(t)
	before := e.metacontrollerCalls(t)
	t.Run("group", func(t *testing.T) {
		for _, sc := range parallelScenarios {
			t.Run(sc.name, func(t *testing.T) {
				t.Parallel()
				sc.run(t, e)
			})
		}
	})
	t.Logf("hook calls Metacontroller made during the scenarios: %v", e.metacontrollerCalls(t).since(before))
}

// TestSteadyState checks that converged Memcacheds cost nothing: no hook
// calls beyond Metacontroller's resync, and no writes to their children
// or to them. It needs the system to itself.
func TestSteadyState(t *testing.T) {
	testSteadyState(system(t).newScenario(t, t.Name()))
}

// TestHookOutage takes the hook down for a while, which all Memcacheds
// share, so it runs alone.
func TestHookOutage(t *testing.T) {
	testHookOutage(system(t).newScenario(t, t.Name()))
}

// TestInvalidSpecPastCRD loosens the CRD for a while, which all
// Memcacheds share, so it runs alone.
func TestInvalidSpecPastCRD(t *testing.T) {
	testInvalidSpecPastCRD(system(t).newScenario(t, t.Name()))
}

// TestServiceMonitorOverlay installs the servicemonitor overlay, which
// changes the CompositeController (Metacontroller restarts its controller
// and syncs every Memcached), so it runs alone.
func TestServiceMonitorOverlay(t *testing.T) {
	testServiceMonitorOverlay(system(t).newScenario(t, t.Name()))
}

// TestLoopbackOnly checks, once the other tests have run, that every
// process of the system (the control plane, kwok, Metacontroller, the
// hook) listens on 127.0.0.1 only and has no connection elsewhere.
func TestLoopbackOnly(t *testing.T) {
	checkLoopbackOnly(t, system(t).sys.PIDs())
}
