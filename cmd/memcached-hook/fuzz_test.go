package main

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/example/memcached-operator/test/testutil"
)

// fuzzPaths are the hooks FuzzHandler calls, chosen by its first argument.
var fuzzPaths = []string{"/sync", "/finalize", "/customize"}

// FuzzHandler sends mutations of every captured request to the real
// handler, in process. Whatever the bytes: no panic; a 200 is a complete
// answer that passes hook v2's strict decoding; anything else is a 4xx
// with a JSON error, never a 5xx.
//
// make test runs it for a few seconds; make fuzz for as long as you like.
func FuzzHandler(f *testing.F) {
	for _, c := range testutil.Captures(f) {
		for i, p := range fuzzPaths {
			if p == c.Path {
				f.Add(uint8(i), []byte(c.Request))
			}
		}
	}
	handler := newServer(slog.New(slog.DiscardHandler), serverOptions{
		maxRequestBytes: 1 << 20, now: func() time.Time { return fixedNow }, ready: func() bool { return true },
	})
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		path := fuzzPaths[int(which)%len(fuzzPaths)]
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		res := result{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
		switch {
		case res.status == http.StatusOK && path == "/customize":
			var a customizeAnswer
			checkJSONContentType(t, res)
			topLevelKeys(t, res.body, "relatedResources")
			testutil.StrictDecode(t, res.body, &a)
			if a.RelatedResources == nil {
				t.Fatalf("relatedResources is null or missing: %s", res.body)
			}
		case res.status == http.StatusOK:
			decodeSyncAnswer(t, res)
		case res.status >= 400 && res.status < 500:
			decodeErrorAnswer(t, res)
		default:
			t.Fatalf("%s answered %d, want 200 or a 4xx; body: %.300s", path, res.status, res.body)
		}
	})
}
