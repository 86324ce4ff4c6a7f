package monitoring

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/example/memcached-operator/test/dataplane"
	"github.com/example/memcached-operator/test/memcachedtest"
	"github.com/example/memcached-operator/test/testutil"
)

// loopback is this package's block of loopback addresses.
var loopback = testutil.Loopback("test/monitoring")

// exporterPort is memcached_exporter's, as in the Pods.
const exporterPort = 9150

// synthetic are the series Prometheus makes itself for every target.
var synthetic = []string{"up", "scrape_duration_seconds", "scrape_samples_scraped"}

// extstoreSpec is a Memcached with spec.extstore as small as the API
// takes it: a disk of 320Mi (a file of four 64 MiB pages) beside 64 MB of
// RAM, for values of 16 KiB.
const extstoreSpec = `{"size":1,"memcached":{"maxMemoryMB":64},"extstore":{"size":"320Mi","expectedItemSize":16384}}`

// extstorePodDir is where the hook mounts the extstore volume in the
// memcached container (sync/memcached's extstoreDir).
const extstorePodDir = "/run/memcached/extstore"

// extstoreArgs are memcached's arguments as the hook answers them for a
// Memcached of spec, which has spec.extstore: the memcached container's,
// but -p (dataplane.StartMemcached sets it), with the extstore file in a
// directory of the test's instead of the Pod's volume.
func extstoreArgs(t *testing.T, spec string) []string {
	t.Helper()
	c := &dataplane.Cluster{Name: "extstore", Namespace: promNamespace, Spec: spec}
	c.Sync(t)
	containers := c.PodTemplate(t).Spec.Containers
	i := slices.IndexFunc(containers, func(c corev1.Container) bool { return c.Name == "memcached" })
	if i < 0 {
		t.Fatalf("the hook's Pod template has no memcached container")
	}
	hook := containers[i].Args
	dir := memcachedtest.Dir(t, "memcached-extstore-")
	var args []string
	moved := false
	for j := 0; j < len(hook); j++ {
		a := hook[j]
		if a == "-p" {
			j++
			continue
		}
		if rest, ok := strings.CutPrefix(a, "ext_path="+extstorePodDir+"/"); ok {
			a, moved = "ext_path="+dir+"/"+rest, true
		}
		args = append(args, a)
	}
	if !moved {
		t.Fatalf("the hook's memcached arguments %q have no ext_path=%s/...", hook, extstorePodDir)
	}
	return args
}

// exporterNames runs memcached 1.6.45 with extstore on (the hook's flags
// for extstoreSpec: the exporter shows memcached_extstore_ series only
// then) and memcached_exporter on an address of the package's block, as
// the Pod runs them, stores an item (the slab metrics show only for a slab
// class that holds one), and returns the names of the memcached_ series
// the exporter shows.
func exporterNames(t *testing.T) []string {
	t.Helper()
	bin := testutil.Program(t, "MEMCACHED_EXPORTER_BIN", "memcached_exporter (make memcached-exporter)")
	ip := loopback.Lend(t)
	m := dataplane.StartMemcached(t, ip, extstoreArgs(t, extstoreSpec)...)
	c := memcachedtest.Dial(t, m.Addr())
	for _, x := range []struct{ req, want string }{
		{"set k 0 0 1\r\nv\r\n", "STORED\r\n"},
		{"get k\r\n", "VALUE k 0 1\r\nv\r\nEND\r\n"},
		{"get missing\r\n", "END\r\n"},
	} {
		if got := c.Do(x.req); got != x.want {
			t.Fatalf("memcached answered %q with %q, want %q", x.req, got, x.want)
		}
	}
	c.Close()

	addr := net.JoinHostPort(ip, fmt.Sprint(exporterPort))
	start(t, "memcached_exporter", addr, bin, "--memcached.address="+m.Addr(), "--web.listen-address="+addr)
	res, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d, %v: %s", res.StatusCode, err, body)
	}
	if !strings.Contains(string(body), "\nmemcached_up 1\n") {
		t.Fatalf("memcached_up is not 1:\n%s", body)
	}
	// The exporter shows the memcached_extstore_ series only when
	// memcached reports extstore_limit_maxbytes: extstore is on.
	if !strings.Contains(string(body), "\nmemcached_extstore_bytes_limit ") {
		t.Fatalf("no memcached_extstore_bytes_limit: memcached runs without extstore (%q):\n%s", m.Output(), body)
	}
	return testutil.ExposedNames(t, body, "memcached_")
}

// exposedNames are every name a rule or a panel may read: what
// memcached_exporter shows (scraped here), what the agent and the hook
// show (scraped by their own tests into testdata/exposed), and the series
// Prometheus makes for every target.
func exposedNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, n := range exporterNames(t) {
		names[n] = true
	}
	for _, program := range []string{"memcached-agent", "memcached-hook"} {
		data, err := os.ReadFile(testutil.ExposedNamesFile(program))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range strings.Fields(string(data)) {
			names[n] = true
		}
	}
	for _, n := range synthetic {
		names[n] = true
	}
	return names
}

var (
	// quoted strings, label matchers and grouping lists, and durations
	// hold no metric name; what remains are names, functions (followed by
	// a parenthesis), keywords and numbers.
	promqlString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	promqlMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promqlGrouping = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promqlWord     = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*\s*\(?`)
	promqlKeywords = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right", "inf", "nan"}
	// grafanaVariable is a dashboard variable ($namespace, ${memcached},
	// $__rate_interval), which Grafana replaces before Prometheus reads
	// the expression.
	grafanaVariable = regexp.MustCompile(`\$\{?[A-Za-z_][A-Za-z0-9_]*(:[a-z]+)?\}?`)
)

// metricNames are the metric names an expression reads.
func metricNames(expr string) []string {
	e := promqlString.ReplaceAllString(expr, `""`)
	e = grafanaVariable.ReplaceAllString(e, "1")
	e = promqlMatchers.ReplaceAllString(e, "")
	e = promqlGrouping.ReplaceAllString(e, "")
	e = promqlRange.ReplaceAllString(e, "")
	var names []string
	for _, w := range promqlWord.FindAllString(e, -1) {
		if strings.HasSuffix(w, "(") {
			continue
		}
		w = strings.TrimSpace(w)
		if !slices.Contains(promqlKeywords, strings.ToLower(w)) {
			names = append(names, w)
		}
	}
	return names
}

// TestMetricNames checks that metricNames finds the names in the shapes
// the rules and the dashboard write, and nothing else.
func TestMetricNames(t *testing.T) {
	tests := []struct {
		name string
		expr string
		want []string
	}{
		{name: "a name", expr: "memcached_up == 0", want: []string{"memcached_up"}},
		{name: "matchers and a range", expr: `rate(memcached_commands_total{command="get", status=~"hit|miss"}[5m])`, want: []string{"memcached_commands_total"}},
		{name: "grouping", expr: "sum by (namespace, memcached) (rate(a_total[5m])) / on (namespace) group_left max without (pod) (b)", want: []string{"a_total", "b"}},
		{name: "keywords and numbers", expr: "a > 0 and b or c unless d * 100", want: []string{"a", "b", "c", "d"}},
		{name: "a recording rule", expr: `memcached:hit_ratio:rate5m{memcached="x"}`, want: []string{"memcached:hit_ratio:rate5m"}},
		{name: "grafana variables", expr: `rate(x_total{namespace="$namespace", memcached=~"${memcached:regex}"}[$__rate_interval])`, want: []string{"x_total"}},
		{name: "a string with a name in it", expr: `label_replace(up, "dst", "memcached_up", "", "")`, want: []string{"up"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := metricNames(tt.expr); !slices.Equal(got, tt.want) {
				t.Errorf("metricNames(%q) = %q, want %q", tt.expr, got, tt.want)
			}
		})
	}
}

// TestRuleMetricsExist checks that every metric an alert or a recording
// rule reads is one the exporter, the agent or the hook really shows, or
// a recording rule of the same file.
func TestRuleMetricsExist(t *testing.T) {
	exposed := exposedNames(t)
	groups := readGroups(t, ruleFile)
	for _, g := range groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				exposed[r.Record] = true
			}
		}
	}
	for _, g := range groups {
		for _, r := range g.Rules {
			for _, n := range metricNames(r.Expr) {
				if !exposed[n] {
					t.Errorf("%s %s%s reads %s, which neither memcached_exporter, the agent nor the hook shows (testdata/exposed, or the exporter's scrape)", g.Name, r.Alert, r.Record, n)
				}
			}
		}
	}
}
