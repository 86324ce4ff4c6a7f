package memcached_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/sync/metacontroller"
	"github.com/example/memcached-operator/test/testutil"
)

// benchSizes are the Pod counts the benchmarks grow requests to: a small
// Memcached, a large one, the largest spec.size allows, and five times that
// (to show the cost stays linear past it).
var benchSizes = []int{3, 100, 1000, 5000}

// benchRequests grows one real-shaped sync request per benchSizes entry,
// once per test binary run: growing 5,000 Pods takes a while.
var benchRequests = func() func(tb testing.TB) map[int][]byte {
	var bodies map[int][]byte
	return func(tb testing.TB) map[int][]byte {
		tb.Helper()
		if bodies == nil {
			bodies = map[int][]byte{}
			for _, n := range benchSizes {
				bodies[n] = testutil.BigRequest(tb, n)
			}
		}
		return bodies
	}
}()

// BenchmarkSync measures the whole sync path of one call, as the HTTP
// handler runs it: decode the body, compute the answer, encode it. Beside
// ns/op and B/op it reports the request's size (req-B), so that allocation
// can be read against it.
func BenchmarkSync(b *testing.B) {
	for _, n := range benchSizes {
		body := benchRequests(b)[n]
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			now := time.Now()
			for b.Loop() {
				req, err := metacontroller.DecodeSyncRequest(body)
				if err != nil {
					b.Fatal(err)
				}
				a, err := memcached.Sync(req, now, hookOptions)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := json.Marshal(a.Response); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(body)), "req-B")
		})
	}
}

// BenchmarkFloor is the floor BenchmarkSync is held against: one validating
// scan of the same bytes with JSON v2 (jsontext) under the same rules the
// hook decodes by (duplicate names and invalid UTF-8 refused), producing
// nothing. No decoder built on jsontext can cost less; the hook's own scan
// (sync/metacontroller/scan.go), by the same rules, costs about 0.6 of it,
// and so its decode can.
func BenchmarkFloor(b *testing.B) {
	for _, n := range benchSizes {
		body := benchRequests(b)[n]
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if !jsontext.Value(body).IsValid() {
					b.Fatal("request is not valid JSON")
				}
			}
			b.ReportMetric(float64(len(body)), "req-B")
		})
	}
}

// BenchmarkSyncPairs times BenchmarkFloor's scan and BenchmarkSync's
// whole path over the same 1,000-Pod request back to back, op by op, and
// reports the median of each op's ratios: sync/floor, and the decode's,
// the computing's and the encoding's part of it. On a machine other work
// loads, BenchmarkSync and BenchmarkFloor, run one after the other, meet
// different loads, and their ratio moved by more than the changes it was
// to measure; a pair meets the same.
func BenchmarkSyncPairs(b *testing.B) {
	body := benchRequests(b)[1000]
	now := time.Now()
	var sync, decode, compute, encode []float64
	for b.Loop() {
		t0 := time.Now()
		if !jsontext.Value(body).IsValid() {
			b.Fatal("request is not valid JSON")
		}
		t1 := time.Now()
		req, err := metacontroller.DecodeSyncRequest(body)
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		a, err := memcached.Sync(req, now, hookOptions)
		if err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		if _, err := json.Marshal(a.Response); err != nil {
			b.Fatal(err)
		}
		t4 := time.Now()
		floor := float64(t1.Sub(t0))
		sync = append(sync, float64(t4.Sub(t1))/floor)
		decode = append(decode, float64(t2.Sub(t1))/floor)
		compute = append(compute, float64(t3.Sub(t2))/floor)
		encode = append(encode, float64(t4.Sub(t3))/floor)
	}
	median := func(x []float64) float64 {
		slices.Sort(x)
		return x[len(x)/2]
	}
	b.ReportMetric(median(sync), "sync/floor")
	b.ReportMetric(median(decode), "decode/floor")
	b.ReportMetric(median(compute), "compute/floor")
	b.ReportMetric(median(encode), "encode/floor")
}

// BenchmarkSyncParts splits BenchmarkSync into its decode, compute and
// encode steps, at 3 and 1,000 Pods, to show where the time goes.
func BenchmarkSyncParts(b *testing.B) {
	for _, n := range []int{3, 1000} {
		body := benchRequests(b)[n]
		now := time.Now()
		req, err := metacontroller.DecodeSyncRequest(body)
		if err != nil {
			b.Fatal(err)
		}
		a, err := memcached.Sync(req, now, hookOptions)
		if err != nil {
			b.Fatal(err)
		}
		resp := a.Response
		b.Run(fmt.Sprintf("pods=%d/decode", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := metacontroller.DecodeSyncRequest(body); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("pods=%d/compute", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := memcached.Sync(req, now, hookOptions); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("pods=%d/encode", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := json.Marshal(resp); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("pods=%d/encode-v2", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := jsonv2.Marshal(resp); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeChoices decodes a 1,000-Pod request every way this hook
// could, the figures behind the choice of DecodeSyncRequest: encoding/json
// into generic maps and into the typed request (referenceRequest, the same
// types with JSON tags), JSON v2's Unmarshal into it, DecodeSyncRequest, and
// the validating scans of encoding/json and of JSON v2 with duplicate names
// allowed (a laxer floor than BenchmarkFloor's).
func BenchmarkDecodeChoices(b *testing.B) {
	body := benchRequests(b)[1000]
	choices := []struct {
		name   string
		decode func() error
	}{
		{"v1-map", func() error { var m map[string]any; return json.Unmarshal(body, &m) }},
		{"v1-typed", func() error { var r referenceRequest; return json.Unmarshal(body, &r) }},
		{"v2-typed", func() error { var r referenceRequest; return jsonv2.Unmarshal(body, &r) }},
		{"DecodeSyncRequest", func() error { _, err := metacontroller.DecodeSyncRequest(body); return err }},
		{"v1-valid", func() error {
			if !json.Valid(body) {
				return fmt.Errorf("invalid")
			}
			return nil
		}},
		{"v2-valid-dups-allowed", func() error {
			if !jsontext.Value(body).IsValid(jsontext.AllowDuplicateNames(true)) {
				return fmt.Errorf("invalid")
			}
			return nil
		}},
	}
	for _, c := range choices {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if err := c.decode(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestWriteBenchRequests writes the benchmarks' 3- and 1,000-Pod requests
// to the directory $MEMCACHED_BENCH_REQUESTS, as <n>.json, for the load
// generator in test/load (make bench sets it). Without it, it does nothing.
func TestWriteBenchRequests(t *testing.T) {
	dir := os.Getenv("MEMCACHED_BENCH_REQUESTS")
	if dir == "" {
		t.Skip("MEMCACHED_BENCH_REQUESTS is not set")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{3, 1000} {
		path := filepath.Join(dir, fmt.Sprintf("%d.json", n))
		if err := os.WriteFile(path, testutil.BigRequest(t, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
