package main

import (
	"bytes"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/test/testutil"
)

// scrape GETs /metrics, checks that it is Prometheus's text format, and
// returns every sample keyed `name{label="value",...}` (labels sorted; a
// histogram gives name_count and name_sum).
func scrape(t *testing.T, client *http.Client, base string) map[string]float64 {
	t.Helper()
	res := do(t, client, http.MethodGet, base+"/metrics", "", nil)
	if res.status != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", res.status, res.body)
	}
	if mt, params, _ := mime.ParseMediaType(res.header.Get("Content-Type")); mt != "text/plain" || params["version"] != "0.0.4" {
		t.Errorf("GET /metrics Content-Type = %q, want Prometheus text format 0.0.4", res.header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(bytes.NewReader(res.body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v\n%s", err, res.body)
	}
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			labels := labelString(m.GetLabel())
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[name+labels] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[name+labels] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[name+"_count"+labels] = float64(m.GetHistogram().GetSampleCount())
				out[name+"_sum"+labels] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

func labelString(pairs []*dto.LabelPair) string {
	if len(pairs) == 0 {
		return ""
	}
	var parts []string
	for _, p := range pairs {
		parts = append(parts, fmt.Sprintf("%s=%q", p.GetName(), p.GetValue()))
	}
	slices.Sort(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

// TestAnswerTimestampPerMemcached checks memcached_hook_answer_timestamp_seconds
// through a real server: one series per Memcached answered, carrying the
// time and the Degraded reason of its last answer, the series of an older
// reason gone, and none left for a Memcached once its finalize is answered.
func TestAnswerTimestampPerMemcached(t *testing.T) {
	// cache/cache-a, with every kind of child the hook manages observed
	// (the capture predates some), so that it is not Degraded.
	healthy := testutil.Edit(t, testutil.LoadCapture(t, "v2/0005-sync.json").Request, func(m map[string]any) {
		children := m["children"].(map[string]any)
		for _, k := range []string{memcached.ServiceKey, memcached.PDBKey, memcached.NetworkPolicyKey, memcached.ServiceAccountKey,
			memcached.RoleKey, memcached.RoleBindingKey, memcached.ConfigMapKey, memcached.EndpointSliceKey} {
			if children[k] == nil {
				children[k] = map[string]any{}
			}
		}
	})
	invalid := testutil.Edit(t, healthy, func(m map[string]any) { m["parent"].(map[string]any)["spec"] = map[string]any{"size": -1} })
	other := testutil.Edit(t, healthy, func(m map[string]any) { setPath(m, []string{"parent", "metadata", "name"}, "cache-b") })
	finalize := testutil.LoadCapture(t, "v2/0043-finalize.json").Request // cache/cache-a
	type call struct {
		path string
		body []byte
	}
	const name = "memcached_hook_answer_timestamp_seconds"
	series := func(memcached, reason string) string {
		return fmt.Sprintf(`%s{memcached=%q,namespace="cache",reason=%q}`, name, memcached, reason)
	}
	// Each call is answered one second after the one before, the first
	// at second 1.
	at := func(call int) float64 { return float64(fixedNow.Add(time.Duration(call)*time.Second).UnixNano()) / 1e9 }
	tests := []struct {
		name  string
		calls []call
		want  map[string]float64
	}{
		{
			name:  "one answer",
			calls: []call{{"/sync", healthy}},
			want:  map[string]float64{series("cache-a", "AsExpected"): at(1)},
		},
		{
			name:  "the later answer's time",
			calls: []call{{"/sync", healthy}, {"/sync", healthy}},
			want:  map[string]float64{series("cache-a", "AsExpected"): at(2)},
		},
		{
			name:  "Degraded replaces AsExpected",
			calls: []call{{"/sync", healthy}, {"/sync", invalid}},
			want:  map[string]float64{series("cache-a", "InvalidSpec"): at(2)},
		},
		{
			name:  "AsExpected replaces Degraded",
			calls: []call{{"/sync", invalid}, {"/sync", healthy}},
			want:  map[string]float64{series("cache-a", "AsExpected"): at(2)},
		},
		{
			name:  "a series per Memcached",
			calls: []call{{"/sync", invalid}, {"/sync", other}},
			want:  map[string]float64{series("cache-a", "InvalidSpec"): at(1), series("cache-b", "AsExpected"): at(2)},
		},
		{
			name:  "finalize removes the Memcached's series only",
			calls: []call{{"/sync", invalid}, {"/sync", other}, {"/finalize", finalize}},
			want:  map[string]float64{series("cache-b", "AsExpected"): at(2)},
		},
		{
			name:  "a refused request changes nothing",
			calls: []call{{"/sync", healthy}, {"/sync", []byte(`{"parent":`)}},
			want:  map[string]float64{series("cache-a", "AsExpected"): at(1)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n int
			var mu sync.Mutex
			srv, _ := newTestServer(t, serverOptions{now: func() time.Time {
				mu.Lock()
				defer mu.Unlock()
				n++
				return fixedNow.Add(time.Duration(n) * time.Second)
			}})
			for _, c := range tt.calls {
				post(t, srv.Client(), srv.URL+c.path, c.body)
			}
			got := map[string]float64{}
			for k, v := range scrape(t, srv.Client(), srv.URL) {
				if strings.HasPrefix(k, name+"{") {
					got[k] = v
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", name, diff)
			}
		})
	}
}

// TestExposedNames scrapes the hook after a call to each hook, an invalid
// spec among them, and holds the names of its metrics to
// test/monitoring/testdata/exposed/memcached-hook.txt (go test -update
// rewrites it), which the alerts and the dashboard are checked against.
func TestExposedNames(t *testing.T) {
	syncBody := testutil.LoadCapture(t, "v2/0005-sync.json").Request
	invalid := testutil.Edit(t, syncBody, func(m map[string]any) { m["parent"].(map[string]any)["spec"] = map[string]any{"size": -1} })
	srv, _ := newTestServer(t, serverOptions{})
	c := srv.Client()
	post(t, c, srv.URL+"/customize", testutil.LoadCapture(t, "v2/0001-customize.json").Request)
	post(t, c, srv.URL+"/sync", invalid)
	post(t, c, srv.URL+"/sync", syncBody)
	post(t, c, srv.URL+"/finalize", testutil.Edit(t, testutil.LoadCapture(t, "v2/0043-finalize.json").Request, func(m map[string]any) {
		setPath(m, []string{"parent", "metadata", "name"}, "cache-b")
	}))
	res := do(t, c, http.MethodGet, srv.URL+"/metrics", "", nil)
	if res.status != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", res.status, res.body)
	}
	testutil.CheckExposedNames(t, "memcached-hook", "memcached_hook_", res.body)
}

// TestThreadsPerMemcached checks memcached_hook_memcached_threads, which
// the connection alerts read (memcached_exporter does not show -t): one
// series per Memcached, the defaulted -t of its last valid sync answer,
// kept through an invalid spec (which changes no Pod), gone once its
// finalize is answered.
func TestThreadsPerMemcached(t *testing.T) {
	healthy := testutil.LoadCapture(t, "v2/0005-sync.json").Request // cache/cache-a, threads unset
	eight := testutil.Edit(t, healthy, func(m map[string]any) {
		setPath(m, []string{"parent", "spec", "memcached", "threads"}, 8)
	})
	invalid := testutil.Edit(t, healthy, func(m map[string]any) { m["parent"].(map[string]any)["spec"] = map[string]any{"size": -1} })
	other := testutil.Edit(t, eight, func(m map[string]any) { setPath(m, []string{"parent", "metadata", "name"}, "cache-b") })
	finalize := testutil.LoadCapture(t, "v2/0043-finalize.json").Request // cache/cache-a
	const name = "memcached_hook_memcached_threads"
	series := func(memcached string) string {
		return fmt.Sprintf(`%s{memcached=%q,namespace="cache"}`, name, memcached)
	}
	tests := []struct {
		name  string
		calls [][2]string
		want  map[string]float64
	}{
		{name: "the default", calls: [][2]string{{"/sync", "healthy"}}, want: map[string]float64{series("cache-a"): 4}},
		{name: "the spec's", calls: [][2]string{{"/sync", "healthy"}, {"/sync", "eight"}}, want: map[string]float64{series("cache-a"): 8}},
		{name: "an invalid spec keeps the last valid one's", calls: [][2]string{{"/sync", "eight"}, {"/sync", "invalid"}}, want: map[string]float64{series("cache-a"): 8}},
		{name: "none before a valid spec", calls: [][2]string{{"/sync", "invalid"}}, want: map[string]float64{}},
		{
			name:  "finalize removes the Memcached's series only",
			calls: [][2]string{{"/sync", "healthy"}, {"/sync", "other"}, {"/finalize", "finalize"}},
			want:  map[string]float64{series("cache-b"): 8},
		},
	}
	bodies := map[string][]byte{"healthy": healthy, "eight": eight, "invalid": invalid, "other": other, "finalize": finalize}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := newTestServer(t, serverOptions{})
			for _, c := range tt.calls {
				post(t, srv.Client(), srv.URL+c[0], bodies[c[1]])
			}
			got := map[string]float64{}
			for k, v := range scrape(t, srv.Client(), srv.URL) {
				if strings.HasPrefix(k, name+"{") {
					got[k] = v
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", name, diff)
			}
		})
	}
}
