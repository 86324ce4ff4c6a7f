package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/memcached-operator/test/testutil"
	"github.com/google/go-cmp/cmp"
)

// fixedNow is the clock every test server runs on, so that answers do not
// depend on when the test runs.
var fixedNow = time.Date(2026, 11, 22, 2, 0, 0, 0, time.UTC)

// newTestServer serves newServer on a loopback listener until the test ends.
// Options left zero get a 32 MiB limit, the fixed clock and an always-ready
// switch. The logger writes JSON to the returned sink.
func newTestServer(t *testing.T, opts serverOptions) (*httptest.Server, *testutil.LogSink) {
	t.Helper()
	if opts.maxRequestBytes == 0 {
		opts.maxRequestBytes = 32 << 20
	}
	if opts.now == nil {
		opts.now = func() time.Time { return fixedNow }
	}
	if opts.ready == nil {
		opts.ready = func() bool { return true }
	}
	sink := testutil.NewLogSink()
	logger := slog.New(slog.NewJSONHandler(sink, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := httptest.NewServer(newServer(logger, opts))
	t.Cleanup(srv.Close)
	return srv, sink
}

// result is an HTTP answer, its body read in full.
type result struct {
	status int
	header http.Header
	body   []byte
}

// do sends one request and reads the whole answer. An empty contentType
// sends no Content-Type header at all.
func do(t *testing.T, client *http.Client, method, url, contentType string, body []byte) result {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, url, err)
	}
	return result{status: resp.StatusCode, header: resp.Header, body: b}
}

// post sends body as application/json, the way Metacontroller does.
func post(t *testing.T, client *http.Client, url string, body []byte) result {
	t.Helper()
	return do(t, client, http.MethodPost, url, "application/json", body)
}

// checkJSONContentType fails the test unless the answer says it is JSON.
func checkJSONContentType(t *testing.T, res result) {
	t.Helper()
	ct := res.header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
}

// topLevelKeys returns the keys of the JSON object b in order, failing the
// test if b is not one object, if a key repeats, or if a key is not one of
// allowed (compared case-sensitively, as hook v2 does).
func topLevelKeys(t *testing.T, b []byte, allowed ...string) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("answer does not start a JSON object (token %v, err %v): %.200s", tok, err, b)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("reading a key: %v", err)
		}
		key := tok.(string)
		if slices.Contains(keys, key) {
			t.Errorf("answer repeats top-level key %q", key)
		}
		if !slices.Contains(allowed, key) {
			t.Errorf("answer has top-level key %q, hook v2 accepts only %q", key, allowed)
		}
		keys = append(keys, key)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatalf("reading the value of %q: %v", key, err)
		}
	}
	if _, err := dec.Token(); err != nil {
		t.Fatalf("answer's object does not end: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Errorf("answer has data after its object (err %v)", err)
	}
	return keys
}

// syncAnswer is a sync or finalize answer as hook v2 decodes it: these four
// fields and no other.
type syncAnswer struct {
	Status             json.RawMessage    `json:"status"`
	Children           *[]json.RawMessage `json:"children"`
	ResyncAfterSeconds *float64           `json:"resyncAfterSeconds"`
	Finalized          *bool              `json:"finalized"`
}

// customizeAnswer is a customize answer as Metacontroller decodes it.
type customizeAnswer struct {
	RelatedResources *[]json.RawMessage `json:"relatedResources"`
}

// decodeSyncAnswer checks a sync or finalize answer as hook v2 would and
// returns it. Children must be a list, never null or missing, and each child
// must name its kind, apiVersion and name.
func decodeSyncAnswer(t *testing.T, res result) syncAnswer {
	t.Helper()
	if res.status != http.StatusOK {
		t.Fatalf("status = %d, want 200; body: %s", res.status, res.body)
	}
	checkJSONContentType(t, res)
	topLevelKeys(t, res.body, "status", "children", "resyncAfterSeconds", "finalized")
	var a syncAnswer
	testutil.StrictDecode(t, res.body, &a)
	if a.Children == nil {
		t.Fatalf("answer's children is null or missing, which deletes every child: %.500s", res.body)
	}
	if len(a.Status) == 0 || bytes.Equal(a.Status, []byte("null")) {
		t.Errorf("answer has no status: %.500s", res.body)
	}
	for i, c := range *a.Children {
		m := testutil.DecodeObject(t, c)
		for _, k := range []string{"kind", "apiVersion"} {
			if s, _ := m[k].(string); s == "" {
				t.Errorf("children[%d] has no %s, which fails the whole call: %.300s", i, k, c)
			}
		}
		if s, _ := testutil.At(m, "metadata", "name").(string); s == "" {
			t.Errorf("children[%d] has no metadata.name: %.300s", i, c)
		}
	}
	return a
}

// decodeErrorAnswer checks a failed call's answer, {"error": "..."} and
// nothing else, and returns the message.
func decodeErrorAnswer(t *testing.T, res result) string {
	t.Helper()
	checkJSONContentType(t, res)
	topLevelKeys(t, res.body, "error")
	var e struct {
		Error string `json:"error"`
	}
	testutil.StrictDecode(t, res.body, &e)
	if e.Error == "" {
		t.Errorf("error answer has an empty message: %s", res.body)
	}
	return e.Error
}

// childrenOfKind returns the answer's children of one kind, decoded.
func childrenOfKind(t *testing.T, a syncAnswer, apiVersion, kind string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, c := range *a.Children {
		m := testutil.DecodeObject(t, c)
		if m["apiVersion"] == apiVersion && m["kind"] == kind {
			out = append(out, m)
		}
	}
	return out
}

// livePodNames returns the names of the request's related Pods that are not
// being deleted, sorted: what status.nodes should list.
func livePodNames(req map[string]any) []string {
	names := []string{}
	pods, _ := testutil.At(req, "related", "Pod.v1").(map[string]any)
	for _, p := range pods {
		if testutil.At(p, "metadata", "deletionTimestamp") != nil {
			continue
		}
		names = append(names, testutil.At(p, "metadata", "name").(string))
	}
	slices.Sort(names)
	return names
}

// observedChildren counts the request's children of every kind.
func observedChildren(req map[string]any) int {
	n := 0
	children, _ := req["children"].(map[string]any)
	for _, objs := range children {
		m, _ := objs.(map[string]any)
		n += len(m)
	}
	return n
}

// TestHookAnswersCaptures sends every captured call to its path and checks
// that the answer is one Metacontroller's hook v2 accepts and says what the
// request calls for, the same bytes every time.
func TestHookAnswersCaptures(t *testing.T) {
	srv, _ := newTestServer(t, serverOptions{})
	client := srv.Client()
	for _, c := range testutil.Captures(t) {
		t.Run(c.Name, func(t *testing.T) {
			if got := c.Headers["Content-Type"]; got != "application/json" {
				t.Fatalf("capture's Content-Type = %q, want application/json", got)
			}
			req := testutil.DecodeObject(t, c.Request)
			res := post(t, client, srv.URL+c.Path, c.Request)
			again := post(t, client, srv.URL+c.Path, c.Request)
			if !bytes.Equal(again.body, res.body) {
				t.Errorf("the same request answered differently the second time:\nfirst:  %s\nsecond: %s", res.body, again.body)
			}

			switch c.Path {
			case "/customize":
				checkCustomizeAnswer(t, req, res)
			case "/sync":
				checkSyncAnswer(t, req, res)
			case "/finalize":
				checkFinalizeAnswer(t, req, res)
			default:
				t.Fatalf("capture has path %q, want /customize, /sync or /finalize", c.Path)
			}
		})
	}
}

// checkCustomizeAnswer checks that a customize answer asks for the parent's
// Pods, in its namespace, by the labels the Deployment gives them.
func checkCustomizeAnswer(t *testing.T, req map[string]any, res result) {
	t.Helper()
	if res.status != http.StatusOK {
		t.Fatalf("status = %d, want 200; body: %s", res.status, res.body)
	}
	checkJSONContentType(t, res)
	topLevelKeys(t, res.body, "relatedResources")
	var a customizeAnswer
	testutil.StrictDecode(t, res.body, &a)
	if a.RelatedResources == nil {
		t.Fatalf("relatedResources is null or missing: %s", res.body)
	}
	var got any
	if err := json.Unmarshal(res.body, &got); err != nil {
		t.Fatal(err)
	}
	// The memcached Pods, and the proxy tier's (whose agents report the
	// pool each proxy loaded).
	rule := func(app string) any {
		return map[string]any{
			"apiVersion": "v1",
			"resource":   "pods",
			"namespace":  testutil.At(req, "parent", "metadata", "namespace"),
			"labelSelector": map[string]any{"matchLabels": map[string]any{
				"app.kubernetes.io/name":     app,
				"app.kubernetes.io/instance": testutil.At(req, "parent", "metadata", "name"),
			}},
		}
	}
	want := map[string]any{"relatedResources": []any{rule("memcached"), rule("memcached-proxy")}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("customize answer mismatch (-want +got):\n%s", diff)
	}
}

// checkSyncAnswer checks that a sync answer runs spec.size Pods and lists
// the live Pods in status.nodes.
func checkSyncAnswer(t *testing.T, req map[string]any, res result) {
	t.Helper()
	a := decodeSyncAnswer(t, res)
	if a.Finalized != nil && *a.Finalized {
		t.Errorf("a sync answer says finalized: %s", res.body)
	}
	deployments := childrenOfKind(t, a, "apps/v1", "Deployment")
	if len(deployments) != 1 {
		t.Fatalf("answer has %d Deployments, want 1: %s", len(deployments), res.body)
	}
	if got, want := testutil.At(deployments[0], "spec", "replicas"), testutil.At(req, "parent", "spec", "size"); got != want {
		t.Errorf("Deployment spec.replicas = %v, want the parent's spec.size %v", got, want)
	}
	var st struct {
		Nodes *[]string `json:"nodes"`
	}
	if err := json.Unmarshal(a.Status, &st); err != nil {
		t.Fatalf("status: %v", err)
	}
	if st.Nodes == nil {
		t.Fatalf("status.nodes is null or missing: %s", a.Status)
	}
	if diff := cmp.Diff(livePodNames(req), *st.Nodes); diff != "" {
		t.Errorf("status.nodes mismatch (-want +got):\n%s", diff)
	}
}

// checkFinalizeAnswer checks that a finalize answer asks for no children and
// says finalized exactly when none are observed.
func checkFinalizeAnswer(t *testing.T, req map[string]any, res result) {
	t.Helper()
	a := decodeSyncAnswer(t, res)
	if len(*a.Children) != 0 {
		t.Errorf("finalize answer has %d children, want none: %s", len(*a.Children), res.body)
	}
	got := a.Finalized != nil && *a.Finalized
	if want := observedChildren(req) == 0; got != want {
		t.Errorf("finalized = %v, want %v (%d children observed)", got, want, observedChildren(req))
	}
}

// TestHookAcceptsJSONMediaTypes checks that parameters and case in the
// Content-Type do not turn a JSON request away.
func TestHookAcceptsJSONMediaTypes(t *testing.T) {
	body := testutil.LoadCapture(t, "v2/0005-sync.json").Request
	srv, _ := newTestServer(t, serverOptions{})
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON"} {
		t.Run(ct, func(t *testing.T) {
			res := do(t, srv.Client(), http.MethodPost, srv.URL+"/sync", ct, body)
			decodeSyncAnswer(t, res)
		})
	}
}

// TestRequestSizeLimit checks that the limit is inclusive: a body of exactly
// maxRequestBytes is answered, one byte more is refused with 413.
func TestRequestSizeLimit(t *testing.T) {
	body := testutil.LoadCapture(t, "v2/0005-sync.json").Request
	size := int64(len(body))
	tests := []struct {
		name       string
		limit      int64
		wantStatus int
	}{
		{name: "limit one byte larger than the body", limit: size + 1, wantStatus: 200},
		{name: "limit equal to the body", limit: size, wantStatus: 200},
		{name: "limit one byte smaller than the body", limit: size - 1, wantStatus: 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := newTestServer(t, serverOptions{maxRequestBytes: tt.limit})
			res := post(t, srv.Client(), srv.URL+"/sync", body)
			if res.status != tt.wantStatus {
				t.Errorf("status = %d, want %d; body: %.300s", res.status, tt.wantStatus, res.body)
			}
		})
	}
}

// TestHookRejectsBadRequests checks that every request the hook cannot
// answer safely gets a 4xx (which Metacontroller treats as "change nothing")
// and a JSON error that names the problem.
func TestHookRejectsBadRequests(t *testing.T) {
	valid := testutil.LoadCapture(t, "v2/0005-sync.json").Request
	validCustomize := testutil.LoadCapture(t, "v2/0001-customize.json").Request
	without := func(keys ...string) []byte {
		return testutil.Edit(t, valid, func(m map[string]any) {
			for _, k := range keys {
				delete(m, k)
			}
		})
	}
	withParent := func(field, value string) []byte {
		return testutil.Edit(t, valid, func(m map[string]any) { m["parent"].(map[string]any)[field] = value })
	}

	tests := []struct {
		name            string
		method          string // POST when empty
		path            string // /sync when empty
		contentType     string // application/json when empty; "-" sends none
		body            []byte
		maxRequestBytes int64
		wantStatus      int
		wantError       string
		wantAllow       string // the Allow header of a 405
	}{
		{name: "truncated JSON", body: valid[:len(valid)/2], wantStatus: 400, wantError: "malformed JSON"},
		{name: "trailing garbage", body: append(bytes.Clone(valid), "}"...), wantStatus: 400, wantError: "malformed JSON"},
		{name: "JSON array", body: []byte(`[]`), wantStatus: 400, wantError: "got a JSON array, want an object"},
		{name: "JSON string", body: []byte(`"x"`), wantStatus: 400, wantError: "got a JSON string, want an object"},
		{name: "JSON number", body: []byte(`42`), wantStatus: 400, wantError: "got a JSON number, want an object"},
		{name: "empty body", body: []byte{}, wantStatus: 400, wantError: "request body is empty"},
		{name: "blank body", body: []byte(" \n\t"), wantStatus: 400, wantError: "request body is empty"},
		{name: "null body", body: []byte(`null`), wantStatus: 400, wantError: "parent: missing"},
		{name: "empty object", body: []byte(`{}`), wantStatus: 400, wantError: "parent: missing"},
		{name: "text/plain", contentType: "text/plain", body: valid, wantStatus: 415, wantError: `Content-Type is "text/plain", want application/json`},
		{name: "missing Content-Type", contentType: "-", body: valid, wantStatus: 415, wantError: `Content-Type is "", want application/json`},
		{name: "JSON-like media type", contentType: "application/merge-patch+json", body: valid, wantStatus: 415, wantError: "want application/json"},
		{name: "missing parent", body: without("parent"), wantStatus: 400, wantError: "parent: missing"},
		{name: "null parent", body: testutil.Edit(t, valid, func(m map[string]any) { m["parent"] = nil }), wantStatus: 400, wantError: "parent: missing"},
		{name: "parent of kind Foo", body: withParent("kind", "Foo"), wantStatus: 400, wantError: `and kind "Foo"`},
		{name: "parent of another version", body: withParent("apiVersion", "cache.example.com/v1"), wantStatus: 400, wantError: `got apiVersion "cache.example.com/v1" and kind "Memcached", want "cache.example.com/v1alpha1" and "Memcached"`},
		{name: "parent without name", body: testutil.Edit(t, valid, func(m map[string]any) {
			delete(m["parent"].(map[string]any)["metadata"].(map[string]any), "name")
		}), wantStatus: 400, wantError: "parent.metadata.name: missing"},
		{name: "missing children map", body: without("children"), wantStatus: 400, wantError: "children: missing"},
		{name: "null children map", body: testutil.Edit(t, valid, func(m map[string]any) { m["children"] = nil }), wantStatus: 400, wantError: "children: missing"},
		{name: "children without Deployment.apps/v1", body: testutil.Edit(t, valid, func(m map[string]any) {
			m["children"] = map[string]any{"Service.v1": map[string]any{}}
		}), wantStatus: 400, wantError: `no "Deployment.apps/v1" entry`},
		{name: "finalize without children map", path: "/finalize", body: without("children"), wantStatus: 400, wantError: "children: missing"},
		{name: "body over the limit", body: valid, maxRequestBytes: 1024, wantStatus: 413, wantError: "larger than 1024 bytes"},
		{name: "customize body over the limit", path: "/customize", body: validCustomize, maxRequestBytes: 1024, wantStatus: 413, wantError: "larger than 1024 bytes"},
		{name: "finalizing is a string", body: testutil.Edit(t, valid, func(m map[string]any) { m["finalizing"] = "yes" }), wantStatus: 400, wantError: `finalizing: got a JSON string, want a boolean`},
		{name: "children is a list", body: testutil.Edit(t, valid, func(m map[string]any) { m["children"] = []any{} }), wantStatus: 400, wantError: `children: got a JSON array, want an object`},
		{name: "customize without parent", path: "/customize", body: []byte(`{"controller": {}}`), wantStatus: 400, wantError: "parent: missing"},
		{name: "customize parent of kind Foo", path: "/customize", body: testutil.Edit(t, validCustomize, func(m map[string]any) {
			m["parent"].(map[string]any)["kind"] = "Foo"
		}), wantStatus: 400, wantError: `parent: got apiVersion "cache.example.com/v1alpha1" and kind "Foo"`},
		{name: "customize text/plain", path: "/customize", contentType: "text/plain", body: validCustomize, wantStatus: 415, wantError: "want application/json"},
		{name: "unknown path", path: "/nope", body: valid, wantStatus: 404, wantError: `no such path "/nope"`},
		{name: "GET /sync", method: http.MethodGet, wantStatus: 405, wantError: "method GET is not allowed on /sync", wantAllow: "POST"},
		{name: "PUT /finalize", method: http.MethodPut, path: "/finalize", body: valid, wantStatus: 405, wantError: "method PUT is not allowed on /finalize", wantAllow: "POST"},
		{name: "POST /healthz", path: "/healthz", body: valid, wantStatus: 405, wantError: "method POST is not allowed on /healthz", wantAllow: "GET, HEAD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := newTestServer(t, serverOptions{maxRequestBytes: tt.maxRequestBytes})
			method, path, ct := http.MethodPost, "/sync", "application/json"
			if tt.method != "" {
				method = tt.method
			}
			if tt.path != "" {
				path = tt.path
			}
			switch tt.contentType {
			case "":
			case "-":
				ct = ""
			default:
				ct = tt.contentType
			}
			res := do(t, srv.Client(), method, srv.URL+path, ct, tt.body)
			if res.status != tt.wantStatus {
				t.Errorf("status = %d, want %d; body: %s", res.status, tt.wantStatus, res.body)
			}
			if got := decodeErrorAnswer(t, res); !strings.Contains(got, tt.wantError) {
				t.Errorf("error = %q, want it to contain %q", got, tt.wantError)
			}
			if tt.wantStatus == http.StatusMethodNotAllowed {
				if got := strings.Join(res.header.Values("Allow"), ", "); got != tt.wantAllow {
					t.Errorf("Allow = %q, want %q (RFC 9110 15.5.6: a 405 must list the allowed methods)", got, tt.wantAllow)
				}
			}
		})
	}
}

// TestSyncKeepsChildrenOnInvalidSpec checks that a parent whose spec is
// invalid is no reason to refuse the call: the answer is a 200 that hands
// back every observed child as last applied, so nothing is deleted or
// changed, and a status that says why.
func TestSyncKeepsChildrenOnInvalidSpec(t *testing.T) {
	tests := []struct {
		name        string
		capture     string
		spec        any
		wantMessage string
	}{
		{name: "negative size", capture: "v2/0005-sync.json", spec: map[string]any{"size": -1}, wantMessage: "spec.size: Invalid value: -1: must be from 0 to 1000"},
		{name: "size too large, hook v1", capture: "v1/0010-sync.json", spec: map[string]any{"size": 1001}, wantMessage: "spec.size: Invalid value: 1001: must be from 0 to 1000"},
		{name: "size of the wrong type", capture: "v2/0005-sync.json", spec: map[string]any{"size": "three"}, wantMessage: "spec.size: got a JSON string, want an integer"},
		{name: "spec not an object", capture: "v2/0005-sync.json", spec: "big", wantMessage: "spec: got a JSON string, want an object"},
		{name: "several problems", capture: "v2/0013-sync.json", spec: map[string]any{"size": -1, "memcached": map[string]any{"threads": 0}}, wantMessage: "spec.size: Invalid value: -1: must be from 0 to 1000; spec.memcached.threads: Invalid value: 0: must be from 1 to 64"},
	}
	srv, _ := newTestServer(t, serverOptions{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testutil.LoadCapture(t, tt.capture)
			body := testutil.Edit(t, c.Request, func(m map[string]any) { m["parent"].(map[string]any)["spec"] = tt.spec })
			req := testutil.DecodeObject(t, body)
			res := post(t, srv.Client(), srv.URL+"/sync", body)
			a := decodeSyncAnswer(t, res)

			// Every observed child, as the annotation Metacontroller keeps
			// records it, in kind then key order.
			want := []any{}
			children := req["children"].(map[string]any)
			for _, kind := range slices.Sorted(maps.Keys(children)) {
				objs := children[kind].(map[string]any)
				for _, key := range slices.Sorted(maps.Keys(objs)) {
					last, _ := testutil.At(objs[key], "metadata", "annotations", "metacontroller.k8s.io/last-applied-configuration").(string)
					if last == "" {
						t.Fatalf("capture's child %s %s has no last-applied configuration", kind, key)
					}
					want = append(want, testutil.DecodeObject(t, []byte(last)))
				}
			}
			if len(want) == 0 {
				t.Fatal("capture observes no children: pick one that does")
			}
			var got []any
			for _, c := range *a.Children {
				got = append(got, testutil.DecodeObject(t, c))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("children mismatch (-want +got):\n%s", diff)
			}

			var st struct {
				Conditions []struct {
					Type, Status, Reason, Message string
				} `json:"conditions"`
			}
			if err := json.Unmarshal(a.Status, &st); err != nil {
				t.Fatal(err)
			}
			var found bool
			for _, cond := range st.Conditions {
				if cond.Type != "Degraded" {
					continue
				}
				found = true
				if cond.Status != "True" || cond.Reason != "InvalidSpec" || !strings.Contains(cond.Message, tt.wantMessage) {
					t.Errorf("Degraded = %+v, want True, InvalidSpec, a message containing %q", cond, tt.wantMessage)
				}
			}
			if !found {
				t.Errorf("status has no Degraded condition: %s", a.Status)
			}
		})
	}
}

// TestFinalizeRoute checks that /finalize finalizes whatever the body's
// finalizing field says: no children, and finalized only once none are
// observed.
func TestFinalizeRoute(t *testing.T) {
	tests := []struct {
		name          string
		capture       string
		path          string
		finalizing    bool
		wantFinalized bool
	}{
		{name: "Deployment observed, hook v2", capture: "v2/0005-sync.json", path: "/finalize", wantFinalized: false},
		{name: "Deployment observed, hook v1", capture: "v1/0003-sync.json", path: "/finalize", wantFinalized: false},
		{name: "nothing observed, hook v2", capture: "v2/0002-sync.json", path: "/finalize", wantFinalized: true},
		{name: "nothing observed, hook v1", capture: "v1/0002-sync.json", path: "/finalize", wantFinalized: true},
		{name: "finalizing sent to /sync", capture: "v2/0005-sync.json", path: "/sync", finalizing: true, wantFinalized: false},
		{name: "finalizing sent to /sync, nothing observed", capture: "v2/0002-sync.json", path: "/sync", finalizing: true, wantFinalized: true},
	}
	srv, _ := newTestServer(t, serverOptions{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := testutil.Edit(t, testutil.LoadCapture(t, tt.capture).Request, func(m map[string]any) { m["finalizing"] = tt.finalizing })
			res := post(t, srv.Client(), srv.URL+tt.path, body)
			a := decodeSyncAnswer(t, res)
			if len(*a.Children) != 0 {
				t.Errorf("answer has %d children, want none: %s", len(*a.Children), res.body)
			}
			if got := a.Finalized != nil && *a.Finalized; got != tt.wantFinalized {
				t.Errorf("finalized = %v, want %v", got, tt.wantFinalized)
			}
		})
	}
}

// TestRecoverPanics checks that a hook call that panics gets a JSON 500, is
// logged with its panic value and stack and counted as a 500, and leaves
// the server serving; and that http.ErrAbortHandler still aborts the
// connection, as net/http documents. The panic comes from the clock, the
// one thing a test can make a real hook call run that it controls.
func TestRecoverPanics(t *testing.T) {
	body := testutil.LoadCapture(t, "v2/0005-sync.json").Request
	var panicWith atomic.Pointer[any] // what the clock panics with; nil: it does not
	panicOn := func(v any) { panicWith.Store(&v) }
	sink := testutil.NewLogSink()
	m := newMetrics()
	srv := httptest.NewServer(newServer(slog.New(slog.NewJSONHandler(sink, nil)), serverOptions{
		maxRequestBytes: 1 << 20,
		ready:           func() bool { return true },
		metrics:         m,
		now: func() time.Time {
			if v := panicWith.Load(); v != nil {
				panic(*v)
			}
			return fixedNow
		},
	}))
	defer srv.Close()

	panicOn("boom: index out of range")
	res := post(t, srv.Client(), srv.URL+"/sync", body)
	if res.status != http.StatusInternalServerError {
		t.Errorf("status = %d, want 500; body: %s", res.status, res.body)
	}
	if got := decodeErrorAnswer(t, res); got != "Internal Server Error" {
		t.Errorf("error = %q, want %q", got, "Internal Server Error")
	}
	if strings.Contains(string(res.body), "boom") {
		t.Errorf("the answer leaks the panic value: %s", res.body)
	}

	panicOn(http.ErrAbortHandler)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/sync", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if resp, err := srv.Client().Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("panic(http.ErrAbortHandler): got status %d, want the connection aborted", resp.StatusCode)
	}

	panicWith.Store(nil)
	if res := post(t, srv.Client(), srv.URL+"/sync", body); res.status != http.StatusOK {
		t.Errorf("after the panics: status %d, want 200", res.status)
	}
	if got := scrape(t, srv.Client(), srv.URL)[`memcached_hook_calls_total{code="500",hook="sync"}`]; got != 1 {
		t.Errorf("calls answered 500 = %v, want 1", got)
	}

	srv.Close() // waits for the handlers, and so for their log lines
	var panics []map[string]any
	for _, l := range sink.Lines(t) {
		if l["msg"] == "panic in hook call" {
			panics = append(panics, l)
		}
	}
	if len(panics) != 1 {
		t.Fatalf("got %d panic log lines, want 1 (none for ErrAbortHandler):\n%s", len(panics), sink.String())
	}
	if l := panics[0]; l["level"] != "ERROR" || l["path"] != "/sync" || l["panic"] != "boom: index out of range" || !strings.Contains(fmt.Sprint(l["stack"]), "server_test.go") {
		t.Errorf("panic log line = %v, want level ERROR, path /sync, the panic value and a stack naming this file", l)
	}
}

// TestHealthAndReadiness checks /healthz and /readyz, and that only
// readiness follows the ready switch.
func TestHealthAndReadiness(t *testing.T) {
	var ready atomic.Bool
	srv, _ := newTestServer(t, serverOptions{ready: ready.Load})
	tests := []struct {
		name       string
		ready      bool
		path       string
		wantStatus int
		wantBody   string
	}{
		{name: "healthz while ready", ready: true, path: "/healthz", wantStatus: 200, wantBody: "ok\n"},
		{name: "readyz while ready", ready: true, path: "/readyz", wantStatus: 200, wantBody: "ok\n"},
		{name: "readyz once not ready", ready: false, path: "/readyz", wantStatus: 503, wantBody: "shutting down\n"},
		{name: "healthz once not ready", ready: false, path: "/healthz", wantStatus: 200, wantBody: "ok\n"},
		{name: "readyz ready again", ready: true, path: "/readyz", wantStatus: 200, wantBody: "ok\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ready.Store(tt.ready)
			res := do(t, srv.Client(), http.MethodGet, srv.URL+tt.path, "", nil)
			if res.status != tt.wantStatus || string(res.body) != tt.wantBody {
				t.Errorf("GET %s: %d %q, want %d %q", tt.path, res.status, res.body, tt.wantStatus, tt.wantBody)
			}
		})
	}
}

// TestCallLog checks that every hook call, answered or refused, logs exactly
// one JSON line with what the call was about.
func TestCallLog(t *testing.T) {
	syncCapture := testutil.LoadCapture(t, "v2/0005-sync.json")
	v1Capture := testutil.LoadCapture(t, "v1/0010-sync.json")
	customizeCapture := testutil.LoadCapture(t, "v2/0001-customize.json")
	finalizeCapture := testutil.LoadCapture(t, "v2/0042-finalize.json")
	badKind := testutil.Edit(t, syncCapture.Request, func(m map[string]any) { m["parent"].(map[string]any)["kind"] = "Foo" })

	tests := []struct {
		name      string
		path      string
		body      []byte
		want      map[string]any // every field but time and duration_ms
		wantError string         // a substring of the logged error
	}{
		{
			name: "sync, hook v2", path: "/sync", body: syncCapture.Request,
			want: map[string]any{"level": "INFO", "msg": "hook call", "hook": "sync", "namespace": "cache", "name": "cache-a", "generation": 1.0, "children": 1.0, "pods": 3.0, "status": 200.0},
		},
		{
			name: "sync, hook v1", path: "/sync", body: v1Capture.Request,
			want: map[string]any{"level": "INFO", "msg": "hook call", "hook": "sync", "namespace": "default", "name": "memcached-sample", "generation": 2.0, "children": 1.0, "pods": 5.0, "status": 200.0},
		},
		{
			name: "customize", path: "/customize", body: customizeCapture.Request,
			want: map[string]any{"level": "INFO", "msg": "hook call", "hook": "customize", "namespace": "cache", "name": "cache-a", "generation": 1.0, "children": 0.0, "pods": 0.0, "status": 200.0},
		},
		{
			name: "finalize", path: "/finalize", body: finalizeCapture.Request,
			want: map[string]any{"level": "INFO", "msg": "hook call", "hook": "finalize", "namespace": "cache", "name": "cache-a", "generation": 5.0, "children": 1.0, "pods": 2.0, "status": 200.0},
		},
		{
			name: "refused: parent of another kind", path: "/sync", body: badKind,
			want:      map[string]any{"level": "WARN", "msg": "hook call", "hook": "sync", "namespace": "cache", "name": "cache-a", "generation": 1.0, "children": 1.0, "pods": 3.0, "status": 400.0},
			wantError: `parent: got apiVersion "cache.example.com/v1alpha1" and kind "Foo"`,
		},
		{
			name: "refused: malformed JSON", path: "/sync", body: []byte(`{"parent":`),
			want:      map[string]any{"level": "WARN", "msg": "hook call", "hook": "sync", "namespace": "", "name": "", "generation": 0.0, "children": 0.0, "pods": 0.0, "status": 400.0},
			wantError: "malformed JSON",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, sink := newTestServer(t, serverOptions{})
			post(t, srv.Client(), srv.URL+tt.path, tt.body)
			srv.Close() // waits for the handler, and so for its log line

			lines := sink.Lines(t)
			if len(lines) != 1 {
				t.Fatalf("got %d log lines, want 1:\n%s", len(lines), sink.String())
			}
			got := lines[0]
			if _, ok := got["time"].(string); !ok {
				t.Errorf("log line has no time: %v", got)
			}
			if d, ok := got["duration_ms"].(float64); !ok || d < 0 {
				t.Errorf("duration_ms = %v, want a number of milliseconds", got["duration_ms"])
			}
			if tt.wantError == "" {
				if _, ok := got["error"]; ok {
					t.Errorf("a call answered 200 logs an error: %v", got["error"])
				}
			} else if e, _ := got["error"].(string); !strings.Contains(e, tt.wantError) {
				t.Errorf("logged error = %q, want it to contain %q", e, tt.wantError)
			}
			rest := maps.Clone(got)
			for _, k := range []string{"time", "duration_ms", "error"} {
				delete(rest, k)
			}
			if diff := cmp.Diff(tt.want, rest); diff != "" {
				t.Errorf("log line mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
