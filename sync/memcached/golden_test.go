package memcached_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/sync/metacontroller"
	"github.com/example/memcached-operator/test/testutil"
)

// TestGolden answers every captured Metacontroller call and compares the
// answer to testdata/golden/<v1|v2>/<capture name>. Run with -update to
// rewrite the golden files. Each answer must also be one Metacontroller's
// hook v2 accepts, answer the same bytes twice, and agree with facts derived
// here from the raw request.
func TestGolden(t *testing.T) {
	for _, rel := range testutil.CaptureNames(t) {
		t.Run(rel, func(t *testing.T) {
			c := testutil.LoadCapture(t, rel)
			got := callHook(t, c.Hook(), c.Request, fixedNow)
			testutil.Golden(t, filepath.Join("testdata", "golden", filepath.FromSlash(rel)), got)
			checkAnswer(t, c.Hook(), c.Request, got)
			if c.Hook() == "sync" {
				checkFacts(t, c.Request, got)
			}
		})
	}
}

// fullCaptures are the captures that TestGoldenAllKinds answers as if the
// CompositeController managed Services and PodDisruptionBudgets too: nothing
// observed yet, a scale-up, a scale-down, a converged object, and finalize
// with and without the Deployment.
var fullCaptures = []string{
	"v1/0002-sync.json",
	"v1/0031-sync.json",
	"v2/0002-sync.json",
	"v2/0014-sync.json",
	"v2/0020-sync.json",
	"v2/0040-sync.json",
	"v2/0042-finalize.json",
	"v2/0043-finalize.json",
}

// TestGoldenAllKinds is TestGolden for requests derived from captures by
// adding empty Service and PodDisruptionBudget entries to children; the
// golden files are testdata/golden/full/<v1|v2>-<capture name>.
func TestGoldenAllKinds(t *testing.T) {
	for _, rel := range fullCaptures {
		t.Run(rel, func(t *testing.T) {
			c := testutil.LoadCapture(t, rel)
			body := withAllKinds(t, c.Request)
			got := callHook(t, c.Hook(), body, fixedNow)
			testutil.Golden(t, filepath.Join("testdata", "golden", "full", strings.ReplaceAll(rel, "/", "-")), got)
			checkAnswer(t, c.Hook(), body, got)
			if c.Hook() == "sync" {
				checkFacts(t, body, got)
			}
		})
	}
}

// TestGoldenFilesHaveCaptures catches golden files left behind by a capture
// or a fullCaptures entry that is gone.
func TestGoldenFilesHaveCaptures(t *testing.T) {
	want := map[string]bool{}
	for _, rel := range testutil.CaptureNames(t) {
		want[filepath.Join("testdata", "golden", filepath.FromSlash(rel))] = true
	}
	for _, rel := range fullCaptures {
		want[filepath.Join("testdata", "golden", "full", strings.ReplaceAll(rel, "/", "-"))] = true
	}
	got, err := filepath.Glob(filepath.Join("testdata", "golden", "*", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range got {
		if !want[path] {
			t.Errorf("golden file %s answers no capture: delete it", path)
		}
	}
}

// strictSyncAnswer holds exactly the fields hook v2 reads from a sync or
// finalize answer.
type strictSyncAnswer struct {
	Status             json.RawMessage   `json:"status"`
	Children           []json.RawMessage `json:"children"`
	ResyncAfterSeconds *float64          `json:"resyncAfterSeconds"`
	Finalized          *bool             `json:"finalized"`
}

// strictCustomizeAnswer holds exactly the fields Metacontroller reads from a
// customize answer.
type strictCustomizeAnswer struct {
	RelatedResources []json.RawMessage `json:"relatedResources"`
}

// checkAnswer checks what Metacontroller needs of any answer: it decodes
// strictly, has no duplicated or wrongly cased top-level key, has children
// (never null) that each name their type and carry the parent's labels, and
// the same request gives the same bytes again.
func checkAnswer(t *testing.T, hook string, body, got []byte) {
	t.Helper()
	allowed := []string{"status", "children", "resyncAfterSeconds", "finalized"}
	var strict any = &strictSyncAnswer{}
	if hook == "customize" {
		allowed = []string{"relatedResources"}
		strict = &strictCustomizeAnswer{}
	}
	dec := json.NewDecoder(bytes.NewReader(got))
	dec.DisallowUnknownFields()
	if err := dec.Decode(strict); err != nil {
		t.Errorf("answer fails strict decoding: %v", err)
	}
	keys := topLevelKeys(t, got)
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k] {
			t.Errorf("answer has top-level key %q twice", k)
		}
		seen[k] = true
		if !slices.Contains(allowed, k) {
			t.Errorf("answer has top-level key %q, want only %v (case counts)", k, allowed)
		}
	}

	again := callHook(t, hook, body, fixedNow)
	if !bytes.Equal(got, again) {
		t.Errorf("the same request answered twice gives different bytes:\n%s\n%s", testutil.Truncate(got), testutil.Truncate(again))
	}

	req := testutil.DecodeObject(t, body)
	name := testutil.GetString(req, "parent", "metadata", "name")
	namespace := testutil.GetString(req, "parent", "metadata", "namespace")
	if hook == "customize" {
		checkCustomize(t, got, name, namespace)
		return
	}
	s := strict.(*strictSyncAnswer)
	if s.Children == nil {
		t.Fatalf("answer's children is null or missing:\n%s", testutil.Truncate(got))
	}
	if s.Status == nil || bytes.Equal(s.Status, []byte("null")) {
		t.Errorf("answer has no status")
	}
	for i, raw := range s.Children {
		child := testutil.DecodeObject(t, raw)
		for _, f := range [][]any{{"apiVersion"}, {"kind"}, {"metadata", "name"}} {
			if testutil.GetString(child, f...) == "" {
				t.Errorf("child %d has no %v:\n%s", i, f, testutil.Truncate(raw))
			}
		}
		// Every child is labelled as the Memcached's: its Pods' objects
		// with their selector labels, the agent's and the proxy's with
		// theirs.
		labels := testutil.GetObject(child, "metadata", "labels")
		want := memcached.SelectorLabels(name)
		switch app, _ := labels["app.kubernetes.io/name"].(string); app {
		case "memcached-agent":
			want = memcached.AgentSelectorLabels(name)
		case "memcached-proxy":
			want = memcached.ProxySelectorLabels(name)
		}
		for k, v := range want {
			if got, _ := labels[k].(string); got != v {
				t.Errorf("child %d (%s) has label %s=%q, want %q", i, childKey(child), k, got, v)
			}
		}
	}
}

// checkCustomize checks a customize answer: one rule, the parent's Pods by
// the selector labels, in the parent's namespace.
func checkCustomize(t *testing.T, got []byte, name, namespace string) {
	t.Helper()
	var resp metacontroller.CustomizeResponse
	if err := json.Unmarshal(got, &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.RelatedResources) != 2 {
		t.Fatalf("got %d related resource rules, want 2 (memcached's Pods, the proxies')", len(resp.RelatedResources))
	}
	for i, app := range []string{"memcached", "memcached-proxy"} {
		r := resp.RelatedResources[i]
		if r.APIVersion != "v1" || r.Resource != "pods" || r.Namespace != namespace {
			t.Errorf("rule %d is %s %s in %q, want v1 pods in %q", i, r.APIVersion, r.Resource, r.Namespace, namespace)
		}
		want := map[string]string{"app.kubernetes.io/name": app, "app.kubernetes.io/instance": name}
		if r.LabelSelector == nil {
			t.Fatalf("rule %d has no labelSelector", i)
		}
		if diff := cmp.Diff(r.LabelSelector.MatchLabels, want); diff != "" {
			t.Errorf("rule %d's matchLabels (-got +want):\n%s", i, diff)
		}
	}
}

// topLevelKeys lists the keys of a JSON object in document order, duplicates
// included.
func topLevelKeys(t *testing.T, data []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("answer is not a JSON object: %v %v", tok, err)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		t.Fatalf("answer does not end its object: %v %v", tok, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("trailing data after the answer")
	}
	return keys
}

// checkFacts derives from the raw request, independently of the code under
// test, what a sync answer must say: Deployment replicas = spec.size (1 when
// unset); status.nodes = the names of the parent's live Pods (same
// namespace, selector labels, no deletionTimestamp), sorted; endpoints = the
// ready ones' ip:11211, sorted; replicas and readyReplicas count them; the
// selector string; the three conditions; observedGeneration.
func checkFacts(t *testing.T, body, got []byte) {
	t.Helper()
	req := testutil.DecodeObject(t, body)
	parent := testutil.GetObject(req, "parent")
	name := testutil.GetString(parent, "metadata", "name")
	namespace := testutil.GetString(parent, "metadata", "namespace")

	size := int64(1)
	if n, ok := testutil.Get(parent, "spec", "size"); ok {
		v, err := n.(json.Number).Int64()
		if err != nil {
			t.Fatal(err)
		}
		size = v
	}
	a := parseAnswer(t, got)
	for _, d := range a.memcachedDeployments(t) {
		if d.Spec.Replicas == nil || int64(*d.Spec.Replicas) != size {
			t.Errorf("Deployment %s replicas = %v, want spec.size %d", d.Name, d.Spec.Replicas, size)
		}
	}
	_, zoned := testutil.Get(parent, "spec", "zones")

	nodes, endpoints := []string{}, []string{}
	for _, p := range testutil.GetObject(req, "related", "Pod.v1") {
		if testutil.GetString(p, "metadata", "namespace") != namespace ||
			testutil.GetString(p, "metadata", "labels", "app.kubernetes.io/name") != "memcached" ||
			testutil.GetString(p, "metadata", "labels", "app.kubernetes.io/instance") != name {
			continue
		}
		if _, deleting := testutil.Get(p, "metadata", "deletionTimestamp"); deleting {
			continue
		}
		nodes = append(nodes, testutil.GetString(p, "metadata", "name"))
		ready := false
		conds, _ := testutil.Get(p, "status", "conditions")
		list, _ := conds.([]any)
		for _, c := range list {
			if testutil.GetString(c, "type") == "Ready" {
				ready = testutil.GetString(c, "status") == "True"
			}
		}
		if ready && testutil.GetString(p, "status", "phase") == "Running" {
			endpoints = append(endpoints, net.JoinHostPort(testutil.GetString(p, "status", "podIP"), "11211"))
		}
	}
	slices.Sort(nodes)
	slices.Sort(endpoints)
	st := a.status
	if diff := cmp.Diff(st.Nodes, nodes); diff != "" {
		t.Errorf("status.nodes (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(st.Endpoints, endpoints); diff != "" {
		t.Errorf("status.endpoints (-got +want):\n%s", diff)
	}
	// With zones, replicas count each zone's Pods (TestZonesStatus).
	if !zoned && (int(st.Replicas) != len(nodes) || int(st.ReadyReplicas) != len(endpoints)) {
		t.Errorf("status replicas/readyReplicas = %d/%d, want %d/%d", st.Replicas, st.ReadyReplicas, len(nodes), len(endpoints))
	}
	if want := "app.kubernetes.io/instance=" + name + ",app.kubernetes.io/name=memcached"; st.Selector != want {
		t.Errorf("status.selector = %q, want %q", st.Selector, want)
	}
	gen, _ := testutil.Get(parent, "metadata", "generation")
	if want := gen.(json.Number).String(); strconv.FormatInt(st.ObservedGeneration, 10) != want {
		t.Errorf("status.observedGeneration = %d, want %s", st.ObservedGeneration, want)
	}
	var types []string
	for _, c := range st.Conditions {
		types = append(types, c.Type)
		if c.LastTransitionTime.IsZero() {
			t.Errorf("condition %s has no lastTransitionTime", c.Type)
		}
		if c.Reason == "" || c.Message == "" {
			t.Errorf("condition %s has no reason or message", c.Type)
		}
	}
	if diff := cmp.Diff(types, []string{"Available", "Progressing", "Degraded"}); diff != "" {
		t.Errorf("condition types (-got +want):\n%s", diff)
	}
}
