package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/test/testutil"
	"github.com/google/go-cmp/cmp"
)

// blockingBody is a request body that signals when the handler first reads
// it and then gives nothing more until released: a call that holds its
// concurrency slot for as long as the test wants.
type blockingBody struct {
	first    []byte
	rest     io.Reader
	started  chan struct{}
	release  chan struct{}
	didStart bool
}

func newBlockingBody(body []byte) *blockingBody {
	return &blockingBody{first: body[:1], rest: bytes.NewReader(body[1:]), started: make(chan struct{}), release: make(chan struct{})}
}

func (b *blockingBody) Read(p []byte) (int, error) {
	if !b.didStart {
		b.didStart = true
		close(b.started)
		return copy(p, b.first), nil
	}
	<-b.release
	return b.rest.Read(p)
}

func (b *blockingBody) Close() error { return nil }

// serveInProcess runs one call through handler and returns the answer.
func serveInProcess(handler http.Handler, body io.ReadCloser) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/sync", body)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, req)
	return rec
}

// TestConcurrencyLimit checks --max-concurrent-calls as routes installs
// it: with the one slot taken, a call waits for it, and gets 429 with
// Retry-After and a JSON error if it does not free up in time; once free,
// calls are answered again.
func TestConcurrencyLimit(t *testing.T) {
	body := testutil.LoadCapture(t, "v2/0005-sync.json").Request
	tests := []struct {
		name         string
		queueTimeout time.Duration
		wantWaiting  int // what the call made while the slot is taken gets
	}{
		{name: "no wait: refused at once", queueTimeout: 0, wantWaiting: http.StatusTooManyRequests},
		{name: "waits for the slot", queueTimeout: time.Hour, wantWaiting: http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			handler := newServer(slog.New(slog.DiscardHandler), serverOptions{
				maxRequestBytes: 32 << 20, now: func() time.Time { return fixedNow }, ready: func() bool { return true },
				maxConcurrentCalls: 1, maxQueuedCalls: 1, queueTimeout: tt.queueTimeout,
			})
			holder := newBlockingBody(body)
			holderDone := make(chan *httptest.ResponseRecorder)
			go func() { holderDone <- serveInProcess(handler, holder) }()
			<-holder.started // the holder is in the handler: it has the slot

			waiterDone := make(chan *httptest.ResponseRecorder)
			go func() { waiterDone <- serveInProcess(handler, io.NopCloser(bytes.NewReader(body))) }()
			var waiter *httptest.ResponseRecorder
			if tt.wantWaiting == http.StatusTooManyRequests {
				waiter = <-waiterDone
				close(holder.release)
			} else {
				close(holder.release)
				waiter = <-waiterDone
			}
			if got := (<-holderDone).Code; got != http.StatusOK {
				t.Errorf("the call holding the slot got %d, want 200", got)
			}
			res := result{status: waiter.Code, header: waiter.Header(), body: waiter.Body.Bytes()}
			if res.status != tt.wantWaiting {
				t.Fatalf("the waiting call got %d, want %d; body: %.300s", res.status, tt.wantWaiting, res.body)
			}
			if tt.wantWaiting == http.StatusTooManyRequests {
				if got := decodeErrorAnswer(t, res); got == "" {
					t.Errorf("the 429 has no error message")
				}
				if got := res.header.Get("Retry-After"); got != "1" {
					t.Errorf("Retry-After = %q, want 1", got)
				}
			} else {
				decodeSyncAnswer(t, res)
			}
			after := serveInProcess(handler, io.NopCloser(bytes.NewReader(body)))
			if after.Code != http.StatusOK {
				t.Errorf("a call once the slot is free got %d, want 200", after.Code)
			}
		})
	}
}

// TestETag checks Metacontroller's webhook.etag protocol: every 200 answer
// carries a strong ETag, the same for the same answer; an If-None-Match
// naming it gets 304 with no body; anything else gets the full answer.
func TestETag(t *testing.T) {
	syncBody := testutil.LoadCapture(t, "v2/0005-sync.json").Request
	customizeBody := testutil.LoadCapture(t, "v2/0001-customize.json").Request
	srv, _ := newTestServer(t, serverOptions{})
	first := post(t, srv.Client(), srv.URL+"/sync", syncBody)
	etag := first.header.Get("ETag")
	if !strings.HasPrefix(etag, `"`) || !strings.HasSuffix(etag, `"`) || len(etag) < 10 {
		t.Fatalf("ETag = %q, want a strong entity tag", etag)
	}
	if again := post(t, srv.Client(), srv.URL+"/sync", syncBody).header.Get("ETag"); again != etag {
		t.Errorf("the same answer has ETag %q, then %q", etag, again)
	}
	other := post(t, srv.Client(), srv.URL+"/sync", testutil.LoadCapture(t, "v2/0013-sync.json").Request).header.Get("ETag")
	if other == etag {
		t.Errorf("two different answers share ETag %q", etag)
	}

	tests := []struct {
		name        string
		path        string
		body        []byte
		ifNoneMatch []string
		wantStatus  int
	}{
		{name: "no If-None-Match", path: "/sync", body: syncBody, wantStatus: 200},
		{name: "matching", path: "/sync", body: syncBody, ifNoneMatch: []string{etag}, wantStatus: 304},
		{name: "matching, weak", path: "/sync", body: syncBody, ifNoneMatch: []string{"W/" + etag}, wantStatus: 304},
		{name: "matching in a list", path: "/sync", body: syncBody, ifNoneMatch: []string{`"nope", ` + etag}, wantStatus: 304},
		{name: "star", path: "/sync", body: syncBody, ifNoneMatch: []string{"*"}, wantStatus: 304},
		{name: "another answer's tag", path: "/sync", body: syncBody, ifNoneMatch: []string{other}, wantStatus: 200},
		{name: "unquoted", path: "/sync", body: syncBody, ifNoneMatch: []string{strings.Trim(etag, `"`)}, wantStatus: 200},
		{name: "sync tag sent to customize", path: "/customize", body: customizeBody, ifNoneMatch: []string{etag}, wantStatus: 200},
		{name: "bad request with a tag", path: "/sync", body: []byte(`{"parent":`), ifNoneMatch: []string{"*"}, wantStatus: 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+tt.path, bytes.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			for _, v := range tt.ifNoneMatch {
				req.Header.Add("If-None-Match", v)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res := readResult(t, resp)
			if res.status != tt.wantStatus {
				t.Fatalf("status = %d, want %d; body: %.300s", res.status, tt.wantStatus, res.body)
			}
			switch tt.wantStatus {
			case 304:
				if len(res.body) != 0 {
					t.Errorf("304 has a body: %q", res.body)
				}
				if got := res.header.Get("ETag"); got != etag {
					t.Errorf("304 ETag = %q, want %q", got, etag)
				}
			case 200:
				if got, want := res.header.Get("ETag"), etagOf(res.body); got != want {
					t.Errorf("ETag = %q, want the hash of the body, %q", got, want)
				}
			default:
				decodeErrorAnswer(t, res)
				if got := res.header.Get("ETag"); got != "" {
					t.Errorf("an error answer has ETag %q", got)
				}
			}
		})
	}
}

// TestMetricsCountCalls checks what /metrics says after a known mix of
// calls: counts by hook and status code, one duration and one request size
// per call, children per answer, invalid specs.
func TestMetricsCountCalls(t *testing.T) {
	syncBody := testutil.LoadCapture(t, "v2/0005-sync.json").Request
	invalid := testutil.Edit(t, syncBody, func(m map[string]any) { m["parent"].(map[string]any)["spec"] = map[string]any{"size": -1} })
	srv, _ := newTestServer(t, serverOptions{})
	c := srv.Client()
	post(t, c, srv.URL+"/sync", syncBody)
	post(t, c, srv.URL+"/sync", syncBody)
	post(t, c, srv.URL+"/sync", invalid)
	post(t, c, srv.URL+"/sync", []byte(`{"parent":`))
	post(t, c, srv.URL+"/customize", testutil.LoadCapture(t, "v2/0001-customize.json").Request)
	post(t, c, srv.URL+"/finalize", testutil.LoadCapture(t, "v2/0043-finalize.json").Request)
	do(t, c, http.MethodGet, srv.URL+"/healthz", "", nil)

	samples := scrape(t, c, srv.URL)
	want := map[string]float64{
		`memcached_hook_calls_total{code="200",hook="sync"}`:                 3,
		`memcached_hook_calls_total{code="400",hook="sync"}`:                 1,
		`memcached_hook_calls_total{code="200",hook="customize"}`:            1,
		`memcached_hook_calls_total{code="200",hook="finalize"}`:             1,
		`memcached_hook_call_duration_seconds_count{hook="sync"}`:            4,
		`memcached_hook_call_duration_seconds_count{hook="customize"}`:       1,
		`memcached_hook_request_size_bytes_count{hook="sync"}`:               4,
		`memcached_hook_children_returned_count{hook="sync"}`:                3,
		`memcached_hook_children_returned_count{hook="finalize"}`:            1,
		`memcached_hook_children_returned_sum{hook="finalize"}`:              0,
		`memcached_hook_invalid_specs_total`:                                 1,
		`memcached_hook_calls_in_flight`:                                     0,
		`memcached_hook_auth_failures_total{reason="wrong_credentials"}`:     0,
		`memcached_hook_auth_failures_total{reason="no_client_certificate"}`: 0,
	}
	got := map[string]float64{}
	for k := range want {
		got[k] = samples[k]
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics mismatch (-want +got):\n%s", diff)
	}
	// The request size is client_golang's estimate: the stated body
	// length and the headers.
	customizeBytes := float64(len(testutil.LoadCapture(t, "v2/0001-customize.json").Request))
	if got := samples[`memcached_hook_request_size_bytes_sum{hook="customize"}`]; got < customizeBytes || got > customizeBytes+512 {
		t.Errorf("customize request size = %v, want the body's %v bytes and its headers'", got, customizeBytes)
	}
	if _, ok := samples["go_goroutines"]; !ok {
		t.Errorf("/metrics has no Go runtime metrics")
	}
}

// TestHostileInputs sends requests built to break a decoder: each must get
// a 4xx with a JSON error, or a 200 that is complete and passes strict
// decoding; never a 5xx, a short answer or a crash.
func TestHostileInputs(t *testing.T) {
	valid := testutil.LoadCapture(t, "v2/0005-sync.json").Request
	set := func(path []string, v any) []byte {
		return testutil.Edit(t, valid, func(m map[string]any) { setPath(m, path, v) })
	}
	other := testutil.Edit(t, testutil.LoadCapture(t, "v2/0005-sync.json").Request, func(m map[string]any) {
		// Pods of another Memcached, cache-b, sent as if they were ours.
		pods := testutil.At(m, "related", "Pod.v1").(map[string]any)
		for k, p := range pods {
			setPath(p.(map[string]any), []string{"metadata", "labels", "app.kubernetes.io/instance"}, "cache-b")
			pods[k] = p
		}
	})
	hugePods := testutil.Edit(t, valid, func(m map[string]any) {
		pods := testutil.At(m, "related", "Pod.v1").(map[string]any)
		for k, p := range pods {
			conds := make([]any, 100000)
			for i := range conds {
				conds[i] = map[string]any{"type": "Ready", "status": "True"}
			}
			setPath(p.(map[string]any), []string{"status", "conditions"}, conds)
			pods[k] = p
			break
		}
	})
	deep := func(n int) []byte {
		return append(append([]byte(`{"parent":{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":"a","namespace":"b"},"spec":`+strings.Repeat("[", n)), []byte(strings.Repeat("]", n))...), `},"children":{"Deployment.apps/v1":{}}}`...)
	}

	tests := []struct {
		name string
		body []byte
		want int // 0: a 200 or a 4xx, either is safe
	}{
		{name: "truncated in the middle", body: valid[:len(valid)/3], want: 400},
		{name: "truncated before the last brace", body: valid[:len(bytes.TrimSpace(valid))-1], want: 400},
		{name: "non-UTF-8 in a name", body: bytes.Replace(valid, []byte(`"cache-a"`), []byte("\"cache-\xff\""), 1)},
		{name: "non-UTF-8 everywhere", body: bytes.ReplaceAll(valid, []byte("e"), []byte{0xff})},
		{name: "duplicate top-level key", body: append([]byte(`{"parent": null,`), valid[1:]...)},
		{name: "duplicate key in the parent", body: bytes.Replace(valid, []byte(`"kind":"Memcached"`), []byte(`"kind":"Memcached","kind":"Foo"`), 1)},
		{name: "missing children map", body: testutil.Edit(t, valid, func(m map[string]any) { delete(m, "children") }), want: 400},
		{name: "Pods of another parent", body: other},
		{name: "huge array in a Pod", body: hugePods},
		{name: "huge children map", body: set([]string{"children", "Deployment.apps/v1"}, manyObjects(20000))},
		{name: "deeply nested spec", body: deep(100000)},
		{name: "deeply nested, shallow enough to decode", body: deep(500)},
		{name: "null body", body: []byte("null"), want: 400},
		{name: "NUL bytes", body: []byte("{\x00}"), want: 400},
		{name: "number overflow in generation", body: set([]string{"parent", "metadata", "generation"}, json.Number("1e400")), want: 400},
	}
	// null and a value of every other type in every field the hook reads.
	for _, path := range [][]string{
		{"parent"}, {"parent", "apiVersion"}, {"parent", "kind"}, {"parent", "metadata"}, {"parent", "metadata", "name"},
		{"parent", "metadata", "namespace"}, {"parent", "metadata", "generation"}, {"parent", "metadata", "labels"},
		{"parent", "spec"}, {"parent", "spec", "size"}, {"parent", "spec", "image"}, {"parent", "spec", "memcached"}, {"parent", "status"},
		{"children"}, {"children", "Deployment.apps/v1"}, {"related"}, {"related", "Pod.v1"}, {"finalizing"}, {"controller"},
	} {
		for _, v := range []any{nil, true, 42, -1.5, "x", []any{}, []any{1, "a", nil}, map[string]any{}} {
			name := strings.Join(path, ".") + " = " + string(must(json.Marshal(v)))
			tests = append(tests, struct {
				name string
				body []byte
				want int
			}{name: name, body: set(path, v)})
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := newTestServer(t, serverOptions{})
			res := post(t, srv.Client(), srv.URL+"/sync", tt.body)
			if tt.want != 0 && res.status != tt.want {
				t.Errorf("status = %d, want %d; body: %.300s", res.status, tt.want, res.body)
			}
			checkSafeAnswer(t, res)
			// The server still answers.
			decodeSyncAnswer(t, post(t, srv.Client(), srv.URL+"/sync", valid))
		})
	}
}

// checkSafeAnswer fails the test unless res is a complete 200 sync answer
// or a 4xx with a JSON error.
func checkSafeAnswer(t *testing.T, res result) {
	t.Helper()
	switch {
	case res.status == http.StatusOK:
		decodeSyncAnswer(t, res)
	case res.status >= 400 && res.status < 500:
		decodeErrorAnswer(t, res)
	default:
		t.Errorf("status = %d, want 200 or a 4xx; body: %.300s", res.status, res.body)
	}
}

// setPath sets m's value at path, making objects on the way.
func setPath(m map[string]any, path []string, v any) {
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}

// manyObjects is a children map of n small Deployments.
func manyObjects(n int) map[string]any {
	out := map[string]any{}
	for i := range n {
		name := "d" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + "-" + itoa(i)
		out["cache/"+name] = map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": name, "namespace": "cache"}}
	}
	return out
}

func itoa(i int) string { return string(must(json.Marshal(i))) }

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// rawPost sends a POST /sync with the given Content-Length and body on a
// new connection, the whole body before reading anything, as a client that
// does not watch for an early answer does, and returns the answer. It
// fails the test if the connection breaks first.
func rawPost(t *testing.T, addr string, contentLength int64, body []byte) result {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	head := fmt.Sprintf("POST /sync HTTP/1.1\r\nHost: hook\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", contentLength)
	if _, err := c.Write(append([]byte(head), body...)); err != nil {
		t.Fatalf("sending the %d-byte body: %v", len(body), err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	return readResult(t, resp)
}

// TestRefusedCallsGetTheirAnswer checks that a call refused from its
// headers alone gets its answer, not a broken connection, even when its
// caller sends the whole body before reading: the body is larger than the
// loopback's socket buffers, so unless the hook reads it, the sender
// blocks until the hook closes the connection and meets a reset.
func TestRefusedCallsGetTheirAnswer(t *testing.T) {
	body := bytes.Repeat([]byte(" "), 24<<20) // under the 32 MiB limit
	tokenFile := filepath.Join(t.TempDir(), "token")
	testutil.WriteFileAtomic(t, tokenFile, []byte("s3cret-token\n"))
	tests := []struct {
		name       string
		opts       func(t *testing.T) serverOptions
		holdSlot   bool // take the one concurrency slot first
		wantStatus int
	}{
		{
			name: "401 without a token",
			opts: func(t *testing.T) serverOptions {
				m := newMetrics()
				auth, err := newAuthenticator(authConfig{tokenFile: tokenFile}, slog.New(slog.DiscardHandler), m)
				if err != nil {
					t.Fatal(err)
				}
				return serverOptions{metrics: m, auth: auth}
			},
			wantStatus: http.StatusUnauthorized,
		},
		{
			name:       "429 with the concurrency slot taken",
			opts:       func(*testing.T) serverOptions { return serverOptions{maxConcurrentCalls: 1} },
			holdSlot:   true,
			wantStatus: http.StatusTooManyRequests,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := newTestServer(t, tt.opts(t))
			if tt.holdSlot {
				holder := newBlockingBody([]byte("{}"))
				go serveInProcess(srv.Config.Handler, holder)
				<-holder.started
				t.Cleanup(func() { close(holder.release) })
			}
			res := rawPost(t, srv.Listener.Addr().String(), int64(len(body)), body)
			if res.status != tt.wantStatus {
				t.Fatalf("status = %d, want %d; body: %.300s", res.status, tt.wantStatus, res.body)
			}
			if got := decodeErrorAnswer(t, res); got == "" {
				t.Errorf("the %d has no error message", res.status)
			}
		})
	}
}

// TestStatedLengthOverLimit checks that a body whose stated length is over
// --max-request-bytes is refused 413 before anything is read or allocated,
// however large the length it states.
func TestStatedLengthOverLimit(t *testing.T) {
	for _, n := range []int64{32<<20 + 1, 1 << 40, 1<<63 - 1} {
		t.Run(strconv.FormatInt(n, 10), func(t *testing.T) {
			srv, _ := newTestServer(t, serverOptions{})
			res := rawPost(t, srv.Listener.Addr().String(), n, []byte("{}"))
			if res.status != http.StatusRequestEntityTooLarge {
				t.Fatalf("status = %d, want 413; body: %.300s", res.status, res.body)
			}
			if got := decodeErrorAnswer(t, res); !strings.Contains(got, "--max-request-bytes") {
				t.Errorf("error = %q, want it to name --max-request-bytes", got)
			}
		})
	}
}
