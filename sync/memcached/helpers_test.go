package memcached_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/sync/metacontroller"
	"github.com/example/memcached-operator/test/testutil"
)

// fixedNow is the time the golden answers are computed at. It is later than
// every capture, so a condition stamped with it is easy to tell from one
// carried forward.
var fixedNow = time.Date(2026, time.November, 22, 3, 0, 0, 0, time.UTC)

// hookOptions are the hook's settings in these tests: an agent image, as
// the manifests set one.
var hookOptions = memcached.Options{AgentImage: "ghcr.io/example/memcached-hook:test"}

// lastApplied is the annotation in which Metacontroller keeps a child as the
// hook last answered it.
const lastApplied = "metacontroller.k8s.io/last-applied-configuration"

// Defaults of the test fixtures: the names of the v2 captures.
const (
	testName      = "cache-a"
	testNamespace = "cache"
)

// callHook answers a request body as the HTTP layer does: it decodes the body
// with memcached.DecodeRequest (or DecodeCustomizeRequest), sets Finalizing for
// the finalize hook, and encodes the answer with encoding/json.
func callHook(t *testing.T, hook string, body []byte, now time.Time) []byte {
	t.Helper()
	return callHookWith(t, hook, body, now, hookOptions)
}

// callHookWith is callHook for a hook started with opts.
func callHookWith(t *testing.T, hook string, body []byte, now time.Time, opts memcached.Options) []byte {
	t.Helper()
	out, err := tryHookWith(hook, body, now, opts)
	if err != nil {
		t.Fatalf("%s hook: %v", hook, err)
	}
	return out
}

// tryHook is callHook returning the hook's error instead of failing.
func tryHook(hook string, body []byte, now time.Time) ([]byte, error) {
	return tryHookWith(hook, body, now, hookOptions)
}

// tryHookWith is tryHook for a hook started with opts.
func tryHookWith(hook string, body []byte, now time.Time, opts memcached.Options) ([]byte, error) {
	var resp any
	switch hook {
	case "customize":
		req, err := metacontroller.DecodeCustomizeRequest(body)
		if err != nil {
			return nil, fmt.Errorf("decoding the request: %w", err)
		}
		r, err := memcached.Customize(req)
		if err != nil {
			return nil, err
		}
		resp = r
	case "sync", "finalize":
		req, err := metacontroller.DecodeSyncRequest(body)
		if err != nil {
			return nil, fmt.Errorf("decoding the request: %w", err)
		}
		answer := memcached.Sync
		if hook == "finalize" {
			answer = memcached.Finalize
		}
		a, err := answer(req, now, opts)
		if err != nil {
			return nil, err
		}
		resp = a.Response
	default:
		return nil, fmt.Errorf("unknown hook %q", hook)
	}
	return json.Marshal(resp)
}

// childKey is the children map key of a child: "<Kind>.<apiVersion>".
func childKey(child map[string]any) string {
	return testutil.GetString(child, "kind") + "." + testutil.GetString(child, "apiVersion")
}

// syncAnswer is a decoded answer to a sync or finalize call.
type syncAnswer struct {
	raw          []byte
	status       v1alpha1.MemcachedStatus
	statusRaw    json.RawMessage
	childrenRaw  []json.RawMessage
	children     []map[string]any
	finalized    bool
	hasFinalized bool
}

// parseAnswer decodes an answer to a sync or finalize call.
func parseAnswer(t *testing.T, raw []byte) syncAnswer {
	t.Helper()
	var top struct {
		Status    json.RawMessage   `json:"status"`
		Children  []json.RawMessage `json:"children"`
		Finalized *bool             `json:"finalized"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		t.Fatalf("decoding the answer: %v\n%s", err, testutil.Truncate(raw))
	}
	a := syncAnswer{raw: raw, statusRaw: top.Status, childrenRaw: top.Children}
	if err := json.Unmarshal(top.Status, &a.status); err != nil {
		t.Fatalf("decoding the answer's status: %v", err)
	}
	for _, c := range top.Children {
		a.children = append(a.children, testutil.DecodeObject(t, c))
	}
	if top.Finalized != nil {
		a.hasFinalized, a.finalized = true, *top.Finalized
	}
	return a
}

// child returns the answer's child of a kind ("Service.v1"), if any. It
// fails the test if there are several.
func (a syncAnswer) child(t *testing.T, key string) (map[string]any, bool) {
	t.Helper()
	return a.childOf(t, key, "memcached")
}

// agentChild is child for the objects of the agent (spec.discovery).
func (a syncAnswer) agentChild(t *testing.T, key string) (map[string]any, bool) {
	t.Helper()
	return a.childOf(t, key, "memcached-agent")
}

// proxyChild is child for the objects of the proxy tier (spec.proxy).
func (a syncAnswer) proxyChild(t *testing.T, key string) (map[string]any, bool) {
	t.Helper()
	return a.childOf(t, key, "memcached-proxy")
}

// childOf finds the answer's one child of a kind whose
// app.kubernetes.io/name label is app: memcached's or the agent's.
func (a syncAnswer) childOf(t *testing.T, key, app string) (map[string]any, bool) {
	t.Helper()
	var found map[string]any
	for _, c := range a.children {
		if childKey(c) == key && testutil.GetString(c, "metadata", "labels", "app.kubernetes.io/name") == app {
			if found != nil {
				t.Fatalf("answer has two %s children of %s", key, app)
			}
			found = c
		}
	}
	return found, found != nil
}

// childKeys lists the kinds of the answer's children, in answer order.
func (a syncAnswer) childKeys() []string {
	keys := []string{}
	for _, c := range a.children {
		keys = append(keys, childKey(c))
	}
	return keys
}

// typedChild decodes the answer's child of a kind into out, failing the test
// if there is none.
func (a syncAnswer) typedChild(t *testing.T, key string, out any) {
	t.Helper()
	c, ok := a.child(t, key)
	if !ok {
		t.Fatalf("answer has no %s child; it has %v", key, a.childKeys())
	}
	if err := json.Unmarshal(testutil.MustMarshal(t, c), out); err != nil {
		t.Fatalf("decoding the %s child: %v", key, err)
	}
}

// decodeChild decodes one of the answer's children into out.
func (a syncAnswer) decodeChild(t *testing.T, c map[string]any, out any) {
	t.Helper()
	if err := json.Unmarshal(testutil.MustMarshal(t, c), out); err != nil {
		t.Fatalf("decoding the %s child: %v", childKey(c), err)
	}
}

// deployment decodes the answer's Deployment.
func (a syncAnswer) deployment(t *testing.T) appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	a.typedChild(t, memcached.DeploymentKey, &d)
	return d
}

// memcachedDeployments decodes the answer's memcached Deployments: the
// one, or each zone's.
func (a syncAnswer) memcachedDeployments(t *testing.T) []appsv1.Deployment {
	t.Helper()
	var out []appsv1.Deployment
	for _, c := range a.children {
		if childKey(c) == memcached.DeploymentKey && testutil.GetString(c, "metadata", "labels", "app.kubernetes.io/name") == "memcached" {
			var d appsv1.Deployment
			a.decodeChild(t, c, &d)
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		t.Fatalf("the answer has no memcached Deployment")
	}
	return out
}

// container returns the named container of the answer's Deployment.
func (a syncAnswer) container(t *testing.T, name string) corev1.Container {
	t.Helper()
	d := a.deployment(t)
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("the Deployment has no %q container", name)
	return corev1.Container{}
}

// service decodes the answer's Service.
func (a syncAnswer) service(t *testing.T) corev1.Service {
	t.Helper()
	var s corev1.Service
	a.typedChild(t, memcached.ServiceKey, &s)
	return s
}

// pdb decodes the answer's PodDisruptionBudget.
func (a syncAnswer) pdb(t *testing.T) policyv1.PodDisruptionBudget {
	t.Helper()
	var p policyv1.PodDisruptionBudget
	a.typedChild(t, memcached.PDBKey, &p)
	return p
}

// condition returns the answer's condition of a type, failing the test if
// there is none.
func (a syncAnswer) condition(t *testing.T, typ string) metav1.Condition {
	t.Helper()
	for _, c := range a.status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	t.Fatalf("status has no %s condition: %+v", typ, a.status.Conditions)
	return metav1.Condition{}
}

// fixture describes a sync request in the few terms the tests vary. body
// turns it into the JSON Metacontroller would send (hook v2 keys).
type fixture struct {
	generation int64               // the parent's; 0 means 1
	spec       string              // the parent's spec as raw JSON; "" means {}
	conditions []metav1.Condition  // the parent's observed status conditions
	slotTable  *v1alpha1.SlotTable // the parent's observed slot table
	// zones are the parent's observed status.zones.
	zones []v1alpha1.ZoneStatus
	// handoffs are the parent's observed status.handoffs.
	handoffs []v1alpha1.Handoff
	// statusAddresses are the parent's observed status.slotAddresses.
	statusAddresses []string
	children        []any              // more observed children (beside the Deployment)
	options         *memcached.Options // the hook's settings; nil means hookOptions
	deployment      *deploy            // the observed Deployment; nil means none
	// zoneDeployments are more observed memcached Deployments, by zone:
	// NAME-ZONE.
	zoneDeployments map[string]*deploy
	pods            []pod    // the related Pods
	kinds           []string // the managed child kinds; nil means Deployment, Service and PDB
	finalizing      bool
}

// deploy is an observed Deployment.
type deploy struct {
	generation int64
	replicas   int32
	image      string // "" means v1alpha1.DefaultImage
	status     appsv1.DeploymentStatus
}

// convergedDeploy is a Deployment whose controller has rolled out size Pods of
// the default image.
func convergedDeploy(size int32) *deploy {
	return &deploy{
		generation: 1,
		replicas:   size,
		status: appsv1.DeploymentStatus{
			ObservedGeneration: 1,
			Replicas:           size,
			UpdatedReplicas:    size,
			ReadyReplicas:      size,
			AvailableReplicas:  size,
		},
	}
}

// pod is a related Pod, reduced to what the status reads.
type pod struct {
	name      string
	namespace string            // "" means the parent's
	labels    map[string]string // nil means the selector labels
	phase     corev1.PodPhase   // "" means Running
	ready     bool
	// readyAt is when its Ready condition last changed; zero: none given.
	readyAt  time.Time
	ip       string
	deleting bool
	// deletedAgo is when its deletion was asked, with a grace period of
	// a minute; 0: its deletion timestamp is a minute past, with none.
	deletedAgo     time.Duration
	waiting        string // the memcached container's waiting reason
	terminated     string // its terminated reason
	lastTerminated string // its last state's terminated reason
	unschedulable  bool
	check          *checkRun // the check init container's state; nil means none
}

// checkRun is how the check init container ended: its exit code and
// termination message, and whether kubelet is waiting to run it again (a
// crash loop, the last run in lastState).
type checkRun struct {
	exitCode  int32
	reason    string // of the end; "Completed" or "Error" if ""
	message   string
	restarted bool // failed before, now waiting to run again
	rerunning bool // failed before, now running again
}

// readyPods returns n ready Pods named <prefix>-0 to <prefix>-(n-1), with
// distinct IPs.
func readyPods(prefix string, n int) []pod {
	var ps []pod
	for i := range n {
		ps = append(ps, pod{name: fmt.Sprintf("%s-%d", prefix, i), ready: true, ip: fmt.Sprintf("10.1.0.%d", i+1)})
	}
	return ps
}

// object builds the Pod as the API server would send it.
func (p pod) object() corev1.Pod {
	ns := p.namespace
	if ns == "" {
		ns = testNamespace
	}
	labels := p.labels
	if labels == nil {
		labels = memcached.SelectorLabels(testName)
	}
	phase := p.phase
	if phase == "" {
		phase = corev1.PodRunning
	}
	o := corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      p.name,
			Namespace: ns,
			Labels:    labels,
			UID:       k8stypes.UID("uid-" + p.name),
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "memcached", Image: v1alpha1.DefaultImage}}},
		Status: corev1.PodStatus{
			Phase: phase,
			PodIP: p.ip,
		},
	}
	if p.ip != "" {
		o.Status.PodIPs = []corev1.PodIP{{IP: p.ip}}
	}
	if p.deleting {
		ts := metav1.NewTime(fixedNow.Add(-time.Minute))
		o.DeletionTimestamp = &ts
		if p.deletedAgo > 0 {
			ts, grace := metav1.NewTime(fixedNow.Add(time.Minute-p.deletedAgo)), int64(60)
			o.DeletionTimestamp, o.DeletionGracePeriodSeconds = &ts, &grace
		}
	}
	scheduled := corev1.ConditionTrue
	if p.unschedulable {
		scheduled = corev1.ConditionFalse
	}
	readyStatus := corev1.ConditionFalse
	if p.ready {
		readyStatus = corev1.ConditionTrue
	}
	o.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: scheduled}}
	if p.unschedulable {
		o.Status.Conditions[0].Reason = corev1.PodReasonUnschedulable
		o.Status.Conditions[0].Message = "0/3 nodes are available: 3 Insufficient memory."
	} else {
		o.Status.Conditions = append(o.Status.Conditions,
			corev1.PodCondition{Type: corev1.PodReady, Status: readyStatus},
			corev1.PodCondition{Type: corev1.ContainersReady, Status: readyStatus})
		if !p.readyAt.IsZero() {
			o.Status.Conditions[1].LastTransitionTime = metav1.NewTime(p.readyAt)
		}
		cs := corev1.ContainerStatus{Name: "memcached", Image: v1alpha1.DefaultImage, Ready: p.ready}
		switch {
		case p.waiting != "":
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: p.waiting}
		case p.terminated != "":
			cs.State.Terminated = &corev1.ContainerStateTerminated{Reason: p.terminated, ExitCode: 137}
		default:
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(fixedNow.Add(-time.Hour))}
		}
		if p.lastTerminated != "" {
			cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: p.lastTerminated, ExitCode: 137}
			cs.RestartCount = 1
		}
		o.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
	}
	if c := p.check; c != nil {
		end := &corev1.ContainerStateTerminated{ExitCode: c.exitCode, Message: c.message, Reason: "Completed"}
		if c.exitCode != 0 {
			end.Reason = "Error"
		}
		if c.reason != "" {
			end.Reason = c.reason
		}
		ics := corev1.ContainerStatus{Name: "check", Image: v1alpha1.DefaultImage}
		if c.rerunning {
			ics.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(fixedNow.Add(-time.Second))}
			ics.LastTerminationState.Terminated = end
			ics.RestartCount = 3
		} else if c.restarted {
			ics.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
			ics.LastTerminationState.Terminated = end
			ics.RestartCount = 3
		} else {
			ics.State.Terminated = end
		}
		o.Status.InitContainerStatuses = []corev1.ContainerStatus{ics}
	}
	return o
}

// body is the fixture as the JSON body of a sync call, keyed as hook v2 does.
func (f fixture) body(t testing.TB) []byte {
	t.Helper()
	gen := f.generation
	if gen == 0 {
		gen = 1
	}
	spec := f.spec
	if spec == "" {
		spec = "{}"
	}
	parent := map[string]any{
		"apiVersion": v1alpha1.APIVersion,
		"kind":       v1alpha1.Kind,
		"metadata": map[string]any{
			"name":       testName,
			"namespace":  testNamespace,
			"uid":        "8d822f61-d22b-489e-afcd-b3659dc628b9",
			"generation": gen,
		},
		"spec":   json.RawMessage(spec),
		"status": map[string]any{"conditions": f.conditions},
	}
	if f.conditions == nil {
		parent["status"] = map[string]any{}
	}
	if f.slotTable != nil {
		parent["status"].(map[string]any)["slotTable"] = f.slotTable
	}
	if f.statusAddresses != nil {
		parent["status"].(map[string]any)["slotAddresses"] = f.statusAddresses
	}
	if f.zones != nil {
		parent["status"].(map[string]any)["zones"] = f.zones
	}
	if f.handoffs != nil {
		parent["status"].(map[string]any)["handoffs"] = f.handoffs
	}
	kinds := f.kinds
	if kinds == nil {
		kinds = []string{memcached.DeploymentKey, memcached.ServiceKey, memcached.PDBKey, memcached.NetworkPolicyKey}
	}
	children := map[string]map[string]any{}
	for _, k := range kinds {
		children[k] = map[string]any{}
	}
	if d := f.deployment; d != nil {
		if _, ok := children[memcached.DeploymentKey]; !ok {
			t.Fatal("fixture has a Deployment but does not manage Deployments")
		}
		children[memcached.DeploymentKey][testNamespace+"/"+testName] = d.object()
	}
	for _, zone := range slices.Sorted(maps.Keys(f.zoneDeployments)) {
		o := f.zoneDeployments[zone].object()
		o.Name = testName + "-" + zone
		o.Labels[v1alpha1.LabelZone] = zone
		o.Spec.Selector.MatchLabels[v1alpha1.LabelZone] = zone
		children[memcached.DeploymentKey][testNamespace+"/"+o.Name] = o
	}
	for _, c := range f.children {
		o := testutil.DecodeObject(t, testutil.MustMarshal(t, c))
		key := testutil.GetString(o, "kind") + "." + testutil.GetString(o, "apiVersion")
		if _, ok := children[key]; !ok {
			t.Fatalf("fixture has a %s child but does not manage the kind", key)
		}
		children[key][testNamespace+"/"+testutil.GetString(o, "metadata", "name")] = o
	}
	pods := map[string]any{}
	for _, p := range f.pods {
		o := p.object()
		key := o.Namespace + "/" + o.Name
		if _, dup := pods[key]; dup {
			t.Fatalf("fixture has two Pods %s", key)
		}
		pods[key] = o
	}
	return testutil.MustMarshal(t, map[string]any{
		"controller": map[string]any{"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController", "metadata": map[string]any{"name": "memcached-controller"}},
		"parent":     parent,
		"children":   children,
		"related":    map[string]any{metacontroller.PodKey: pods},
		"finalizing": f.finalizing,
	})
}

// withHandoffs is the fixture with the status's hand-offs.
func (f fixture) withHandoffs(hs []v1alpha1.Handoff) fixture {
	f.handoffs = hs
	return f
}

// object builds the observed Deployment.
func (d deploy) object() appsv1.Deployment {
	image := d.image
	if image == "" {
		image = v1alpha1.DefaultImage
	}
	return appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name:       testName,
			Namespace:  testNamespace,
			Generation: d.generation,
			Labels:     memcached.SelectorLabels(testName),
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: &d.replicas,
			Selector: &metav1.LabelSelector{MatchLabels: memcached.SelectorLabels(testName)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: memcached.SelectorLabels(testName)},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "memcached", Image: image}}},
			},
		},
		Status: d.status,
	}
}

// run answers the fixture at now.
func (f fixture) run(t *testing.T, now time.Time) syncAnswer {
	t.Helper()
	hook := "sync"
	if f.finalizing {
		hook = "finalize"
	}
	opts := hookOptions
	if f.options != nil {
		opts = *f.options
	}
	return parseAnswer(t, callHookWith(t, hook, f.body(t), now, opts))
}

// withAllKinds returns the request body with an empty entry for Services,
// PodDisruptionBudgets and NetworkPolicies added to children, as a
// CompositeController that manages all of them (and has not made the new
// ones yet) sends it.
func withAllKinds(t *testing.T, body []byte) []byte {
	t.Helper()
	req := testutil.DecodeObject(t, body)
	children := testutil.GetObject(req, "children")
	if children == nil {
		t.Fatal("request has no children map")
	}
	for _, k := range []string{memcached.ServiceKey, memcached.PDBKey, memcached.NetworkPolicyKey,
		memcached.ServiceAccountKey, memcached.RoleKey, memcached.RoleBindingKey, memcached.ConfigMapKey} {
		if _, ok := children[k]; !ok {
			children[k] = map[string]any{}
		}
	}
	return testutil.MustMarshal(t, req)
}

// withSpec returns the request body with the parent's spec replaced by raw
// JSON.
func withSpec(t *testing.T, body []byte, spec string) []byte {
	t.Helper()
	req := testutil.DecodeObject(t, body)
	parent := testutil.GetObject(req, "parent")
	if parent == nil {
		t.Fatal("request has no parent")
	}
	parent["spec"] = json.RawMessage(spec)
	return testutil.MustMarshal(t, req)
}

// nextRequest builds the request Metacontroller sends after applying an
// answer: the answer's children become the observed children, each carrying
// the controller-uid label (generateSelector) and its last-applied
// annotation, keyed "namespace/name" as hook v2 does; a child that was
// observed before keeps its generation and status, so a Deployment keeps what
// its controller reported; the answer's status becomes the parent's. Kinds
// stay managed even with no child, and the related Pods do not change.
func nextRequest(t *testing.T, body, answer []byte) []byte {
	t.Helper()
	req := testutil.DecodeObject(t, body)
	ans := testutil.DecodeObject(t, answer)
	parent := testutil.GetObject(req, "parent")
	oldChildren := testutil.GetObject(req, "children")
	if parent == nil || oldChildren == nil {
		t.Fatal("request has no parent or no children")
	}
	uid := testutil.GetString(parent, "metadata", "uid")
	children := map[string]any{}
	for kind := range oldChildren {
		children[kind] = map[string]any{}
	}
	list, _ := ans["children"].([]any)
	for _, item := range list {
		child, ok := item.(map[string]any)
		if !ok {
			t.Fatalf("answer child is not an object: %v", item)
		}
		kind := childKey(child)
		objs, ok := children[kind].(map[string]any)
		if !ok {
			t.Fatalf("answer has a %s child but the CompositeController does not manage that kind", kind)
		}
		meta := testutil.GetObject(child, "metadata")
		labels := testutil.GetObject(meta, "labels")
		if labels == nil {
			labels = map[string]any{}
			meta["labels"] = labels
		}
		labels["controller-uid"] = uid
		applied := string(testutil.MustMarshal(t, child))
		observed := testutil.DecodeObject(t, []byte(applied))
		observedMeta := testutil.GetObject(observed, "metadata")
		annotations := testutil.GetObject(observedMeta, "annotations")
		if annotations == nil {
			annotations = map[string]any{}
			observedMeta["annotations"] = annotations
		}
		annotations[lastApplied] = applied
		key := testutil.GetString(meta, "namespace") + "/" + testutil.GetString(meta, "name")
		for _, old := range testutil.GetObject(oldChildren, kind) {
			if testutil.GetString(old, "metadata", "name") != testutil.GetString(meta, "name") {
				continue
			}
			if gen, ok := testutil.Get(old, "metadata", "generation"); ok {
				observedMeta["generation"] = gen
			}
			if st, ok := testutil.Get(old, "status"); ok {
				observed["status"] = st
			}
		}
		objs[key] = observed
	}
	req["children"] = children
	if st, ok := ans["status"]; ok {
		parent["status"] = st
	}
	return testutil.MustMarshal(t, req)
}

// lastAppliedOf lists the last-applied configurations of a request's observed
// children, sorted by kind and key, decoded.
func lastAppliedOf(t *testing.T, body []byte) []any {
	t.Helper()
	children := testutil.GetObject(testutil.DecodeObject(t, body), "children")
	var out []any
	for _, kind := range slices.Sorted(maps.Keys(children)) {
		objs := testutil.GetObject(children, kind)
		for _, key := range slices.Sorted(maps.Keys(objs)) {
			last := testutil.GetString(objs[key], "metadata", "annotations", lastApplied)
			if last == "" {
				t.Fatalf("observed %s %s has no last-applied annotation", kind, key)
			}
			out = append(out, testutil.DecodeAny(t, []byte(last)))
		}
	}
	return out
}

// requestError asserts that err is a *metacontroller.Error and returns it.
func requestError(t *testing.T, err error) *metacontroller.Error {
	t.Helper()
	var re *metacontroller.Error
	if !errors.As(err, &re) {
		t.Fatalf("error %v (%T) is not a *metacontroller.Error", err, err)
	}
	return re
}
