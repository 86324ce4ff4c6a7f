package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/test/testutil"
)

// callsSince says how many hook calls the hook logged for the namespace
// since a time, in benchmark form for a timing line.
func (s *scenario) callsSince(since time.Time) string {
	n := s.hook.CallsIn(s.ns, since)
	return fmt.Sprintf("%d sync-calls %d customize-calls", n["sync"], n["customize"])
}

// stableChildren returns the Memcached's children once two listings a
// second apart agree, so that a later comparison sees only what changed
// after it (the Deployment controller may still write a status just after
// convergence).
func (s *scenario) stableChildren(uid string) map[string]child {
	s.t.Helper()
	prev := s.children(uid)
	var got map[string]child
	s.poll("the children to stop changing", 30*time.Second, func() error {
		time.Sleep(time.Second)
		got = s.children(uid)
		if d := diffChildren(prev, got); len(d) > 0 {
			prev = got
			return fmt.Errorf("still changing: %v", d)
		}
		return nil
	})
	return got
}

// diffChildren lists what differs between two listings of children.
func diffChildren(before, after map[string]child) []string {
	var d []string
	for k, b := range before {
		switch a, ok := after[k]; {
		case !ok:
			d = append(d, k+" deleted")
		case a.UID != b.UID:
			d = append(d, k+" replaced")
		case a.ResourceVersion != b.ResourceVersion:
			d = append(d, fmt.Sprintf("%s written (resourceVersion %s -> %s)", k, b.ResourceVersion, a.ResourceVersion))
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			d = append(d, k+" created")
		}
	}
	sort.Strings(d)
	return d
}

// requireKinds fails unless children holds an object of every kind named.
func (s *scenario) requireKinds(children map[string]child, kinds ...string) {
	s.t.Helper()
	for _, k := range kinds {
		found := false
		for key := range children {
			if strings.HasPrefix(key, k+"/") {
				found = true
			}
		}
		if !found {
			s.t.Errorf("no %s among the Memcached's children %v", k, slices.Sorted(maps.Keys(children)))
		}
	}
}

// testTutorial applies the operator-sdk tutorial's Memcached (spec.size 3,
// nothing else) as the README says, and checks it converges: Deployment
// ready, status.nodes the Pod names, conditions right, observedGeneration
// current, and the headless Service and PodDisruptionBudget made.
func testTutorial(s *scenario) {
	began := time.Now()
	s.kubectl("apply", "-f", filepath.Join(filepath.Dir(examplesGlob), "memcached-sample.yaml"))
	obs, at := s.waitConverged("memcached-sample", 3, "")
	record(s.t, "create-to-ready/tutorial-size-3", at.Sub(began), s.callsSince(began))

	children := s.children(string(obs.mc.Metadata.UID))
	s.requireKinds(children, "Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy", "ReplicaSet", "Pod")
	s.checkNetworkPolicy("memcached-sample", obs)
	if got := s.kubectl("get", "service", "memcached-sample", "-o", "jsonpath={.spec.clusterIP}"); got != "None" {
		s.t.Errorf("service memcached-sample has clusterIP %q, want None (headless: one DNS record per Pod)", got)
	}
	s.t.Logf("kubectl get mc:\n%s", s.kubectl("get", "mc"))
}

// testResize grows a Memcached and shrinks it, timing each resize from
// the user's command to a status that says it is done.
func testResize(s *scenario) {
	const name = "resize"
	began := s.create(name, "{size: 2}")
	_, at := s.waitConverged(name, 2, "")
	record(s.t, "create-to-ready/size-2", at.Sub(began), s.callsSince(began))

	for _, step := range []struct{ from, to int32 }{{2, 5}, {5, 1}} {
		began := s.patchSpec(name, fmt.Sprintf(`{"size":%d}`, step.to))
		obs, at := s.waitConverged(name, step.to, "")
		record(s.t, fmt.Sprintf("resize-to-status-right/%d-to-%d", step.from, step.to), at.Sub(began), s.callsSince(began))
		children := s.children(string(obs.mc.Metadata.UID))
		_, hasPDB := children["PodDisruptionBudget/"+name]
		if wantPDB := step.to > 1; hasPDB != wantPDB {
			s.t.Errorf("at size %d the PodDisruptionBudget exists: %v, want %v (README: one when size > 1)", step.to, hasPDB, wantPDB)
		}
	}
}

// testKubectlScale scales a Memcached with kubectl scale, through the scale
// subresource, as a user or a HorizontalPodAutoscaler would.
func testKubectlScale(s *scenario) {
	const name = "scaled"
	s.create(name, "{size: 1}")
	s.waitConverged(name, 1, "")

	began := time.Now()
	s.kubectl("scale", "memcached/"+name, "--replicas=4")
	obs, at := s.waitConverged(name, 4, "")
	record(s.t, "resize-to-status-right/kubectl-scale-1-to-4", at.Sub(began), s.callsSince(began))

	s.checkScale(name, 4, "", obs.mc.Status.Selector)
}

// testExtstore makes a Memcached with spec.extstore and scales it with
// kubectl: every Pod the API server holds, before and after, has the
// extstore emptyDir of the size asked, mounted in memcached, and an
// ephemeral-storage request of as much, and the status says the file's
// size.
func testExtstore(s *scenario) {
	const name = "extstore"
	s.create(name, "{size: 2, extstore: {size: 2Gi, expectedItemSize: 65536}}")
	obs, _ := s.waitConverged(name, 2, "")
	s.checkExtstorePods(obs)
	if st := obs.mc.Status.Extstore; st == nil || st.FileMB != 31*64 {
		s.t.Errorf("status.extstore %+v, want a file of %d MiB", st, 31*64)
	}
	s.kubectl("scale", "memcached/"+name, "--replicas=3")
	obs, _ = s.waitConverged(name, 3, "")
	s.checkExtstorePods(obs)
}

// checkExtstorePods checks each Pod for the extstore disk of 2Gi.
func (s *scenario) checkExtstorePods(obs *observed) {
	s.t.Helper()
	for _, p := range obs.pods {
		var disk, mounted bool
		for _, v := range p.Spec.Volumes {
			disk = disk || (v.Name == "extstore" && v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil && v.EmptyDir.SizeLimit.String() == "2Gi")
		}
		c := p.Spec.Containers[0]
		for _, m := range c.VolumeMounts {
			mounted = mounted || m.Name == "extstore"
		}
		req := c.Resources.Requests[corev1.ResourceEphemeralStorage]
		if !disk || !mounted || req.String() != "2Gi" {
			s.t.Errorf("Pod %s: extstore emptyDir of 2Gi %v, mounted in %s %v, ephemeral-storage request %s (want 2Gi)", p.Name, disk, c.Name, mounted, req.String())
		}
	}
}

// testDeletedPod deletes one of a Memcached's Pods: the ReplicaSet
// replaces it, and status.nodes drops its name for the new one while the
// deleted Pod is still Terminating, and stays right once it is gone.
func testDeletedPod(s *scenario) {
	const name = "pod-deleted"
	s.create(name, "{size: 3}")
	obs, _ := s.waitConverged(name, 3, "")
	victim := obs.pods[0].Name

	// A finalizer of the test's own holds the Pod Terminating, as a
	// kubelet does for its grace period (the preStop sleep), so that what
	// is checked is a status without a Pod that is still there.
	const hold = `{"metadata":{"finalizers":["e2e.example.com/hold"]}}`
	s.kubectl("patch", "pod", victim, "--type=merge", "-p", hold)
	release := func() {
		s.c.Kubectl("patch", "pod", victim, "-n", s.ns, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
	}
	s.t.Cleanup(release)
	began := time.Now()
	s.kubectl("delete", "pod", victim, "--wait=false")
	_, at := s.waitFor("memcached", name, "status.nodes without the deleted Pod "+victim, convergeTimeout, func(b []byte) error {
		m, err := decodeMemcached(b)
		if err != nil {
			return err
		}
		if slices.Contains(m.Status.Nodes, victim) {
			return fmt.Errorf("status.nodes %v still names the deleted Pod %s", m.Status.Nodes, victim)
		}
		_, err = s.converged(m, 3, "")
		return err
	})
	record(s.t, "pod-deleted-to-status-right/size-3", at.Sub(began), s.callsSince(began))
	if ts := s.kubectl("get", "pod", victim, "-o", "jsonpath={.metadata.deletionTimestamp}"); ts == "" {
		s.t.Errorf("pod %s is not Terminating: the check above did not see a terminating Pod", victim)
	}

	release()
	s.poll("the deleted Pod gone once its finalizer is", convergeTimeout, func() error {
		out, stderr, err := s.c.Kubectl("get", "pod", victim, "-n", s.ns, "--ignore-not-found", "-o", "name")
		if err != nil {
			return fmt.Errorf("kubectl get pod %s: %v: %s", victim, err, stderr)
		}
		if out != "" {
			return fmt.Errorf("%s is still there", strings.TrimSpace(out))
		}
		return nil
	})
	var m memcached
	s.getJSON(&m, "memcached", name)
	if slices.Contains(m.Status.Nodes, victim) {
		s.t.Errorf("status.nodes %v names the deleted Pod %s", m.Status.Nodes, victim)
	}
}

// rolloutImage is the image a rollout moves to. It exists in name only:
// kwok runs no container.
const rolloutImage = "registry.example.invalid/memcached:1.6.45-e2e"

// testImageRollout changes a Memcached's image and follows every Pod
// change while it rolls (kubectl get pods --watch, which unlike polling
// misses no state): never more than size+1 Pods that are not terminating,
// never fewer than size of them Ready (maxSurge 1, maxUnavailable 0), until
// every Pod runs the new image. Terminating Pods are left out, as the
// Deployment controller leaves them out: on a real node they linger for
// the preStop sleep while the next Pod starts. (kwok removes them at once;
// the most Pods seen at once, terminating ones too, is logged.)
func testImageRollout(s *scenario) {
	const name = "rollout"
	const size = 3
	s.create(name, fmt.Sprintf("{size: %d}", size))
	obs, _ := s.waitConverged(name, size, "")
	before := obs.mc.Status.Nodes

	events, stop := s.watch("pods", "-l", obs.mc.Status.Selector)
	defer stop()
	pods := map[string]*corev1.Pod{}
	apply := func(ev watchEvent) {
		var p corev1.Pod
		if err := json.Unmarshal(ev.Object, &p); err != nil {
			s.t.Fatalf("decoding a Pod from kubectl get pods --watch: %v", err)
		}
		if ev.Type == "DELETED" {
			delete(pods, p.Name)
		} else {
			pods[p.Name] = &p
		}
	}
	timeout := time.After(convergeTimeout)
	next := func() watchEvent {
		select {
		case ev, ok := <-events:
			if !ok {
				s.t.Fatalf("kubectl get pods --watch ended during the rollout: %s", stop())
			}
			return ev
		case <-timeout:
			s.t.Fatalf("the rollout did not end within %s; Pods: %s", convergeTimeout, describePods(pods))
		}
		return watchEvent{}
	}
	// kubectl prints the Pods as they are first: wait for all of them.
	for !slices.Equal(slices.Sorted(maps.Keys(pods)), before) {
		apply(next())
	}

	began := s.patchSpec(name, fmt.Sprintf(`{"image":%q}`, rolloutImage))
	var violations []string
	maxAll, maxLive, minReady := len(pods), len(pods), size
	for {
		apply(next())
		live, ready, oldLeft := 0, 0, 0
		for _, p := range pods {
			if containerImage(p.Spec) != rolloutImage {
				oldLeft++
			}
			if p.DeletionTimestamp != nil {
				continue
			}
			live++
			if podReady(p) {
				ready++
			}
		}
		maxAll, maxLive, minReady = max(maxAll, len(pods)), max(maxLive, live), min(minReady, ready)
		if live > size+1 || ready < size {
			violations = append(violations, fmt.Sprintf("%d Pods not terminating, %d of them Ready: %s", live, ready, describePods(pods)))
		}
		if oldLeft == 0 && live == size && ready == size {
			break
		}
	}
	stop()
	obs, at := s.waitConverged(name, size, rolloutImage)
	record(s.t, "image-rollout-to-status-right/size-3", at.Sub(began), s.callsSince(began))
	s.t.Logf("during the rollout: at most %d Pods (%d not terminating), at least %d Ready", maxAll, maxLive, minReady)
	if len(violations) > 0 {
		s.t.Errorf("the rollout broke maxSurge 1 / maxUnavailable 0 (want at most %d Pods not terminating, at least %d Ready) %d times; first: %s",
			size+1, size, len(violations), violations[0])
	}
	for _, p := range obs.pods {
		if slices.Contains(before, p.Name) {
			s.t.Errorf("Pod %s from before the rollout still runs", p.Name)
		}
	}
}

// describePods renders Pods for a failure message: name, image, ready,
// terminating.
func describePods(pods map[string]*corev1.Pod) string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(pods)) {
		p := pods[name]
		state := "not-ready"
		if podReady(p) {
			state = "ready"
		}
		if p.DeletionTimestamp != nil {
			state += ",terminating"
		}
		out = append(out, fmt.Sprintf("%s(%s %s)", name, containerImage(p.Spec), state))
	}
	return strings.Join(out, " ")
}

// invalidSpecs are mistakes the CRD lets through and only the hook sees
// (the API server would refuse them in the children). Each comes with a
// size change, which must not be applied either.
var invalidSpecs = []struct {
	name  string
	slug  string // for the timing line
	patch string // merged into the spec
	fix   string // merged into the spec to make it valid again
	field string // what the Degraded message must name
}{
	{
		name:  "pod label value with a space",
		slug:  "pod-label",
		patch: `{"size":3,"podLabels":{"team":"payments oncall"}}`,
		fix:   `{"podLabels":null}`,
		field: "spec.podLabels",
	},
	{
		name:  "toleration operator",
		slug:  "toleration",
		patch: `{"size":3,"tolerations":[{"key":"dedicated","operator":"Sometimes","value":"cache","effect":"NoSchedule"}]}`,
		fix:   `{"tolerations":null}`,
		field: "spec.tolerations[0].operator",
	},
}

// testInvalidSpecs gives running Memcacheds specs only the hook can tell
// are invalid, each in a namespace of its own: its children stay exactly
// as they were (not one write), its status says Degraded, InvalidSpec,
// naming the field, and fixing the spec converges it.
func testInvalidSpecs(t *testing.T, e *env) {
	for _, tc := range invalidSpecs {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := e.newScenario(t, "invalid-"+tc.slug)
			const name = "invalid"
			s.create(name, "{size: 2}")
			obs, _ := s.waitConverged(name, 2, "")
			s.checkInvalidLeavesChildren(obs, func() { s.patchSpec(name, tc.patch) }, tc.field)
			began := s.patchSpec(name, tc.fix)
			_, at := s.waitConverged(name, 3, "")
			record(t, "invalid-spec-fixed-to-ready/"+tc.slug+"-size-2-to-3", at.Sub(began), s.callsSince(began))
		})
	}
}

// checkInvalidLeavesChildren makes a converged Memcached's spec invalid
// with makeInvalid and checks what a user sees: status for the new generation
// with Degraded=True/InvalidSpec naming field and Progressing=False/
// InvalidSpec, the Pods still counted as they run, and no child written,
// replaced, deleted or added.
func (s *scenario) checkInvalidLeavesChildren(obs *observed, makeInvalid func(), field string) {
	s.t.Helper()
	name := obs.mc.Metadata.Name
	uid := string(obs.mc.Metadata.UID)
	size := *obs.deployment.Spec.Replicas
	before := s.stableChildren(uid)

	makeInvalid()
	b, _ := s.waitFor("memcached", name, "status saying the spec is invalid", convergeTimeout, func(b []byte) error {
		m, err := decodeMemcached(b)
		if err != nil {
			return err
		}
		if m.Status.ObservedGeneration != m.Metadata.Generation {
			return fmt.Errorf("status.observedGeneration %d, want %d", m.Status.ObservedGeneration, m.Metadata.Generation)
		}
		return checkConditions(m, []wantCondition{{degraded, "True", "InvalidSpec"}, {progressing, "False", "InvalidSpec"}, {available, "True", "EnoughPodsReady"}})
	})
	m, _ := decodeMemcached(b)
	if msg := m.condition(degraded).Message; !strings.Contains(msg, field) {
		s.t.Errorf("the Degraded message %q does not name %s", msg, field)
	}
	if len(m.Status.Nodes) != int(size) || m.Status.ReadyReplicas != size {
		s.t.Errorf("with the spec invalid, status has nodes %v and readyReplicas %d, want the %d Pods that still run", m.Status.Nodes, m.Status.ReadyReplicas, size)
	}
	// Compare once Metacontroller has acted on the hook's answers: to the
	// sync that wrote this status, and to the sync that status write
	// causes. Metacontroller syncs a Memcached one sync at a time and
	// writes the children before the status in each, so the first is done;
	// the second is done once a third has begun. An annotation on the
	// Memcached, which the hook copies nowhere, causes that third sync
	// once the second has called the hook.
	gen := m.Metadata.Generation
	syncs := func(n int) func() error {
		return func() error {
			if got := s.syncCallsAt(name, gen); got < n {
				return fmt.Errorf("%d sync calls at generation %d, want %d", got, gen, n)
			}
			return nil
		}
	}
	s.poll("the hook to answer twice for the invalid spec", convergeTimeout, syncs(2))
	s.kubectl("annotate", "memcached", name, "--overwrite", "e2e.example.com/mark=after-the-invalid-spec")
	s.poll("the hook to answer a third time, for the annotation", convergeTimeout, syncs(3))
	if d := diffChildren(before, s.children(uid)); len(d) > 0 {
		s.t.Errorf("with an invalid spec the children changed, want them untouched: %v", d)
	}
}

// syncCallsAt counts the sync calls the hook logged for the Memcached name
// of the scenario's namespace at metadata.generation gen.
func (s *scenario) syncCallsAt(name string, gen int64) int {
	n := 0
	for line := range strings.Lines(s.hook.LogLinesFor(s.ns)) {
		var c struct {
			Msg        string `json:"msg"`
			Hook       string `json:"hook"`
			Name       string `json:"name"`
			Generation int64  `json:"generation"`
		}
		if json.Unmarshal([]byte(line), &c) == nil && c.Msg == "hook call" && c.Hook == "sync" && c.Name == name && c.Generation == gen {
			n++
		}
	}
	return n
}

// testDeletion deletes a Memcached and waits until every child is gone:
// every kind the CompositeController manages, and the ReplicaSets and
// Pods, collected through their owners (there is no finalize hook).
func testDeletion(s *scenario) {
	const name = "deleted"
	s.create(name, "{size: 3}")
	obs, _ := s.waitConverged(name, 3, "")
	children := s.stableChildren(string(obs.mc.Metadata.UID))
	s.requireKinds(children, "Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy", "ReplicaSet", "Pod")
	s.t.Logf("children before the deletion: %v", slices.Sorted(maps.Keys(children)))
	s.checkDeletionRemovesAll(name)
}

// checkDeletionRemovesAll deletes the Memcached name, the only one in the
// namespace, and waits until no object of a child kind is left there.
func (s *scenario) checkDeletionRemovesAll(name string) {
	s.t.Helper()
	began := time.Now()
	s.kubectl("delete", "memcached", name)
	kinds := strings.Join(append(s.childResources(s.t), "replicasets.apps", "pods"), ",")
	s.poll("every child gone after kubectl delete memcached "+name, convergeTimeout, func() error {
		out, stderr, err := s.c.Kubectl("get", kinds, "-n", s.ns, "-o", "name")
		if err != nil {
			return fmt.Errorf("kubectl get %s: %v: %s", kinds, err, stderr)
		}
		left := slices.DeleteFunc(strings.Fields(out), func(o string) bool { return namespaceDefaults[o] })
		if len(left) > 0 {
			return fmt.Errorf("left: %v", left)
		}
		return nil
	})
	record(s.t, "delete-to-children-gone/"+name, time.Since(began), "")
}

// namespaceDefaults are objects of child kinds that every namespace holds,
// made by the controller manager (the ServiceAccount default, the root CA
// publisher's ConfigMap), not by the operator.
var namespaceDefaults = map[string]bool{
	"serviceaccount/default":     true,
	"configmap/kube-root-ca.crt": true,
}

// testExamples applies every example of examples/ in a namespace of its own
// and checks it converges. The placement example's PriorityClass is
// made first, as its comment asks; its hard zone spread and toleration are
// met by the fake Nodes. Examples that ask for a ServiceMonitor need the
// servicemonitor overlay: TestE2E's phase ServiceMonitorOverlay runs them.
func testExamples(t *testing.T, e *env) {
	e.kubectl(t, []byte("apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: memcached-critical}\nvalue: 1000000\n"), "apply", "-f", "-")
	files, err := filepath.Glob(examplesGlob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples in %s: %v", examplesGlob, err)
	}
	for _, f := range files {
		ex := readExample(t, f)
		t.Run(ex.Metadata.Name, func(t *testing.T) {
			if ex.wantsServiceMonitor() {
				t.Skipf("%s asks for a ServiceMonitor: TestE2E/ServiceMonitorOverlay runs it", filepath.Base(f))
			}
			t.Parallel()
			s := e.newScenario(t, "example-"+strings.TrimPrefix(ex.Metadata.Name, "memcached-"))
			s.checkExample(f, ex)
		})
	}
}

// example is what the scenarios read of an example file.
type example struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Image   string `json:"image"`
		Metrics struct {
			ServiceMonitor struct {
				Enabled bool `json:"enabled"`
			} `json:"serviceMonitor"`
		} `json:"metrics"`
		Auth struct {
			SecretName string `json:"secretName"`
		} `json:"auth"`
		TLS struct {
			SecretName string `json:"secretName"`
		} `json:"tls"`
		TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints"`
		Zones                     *v1alpha1.ZonesSpec               `json:"zones"`
	} `json:"spec"`
}

// wantsServiceMonitor tells whether the example asks for a ServiceMonitor.
func (ex *example) wantsServiceMonitor() bool { return ex.Spec.Metrics.ServiceMonitor.Enabled }

// readExample reads an example file.
func readExample(t *testing.T, path string) *example {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ex example
	if err := yaml.Unmarshal(b, &ex); err != nil || ex.Metadata.Name == "" {
		t.Fatalf("%s: no metadata.name (%v)", path, err)
	}
	return &ex
}

// checkExample applies an example as its comment says (its Secrets
// first) and waits until it converges to its size (spec.size as the API
// server defaulted it), then checks that its Pods honour its hard spread
// constraints over the Nodes' labels. An example with zones is
// checkZonesExample's.
func (s *scenario) checkExample(path string, ex *example) {
	s.t.Helper()
	s.createSecrets(ex)
	if ex.Spec.Zones != nil {
		s.checkZonesExample(path, ex)
		return
	}
	began := time.Now()
	s.kubectl("apply", "-f", path)
	var m memcached
	s.getJSON(&m, "memcached", ex.Metadata.Name)
	if m.Spec.Size == nil {
		s.t.Fatalf("memcached %s has no spec.size after defaulting", ex.Metadata.Name)
	}
	obs, at := s.waitConverged(ex.Metadata.Name, *m.Spec.Size, ex.Spec.Image)
	record(s.t, fmt.Sprintf("create-to-ready/example-%s-size-%d", strings.TrimPrefix(ex.Metadata.Name, "memcached-"), *m.Spec.Size), at.Sub(began), s.callsSince(began))
	s.checkNetworkPolicy(ex.Metadata.Name, obs)
	for _, c := range ex.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == corev1.DoNotSchedule {
			s.checkSpread(obs.pods, c)
		}
	}
}

// checkNetworkPolicy checks the Memcached's NetworkPolicy child as the
// API server stores it: owned by the Memcached, and its podSelector selects
// exactly the Memcached's live Pods among every Pod of the namespace, and
// its first rule opens the memcached port. (kwok enforces no policy: what
// traffic it lets through is the network plugin's to prove.)
func (s *scenario) checkNetworkPolicy(name string, obs *observed) {
	s.t.Helper()
	var np networkingv1.NetworkPolicy
	s.getJSON(&np, "networkpolicy", name)
	if !ownedBy(np.OwnerReferences, string(obs.mc.Metadata.UID)) {
		s.t.Errorf("networkpolicy %s has owners %v, want the Memcached %s", name, np.OwnerReferences, obs.mc.Metadata.UID)
	}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		s.t.Fatalf("networkpolicy %s: podSelector: %v", name, err)
	}
	var pods corev1.PodList
	s.getJSON(&pods, "pods")
	var got, want []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && sel.Matches(labels.Set(p.Labels)) {
			got = append(got, p.Name)
		}
	}
	for _, p := range obs.pods {
		want = append(want, p.Name)
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		s.t.Errorf("networkpolicy %s selects Pods %v, want exactly the Memcached's %v", name, got, want)
	}
	if len(np.Spec.Ingress) == 0 || len(np.Spec.Ingress[0].Ports) != 1 || np.Spec.Ingress[0].Ports[0].Port.String() != "11211" {
		s.t.Errorf("networkpolicy %s: ingress %+v, want a first rule for port 11211", name, np.Spec.Ingress)
	}
}

// ownedBy tells whether refs name the owner uid.
func ownedBy(refs []metav1.OwnerReference, uid string) bool {
	for _, r := range refs {
		if string(r.UID) == uid {
			return true
		}
	}
	return false
}

// createSecrets makes the Secrets an example names, as its comment tells a
// user to: the users of spec.auth, and a certificate for the Service's
// names with its CA for spec.tls. (kwok mounts no volume, so what they
// hold is not put to use here; test/pod does that.)
func (s *scenario) createSecrets(ex *example) {
	s.t.Helper()
	if name := ex.Spec.Auth.SecretName; name != "" {
		s.kubectl("create", "secret", "generic", name, "--from-literal=users=app:e2e-"+ex.Metadata.Name)
	}
	if name := ex.Spec.TLS.SecretName; name != "" {
		ca := testutil.NewCA(s.t, "e2e-ca")
		svc := ex.Metadata.Name + "." + s.ns + ".svc"
		cert, key := ca.Issue(s.t, svc, svc, "*."+svc)
		secret, err := json.Marshal(map[string]any{
			"apiVersion": "v1",
			"kind":       "Secret",
			"metadata":   map[string]any{"name": name},
			"type":       "kubernetes.io/tls",
			"stringData": map[string]string{"tls.crt": string(cert), "tls.key": string(key), "ca.crt": string(ca.PEM)},
		})
		if err != nil {
			s.t.Fatal(err)
		}
		s.kubectlStdin(string(secret), "create", "-f", "-")
	}
}

// checkSpread checks that Pods spread over the values of a Node label
// within maxSkew, over every value the fake Nodes carry.
func (s *scenario) checkSpread(pods []corev1.Pod, c corev1.TopologySpreadConstraint) {
	s.t.Helper()
	var nodeList struct {
		Items []corev1.Node `json:"items"`
	}
	if err := json.Unmarshal([]byte(s.env.kubectl(s.t, nil, "get", "nodes", "-o", "json")), &nodeList); err != nil {
		s.t.Fatal(err)
	}
	domain := map[string]string{}
	count := map[string]int{}
	for _, n := range nodeList.Items {
		if v, ok := n.Labels[c.TopologyKey]; ok {
			domain[n.Name] = v
			count[v] += 0
		}
	}
	for _, p := range pods {
		count[domain[p.Spec.NodeName]]++
	}
	lo, hi := len(pods), 0
	for _, n := range count {
		lo, hi = min(lo, n), max(hi, n)
	}
	if int32(hi-lo) > c.MaxSkew {
		s.t.Errorf("Pods per %s: %v; want a skew of at most %d (whenUnsatisfiable: DoNotSchedule)", c.TopologyKey, count, c.MaxSkew)
	}
}

// checkScale checks what the scale subresource says of Memcached name:
// spec.replicas and status.replicas want (note says in what unit, if not
// Pods), and the Memcached's selector.
func (s *scenario) checkScale(name string, want int32, note, selector string) {
	s.t.Helper()
	var scale struct {
		Spec struct {
			Replicas int32 `json:"replicas"`
		} `json:"spec"`
		Status struct {
			Replicas int32  `json:"replicas"`
			Selector string `json:"selector"`
		} `json:"status"`
	}
	s.getJSON(&scale, "memcached", name, "--subresource=scale")
	if scale.Spec.Replicas != want || scale.Status.Replicas != want || scale.Status.Selector != selector {
		s.t.Errorf("the scale subresource says spec.replicas %d, status.replicas %d, selector %q; want %d, %d%s, %q",
			scale.Spec.Replicas, scale.Status.Replicas, scale.Status.Selector, want, want, note, selector)
	}
}
