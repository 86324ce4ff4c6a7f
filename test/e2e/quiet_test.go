package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/memcached-operator/test/playground"
)

// steadyWindow is how long the steady state is watched. A status or child
// that changes on every sync loops within a second; the window is for
// slower loops.
const steadyWindow = 10 * time.Second

// testSteadyState makes a Memcached converge, waits until Metacontroller
// calls no hook for a while, then watches a window in which nothing may
// happen: no hook call beyond Metacontroller's resync (none unless the
// CompositeController sets resyncPeriodSeconds), and no write to any
// Memcached or any of their children, in every namespace (what earlier
// tests left running counts too).
func testSteadyState(s *scenario) {
	const name = "steady"
	s.create(name, "{size: 3}")
	s.waitConverged(name, 3, "")

	// Settle: earlier tests' last syncs, this one's status write.
	var before hookCalls
	s.poll("Metacontroller to stop calling the hook", convergeTimeout, func() error {
		a := s.metacontrollerCalls(s.t)
		time.Sleep(2 * time.Second)
		before = s.metacontrollerCalls(s.t)
		if d := before.since(a); len(d) > 0 {
			return fmt.Errorf("calls in the last 2s: %v", d)
		}
		return nil
	})
	objects := s.allOwnedObjects()
	time.Sleep(steadyWindow)
	calls := s.metacontrollerCalls(s.t).since(before)
	after := s.allOwnedObjects()

	parents := 0
	for k := range objects {
		if strings.HasPrefix(k, "Memcached/") {
			parents++
		}
	}
	allowed := 0.0
	if cc, err := s.compositeController(); err != nil {
		s.t.Fatal(err)
	} else if p := cc.Spec.ResyncPeriodSeconds; p != nil && *p > 0 {
		allowed = float64(parents) * math.Ceil(steadyWindow.Seconds() / *p)
	}
	got := calls.total("sync") + calls.total("customize") + calls.total("finalize")
	if got > allowed {
		s.t.Errorf("in %s of steady state Metacontroller called the hook %v times (%v), want at most %v (its resync of %d Memcacheds)", steadyWindow, got, calls, allowed, parents)
	}
	if d := diffChildren(objects, after); len(d) > 0 {
		s.t.Errorf("in %s of steady state objects were written, want none: %v", steadyWindow, d)
	}
	s.t.Logf("steady state: %v hook calls and %d writes in %s over %d Memcacheds and %d children", got, len(diffChildren(objects, after)), steadyWindow, parents, len(objects)-parents)
}

// allOwnedObjects lists, in every namespace, the Memcacheds and the
// objects of the kinds the CompositeController manages that a Memcached
// owns, keyed "Kind/namespace/name".
func (s *scenario) allOwnedObjects() map[string]child {
	s.t.Helper()
	var list struct {
		Items []metav1.PartialObjectMetadata `json:"items"`
	}
	out := s.env.kubectl(s.t, nil, "get", strings.Join(append([]string{"memcacheds.cache.example.com"}, s.childResources(s.t)...), ","), "-A", "-o", "json")
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		s.t.Fatal(err)
	}
	objs := map[string]child{}
	for _, o := range list.Items {
		owned := o.Kind == "Memcached"
		for _, ref := range o.OwnerReferences {
			owned = owned || ref.Kind == "Memcached"
		}
		if owned {
			objs[o.Kind+"/"+o.Namespace+"/"+o.Name] = child{string(o.UID), o.ResourceVersion, o.Generation}
		}
	}
	return objs
}

// hookOutage is how long the hook stays down: long enough for changes to
// pile up and Metacontroller to retry several times.
const hookOutage = 8 * time.Second

// testHookOutage stops the hook, makes changes it would act on (a resize,
// a deleted Pod), checks that nothing of the Memcached's is deleted or
// changed meanwhile and that the user is told (SyncError events), then
// starts the hook again on the same address and waits for convergence.
func testHookOutage(s *scenario) {
	const name = "outage"
	s.create(name, "{size: 2}")
	obs, _ := s.waitConverged(name, 2, "")
	uid := string(obs.mc.Metadata.UID)
	before := s.stableChildren(uid)
	victim := obs.pods[0].Name
	addr := s.hook.Address()

	if err := s.hook.Stop(); err != nil {
		s.t.Fatal(err)
	}
	down := time.Now()
	// Counted once the hook is down: a call answered just before it went
	// down is not one answered while it was.
	calls := s.metacontrollerCalls(s.t)
	s.t.Cleanup(func() {
		// Leave the hook running for the tests after this one.
		if !s.hookRunning() {
			if err := s.hook.Start(addr); err != nil {
				s.t.Errorf("restarting the hook: %v", err)
			}
		}
	})
	s.patchSpec(name, `{"size":3}`)
	s.kubectl("delete", "pod", victim)

	// Meanwhile: nothing of the Memcached's is deleted or replaced (but the
	// Pod deleted on purpose), no spec is written (the Deployment keeps
	// its generation and 2 replicas), and the status does not move.
	problems := map[string]bool{}
	for time.Since(down) < hookOutage {
		now := s.children(uid)
		for k, c := range before {
			if k == "Pod/"+victim {
				continue
			}
			if n, ok := now[k]; !ok || n.UID != c.UID {
				s.t.Fatalf("with the hook down, %s was deleted or replaced", k)
			} else if n.Generation != c.Generation {
				problems[fmt.Sprintf("the spec of %s was written (generation %d -> %d)", k, c.Generation, n.Generation)] = true
			}
		}
		var m memcached
		s.getJSON(&m, "memcached", name)
		if m.Status.ObservedGeneration != obs.mc.Status.ObservedGeneration {
			problems[fmt.Sprintf("status.observedGeneration moved from %d to %d", obs.mc.Status.ObservedGeneration, m.Status.ObservedGeneration)] = true
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, p := range slices.Sorted(maps.Keys(problems)) {
		s.t.Errorf("with the hook down, %s", p)
	}
	if r := s.kubectl("get", "deployment", name, "-o", "jsonpath={.spec.replicas}"); r != "2" {
		s.t.Errorf("with the hook down, deployment %s has %s replicas, want the 2 it had", name, r)
	}
	// Metacontroller records its events in the background: wait for the
	// one that tells the user, the hook still down.
	var events struct {
		Items []struct {
			Reason  string `json:"reason"`
			Message string `json:"message"`
		} `json:"items"`
	}
	s.poll("with the hook down, a SyncError event on memcached "+name+" telling the user", convergeTimeout, func() error {
		s.getJSON(&events, "events", "--field-selector", "involvedObject.kind=Memcached,involvedObject.name="+name+",reason=SyncError")
		if len(events.Items) == 0 {
			return fmt.Errorf("no SyncError event")
		}
		return nil
	})
	s.t.Logf("SyncError event: %s", events.Items[0].Message)
	if d := s.metacontrollerCalls(s.t).since(calls); d.total("sync") > 0 {
		s.t.Errorf("with the hook down Metacontroller counted answered sync calls %v, want none", d)
	}

	if err := s.hook.Start(addr); err != nil {
		s.t.Fatalf("starting the hook again on %s: %v", addr, err)
	}
	back := time.Now()
	_, at := s.waitFor("memcached", name, "convergence to size 3 after the hook came back", convergeTimeout, func(b []byte) error {
		m, err := decodeMemcached(b)
		if err != nil {
			return err
		}
		if slices.Contains(m.Status.Nodes, victim) {
			return fmt.Errorf("status.nodes %v still names the Pod %s deleted during the outage", m.Status.Nodes, victim)
		}
		_, err = s.converged(m, 3, "")
		return err
	})
	record(s.t, fmt.Sprintf("hook-back-to-status-right/after-%s-down", hookOutage), at.Sub(back), s.callsSince(back))
	if d := s.metacontrollerCalls(s.t).since(calls); d["sync 200"] == 0 {
		s.t.Errorf("after the hook came back Metacontroller counted no answered sync call: %v", d)
	}
}

// hookRunning tells whether the hook process runs.
func (s *scenario) hookRunning() bool { return s.hook.Running() }

// memcachedCRD is the operator's CRD's name.
const memcachedCRD = "crd/memcacheds.cache.example.com"

// testInvalidSpecPastCRD gives a running Memcached spec.size 1001, which
// the CRD refuses (at most 1000), past a CRD without validation of spec (an
// older CRD, or validation bypassed): the hook must leave the children as
// they are and say why. The CRD is put back as installed afterwards.
//
// (Not size -1, as the README's curl example has it: the API server
// refuses a negative spec.size for any CRD whose scale subresource reads
// it, schema or not, so -1 never reaches the hook in a cluster.)
func testInvalidSpecPastCRD(s *scenario) {
	const name = "past-crd"
	s.create(name, "{size: 2}")
	obs, _ := s.waitConverged(name, 2, "")

	original := s.env.kubectl(s.t, nil, "get", memcachedCRD, "-o", "json")
	restore := func() {
		b := stripForReplace(s, original)
		s.env.kubectl(s.t, b, "replace", "-f", "-")
		s.poll("the CRD to refuse size 1001 again", 30*time.Second, func() error {
			_, _, err := s.c.KubectlStdin([]byte(memcachedYAML("probe", "{size: 1001}")), "create", "--dry-run=server", "-n", s.ns, "-f", "-")
			if err == nil {
				return fmt.Errorf("size 1001 still accepted")
			}
			return nil
		})
	}
	restored := false
	s.t.Cleanup(func() {
		if !restored {
			restore()
		}
	})
	s.env.kubectl(s.t, loosenCRD(s, original), "replace", "-f", "-")
	s.checkInvalidLeavesChildren(obs, func() {
		s.poll("the loosened CRD to accept size 1001", 30*time.Second, func() error {
			_, stderr, err := s.c.Kubectl("patch", "memcached", name, "-n", s.ns, "--type=merge", "-p", `{"spec":{"size":1001}}`)
			if err != nil {
				return fmt.Errorf("%v: %s", err, stderr)
			}
			return nil
		})
	}, "spec.size")
	restore()
	restored = true
	began := s.patchSpec(name, `{"size":3}`)
	_, at := s.waitConverged(name, 3, "")
	record(s.t, "invalid-spec-fixed-to-ready/past-crd-size-1001-to-3", at.Sub(began), s.callsSince(began))
}

// loosenCRD returns the CRD with every validation of spec taken away
// (spec: any object), ready for kubectl replace.
func loosenCRD(s *scenario, crdJSON string) []byte {
	s.t.Helper()
	var crd map[string]any
	if err := json.Unmarshal([]byte(crdJSON), &crd); err != nil {
		s.t.Fatal(err)
	}
	versions, _ := crd["spec"].(map[string]any)["versions"].([]any)
	for _, v := range versions {
		schema := v.(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)
		schema["properties"].(map[string]any)["spec"] = map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
		delete(schema, "x-kubernetes-validations")
	}
	b, err := json.Marshal(crd)
	if err != nil {
		s.t.Fatal(err)
	}
	return stripForReplace(s, string(b))
}

// stripForReplace drops the server-set fields that would stop kubectl
// replace (resourceVersion) or are not the user's (status).
func stripForReplace(s *scenario, objJSON string) []byte {
	s.t.Helper()
	var obj map[string]any
	if err := json.Unmarshal([]byte(objJSON), &obj); err != nil {
		s.t.Fatal(err)
	}
	delete(obj["metadata"].(map[string]any), "resourceVersion")
	delete(obj, "status")
	b, err := json.Marshal(obj)
	if err != nil {
		s.t.Fatal(err)
	}
	return b
}

// testServiceMonitorOverlay installs manifests/overlays/servicemonitor (with
// the ServiceMonitor CRD present, as that overlay requires) and checks the
// servicemonitor example converges with its ServiceMonitor, and that
// deleting it removes the ServiceMonitor too. The base install is put back
// afterwards.
func testServiceMonitorOverlay(s *scenario) {
	if err := playground.ApplyInstall(s.c, serviceMonitorDir, s.hook.URL(), s.dir); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() {
		if err := playground.ApplyInstall(s.c, manifestsDir, s.hook.URL(), s.dir); err != nil {
			s.t.Errorf("putting the base install back: %v", err)
		}
	})
	if err := s.checkHookURLs(); err != nil {
		s.t.Fatal(err)
	}
	if !slices.Contains(s.childResources(s.t), "servicemonitors.monitoring.coreos.com") {
		s.t.Fatalf("with the servicemonitor overlay the CompositeController manages %v, want servicemonitors too", s.childResources(s.t))
	}
	path := filepath.Join(filepath.Dir(examplesGlob), "memcached-servicemonitor.yaml")
	ex := readExample(s.t, path)
	s.checkExample(path, ex)
	var m memcached
	s.getJSON(&m, "memcached", ex.Metadata.Name)
	children := s.children(string(m.Metadata.UID))
	s.requireKinds(children, "Deployment", "Service", "ServiceMonitor")
	s.checkDeletionRemovesAll(ex.Metadata.Name)
}
