package monitoring

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/test/dataplane"
	"github.com/example/memcached-operator/test/memcachedtest"
	"github.com/example/memcached-operator/test/testutil"
)

// The Memcached every program of TestAlertsOnARealPrometheus is of: the
// hook's capture v2/0005-sync.json names it, and the scrape configuration
// labels the exporters' and the agent's series with it, as the
// ServiceMonitor the hook makes and the component's PodMonitor do.
const (
	promNamespace = "cache"
	promMemcached = "cache-a"
	// promExtstore is a second Memcached, of one Pod with spec.extstore
	// (extstoreSpec): cache-a has none.
	promExtstore = "cache-e"
	// promFor is every rule's "for", shortened from minutes.
	promFor = 3 * time.Second
	// promScrape is the scrape and evaluation interval.
	promScrape = time.Second
)

// TestAlertsOnARealPrometheus runs the shipped rules (manifests/components/
// prometheusrule, "for" shortened to promFor) in Debian's Prometheus
// (2.42, the prometheus package: make debian-clients installs it),
// scraping real memcached 1.6.45 Pods' exporters (memcached_exporter
// v0.16.0), an agent following its Memcached in a file and the hook, as a
// user's Prometheus would (issue 41), and the exporter of cache-e, a
// second Memcached of one Pod with spec.extstore, whose disk gets items.
// It checks that no alert is pending or firing in a healthy minute; that
// every dashboard query runs, and those that must have data do (the
// extstore panels have none for cache-a, which has no spec.extstore, and
// have data for cache-e); and that each fault fires its own alert:
// memcached killed (MemcachedDown), filled under -M
// (MemcachedOutOfMemoryErrors), every connection taken
// (MemcachedRefusingConnections, and not MemcachedDown, although the
// exporter is refused too), the followed file unreadable
// (MemcachedAgentNotFollowing), the agent killed (MemcachedAgentDown) and
// an invalid spec (MemcachedDegraded, MemcachedHookRefusingSpecs). Each
// fault's time to firing is printed as a benchmark line.
func TestAlertsOnARealPrometheus(t *testing.T) {
	prometheus := testutil.Installed(t, "prometheus", "runs the shipped rules on the real programs (Debian's prometheus package: make debian-clients installs it)")
	exporter := testutil.Program(t, "MEMCACHED_EXPORTER_BIN", "memcached_exporter (make memcached-exporter)")
	// Built while the data plane starts (and the agent is built).
	hook := buildHook(t)

	// The Pods: m-0 is killed, m-1 runs out of memory under -M, m-2 has
	// every connection taken (-c 64 with 4 threads serves 64 - 8 - 20 =
	// 36 as memcached_current_connections counts them).
	pods := []struct {
		name string
		args []string
	}{
		{"m-0", []string{"-m", "16"}},
		{"m-1", []string{"-m", "2", "-M"}},
		{"m-2", []string{"-m", "16", "-c", "64"}},
	}
	servers := map[string]*dataplane.Memcached{}
	c := &dataplane.Cluster{Name: promMemcached, Namespace: promNamespace, Spec: `{"size":3,"discovery":{"enabled":true},"metrics":{"enabled":true}}`}
	var scrape []any
	for _, p := range pods {
		ip := loopback.Lend(t)
		servers[p.name] = dataplane.StartMemcached(t, ip, p.args...)
		addr := net.JoinHostPort(ip, fmt.Sprint(exporterPort))
		start(t, "memcached_exporter "+p.name, addr, exporter, "--memcached.address="+servers[p.name].Addr(), "--web.listen-address="+addr)
		c.Pods = append(c.Pods, dataplane.Pod{Name: p.name, IP: ip, Ready: true})
		// As the hook's ServiceMonitor: job is the Service's name, and
		// namespace, memcached and pod name the Pod.
		scrape = append(scrape, map[string]any{"targets": []string{addr},
			"labels": map[string]string{"job": promMemcached, "namespace": promNamespace, "memcached": promMemcached, "pod": p.name}})
	}
	// cache-e: one Pod with the hook's extstore flags, scraped as cache-a's.
	extIP := loopback.Lend(t)
	ext := dataplane.StartMemcached(t, extIP, extstoreArgs(t, extstoreSpec)...)
	extExporter := net.JoinHostPort(extIP, fmt.Sprint(exporterPort))
	start(t, "memcached_exporter e-0", extExporter, exporter, "--memcached.address="+ext.Addr(), "--web.listen-address="+extExporter)
	scrape = append(scrape, map[string]any{"targets": []string{extExporter},
		"labels": map[string]string{"job": promExtstore, "namespace": promNamespace, "memcached": promExtstore, "pod": "e-0"}})
	memcachedPods := len(pods) + 1

	file := filepath.Join(t.TempDir(), "memcached.json")
	c.Sync(t)
	c.WriteFile(t, file)
	agent := dataplane.StartAgent(t, "--memcached="+promMemcached, "--namespace="+promNamespace, "--from-file="+file,
		"--listen=127.0.0.1:0", "--file-poll-interval=100ms")

	hookIP := loopback.Lend(t)
	hookAddr := net.JoinHostPort(hookIP, "8080")
	start(t, "memcached-hook", hookAddr, hook(), "--listen-address="+hookAddr, "--shutdown-delay=0", "--agent-image=memcached-hook:test")
	healthy, invalid := hookRequests(t)
	postSync(t, hookAddr, healthy)

	promAddr := net.JoinHostPort(hookIP, "9090")
	dir := t.TempDir()
	var groups []group
	for _, g := range readGroups(t, ruleFile) {
		for i := range g.Rules {
			if g.Rules[i].For != "" {
				g.Rules[i].For = promFor.String()
			}
		}
		groups = append(groups, g)
	}
	writeRuleFile(t, dir, groups)
	config, err := yaml.Marshal(map[string]any{
		"global":     map[string]any{"scrape_interval": promScrape.String(), "evaluation_interval": promScrape.String(), "scrape_timeout": promScrape.String()},
		"rule_files": []string{"rules.yaml"},
		"scrape_configs": []any{
			map[string]any{"job_name": promMemcached, "static_configs": scrape},
			// As the component's PodMonitor.
			map[string]any{"job_name": "memcached-agent", "static_configs": []any{map[string]any{"targets": []string{agent.Admin},
				"labels": map[string]string{"job": "memcached-agent", "namespace": promNamespace, "memcached": promMemcached, "component": "memcached-agent", "pod": "agent-0"}}}},
			// As the component's ServiceMonitor of the hook: its
			// series' namespace is the Memcached's.
			map[string]any{"job_name": "memcached-hook", "honor_labels": true, "static_configs": []any{map[string]any{"targets": []string{hookAddr},
				"labels": map[string]string{"pod": "memcached-hook-0"}}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), config, 0o600); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	start(t, "prometheus", promAddr, prometheus, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+promAddr)
	p := &promAPI{t: t, base: "http://" + promAddr}
	// Prometheus listens before it has loaded its TSDB and its
	// configuration, and answers its API 503 until then: it says when it
	// is ready on /-/ready (a query at once failed one of ten runs in
	// make flake-hunt).
	p.waitFor("prometheus ready", 30*time.Second, func() bool {
		res, err := http.Get(p.base + "/-/ready")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	p.waitFor("every target up", 30*time.Second, func() bool {
		up := p.query(`up`)
		return len(up) == memcachedPods+2 && !slices.ContainsFunc(up, func(s sample) bool { return s.value != 1 })
	})
	testutil.Benchmark("BenchmarkPrometheus/start-to-every-target-up", "%.1f s", time.Since(started).Seconds())
	// Before the healthy minute, which then covers a disk at work too.
	fillExtstore(t, p, ext.Addr())

	t.Run("healthy minute", func(t *testing.T) {
		p := p.with(t)
		for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(promScrape) {
			if a := p.alerts(); len(a) > 0 {
				t.Fatalf("alerts in a healthy minute: %v", a)
			}
		}
	})
	t.Run("dashboard queries", func(t *testing.T) {
		p := p.with(t)
		for _, e := range readDashboard(t).expressions(t) {
			expr := grafanaValues(promMemcached).Replace(e.expr)
			got := p.query(expr)
			reason, empty := emptyWhenHealthy(e.where)
			if readsExtstore(e.expr) {
				// The extstore panels of a Memcached without
				// spec.extstore show nothing, and no error; of one
				// with it, its disk.
				reason, empty = "no spec.extstore: the exporter shows no memcached_extstore_ series", true
				extExpr := grafanaValues(promExtstore).Replace(e.expr)
				if got := p.query(extExpr); len(got) == 0 {
					t.Errorf("%s: %s has no data for %s, which has spec.extstore", e.where, extExpr, promExtstore)
				}
			}
			if empty {
				if len(got) > 0 {
					t.Errorf("%s: %s has data %v; expected none (%s): update emptyWhenHealthy", e.where, expr, got, reason)
				}
				continue
			}
			if len(got) == 0 {
				t.Errorf("%s: %s has no data", e.where, expr)
			}
		}
	})
	t.Run("recording rules", func(t *testing.T) {
		p := p.with(t)
		for _, g := range groups {
			for _, r := range g.Rules {
				if r.Record == "" || r.Record == "memcached:connections:limit" {
					continue
				}
				if got := p.query(r.Record); len(got) == 0 {
					t.Errorf("recording rule %s has no data", r.Record)
				}
			}
		}
		limits := p.query(`memcached:connections:limit`)
		for _, s := range limits {
			// -c 1024 (the default) or 64, 4 threads: 1024 - 28, 64 - 28.
			want := 996.0
			if s.labels["pod"] == "m-2" {
				want = 36
			}
			if s.value != want {
				t.Errorf("memcached:connections:limit %v = %v, want %v", s.labels, s.value, want)
			}
		}
		if len(limits) != memcachedPods {
			t.Errorf("memcached:connections:limit: %v, want one per Pod", limits)
		}
	})

	// The faults, each on its own Pod or program, all at once; the
	// agent's in turn (a stopped agent follows nothing), each once the
	// one before has fired.
	type fault struct {
		name  string
		alert string
		match map[string]string
		// not is an alert the same labels must not fire meanwhile.
		not string
		// after is the fault whose firing begins this one: "" for the
		// start; a fault without begin is another alert of the fault
		// before it.
		after string
		begin func(t *testing.T)
		at    time.Time
		fired time.Duration
	}
	faults := []*fault{
		{name: "memcached-killed", alert: "MemcachedDown", match: map[string]string{"pod": "m-0"}, not: "MemcachedRefusingConnections",
			begin: func(t *testing.T) { servers["m-0"].Kill() }},
		{name: "out-of-memory", alert: "MemcachedOutOfMemoryErrors", match: map[string]string{"pod": "m-1"},
			begin: func(t *testing.T) { fillMemory(t, servers["m-1"].Addr()) }},
		{name: "connections-all-taken", alert: "MemcachedRefusingConnections", match: map[string]string{"pod": "m-2"}, not: "MemcachedDown",
			begin: func(t *testing.T) { takeConnections(t, p.with(t), servers["m-2"].Addr(), 36) }},
		{name: "invalid-spec", alert: "MemcachedDegraded", match: map[string]string{"reason": "InvalidSpec"},
			begin: func(t *testing.T) { postSync(t, hookAddr, invalid) }},
		{name: "invalid-spec", alert: "MemcachedHookRefusingSpecs", match: map[string]string{}},
		{name: "file-malformed", alert: "MemcachedAgentRefusingLists", match: map[string]string{"pod": "agent-0", "reason": "unreadable"},
			begin: func(t *testing.T) {
				if err := os.WriteFile(file, []byte("{"), 0o644); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "file-missing", alert: "MemcachedAgentNotFollowing", match: map[string]string{"pod": "agent-0"}, after: "file-malformed",
			begin: func(t *testing.T) {
				if err := os.Remove(file); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "agent-stopped", alert: "MemcachedAgentDown", match: map[string]string{"pod": "agent-0"}, after: "file-missing",
			begin: func(t *testing.T) { agent.Stop() }},
	}
	t.Run("faults", func(t *testing.T) {
		p := p.with(t)
		begin := func(after string) {
			var at time.Time
			for _, f := range faults {
				if f.after != after {
					continue
				}
				if f.begin != nil {
					f.begin(t)
					at = time.Now()
				}
				f.at = at
			}
		}
		begin("")
		pending := slices.Clone(faults)
		for deadline := time.Now().Add(60 * time.Second); len(pending) > 0 && time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
			alerts := p.alerts()
			var fired []string
			pending = slices.DeleteFunc(pending, func(f *fault) bool {
				if f.at.IsZero() {
					return false
				}
				if f.not != "" && slices.ContainsFunc(alerts, func(a alert) bool { return a.is(f.not, f.match) }) {
					t.Errorf("%s: %s fires (or is pending) too: %v", f.name, f.not, alerts)
				}
				if !slices.ContainsFunc(alerts, func(a alert) bool { return a.is(f.alert, f.match) && a.State == "firing" }) {
					return false
				}
				f.fired = time.Since(f.at)
				fired = append(fired, f.name)
				return true
			})
			for _, name := range fired {
				begin(name)
			}
		}
		for _, f := range pending {
			t.Errorf("%s: %s%v did not fire within 60 s: %v", f.name, f.alert, f.match, p.alerts())
		}
		for _, f := range faults {
			if f.fired > 0 {
				testutil.Benchmark("BenchmarkPrometheus/"+f.name+"/"+f.alert+"/time-to-firing", "%.1f s %.0f s-for", f.fired.Seconds(), promFor.Seconds())
			}
		}
	})
}

// emptyWhenHealthy says which dashboard queries have no data on a
// healthy Memcached with one agent, no proxy and no rollout, and why. (The
// hand-offs' and the pool's counters show 0 from the start: they have
// data.)
func emptyWhenHealthy(where string) (string, bool) {
	why, ok := map[string]string{
		`panel "Since last published" target 1`: "no spec.proxy: no pool written",
	}[where]
	return why, ok
}

// process is a program a test started.
type process struct {
	cmd  *exec.Cmd
	out  *testutil.LockedBuffer
	done chan struct{}
}

// start runs bin with args, waits until it listens on addr (30 s), and
// kills it when the test ends, printing its output if the test failed,
// or when the test binary dies (procAttr).
func start(t *testing.T, name, addr, bin string, args ...string) *process {
	t.Helper()
	p := &process{out: &testutil.LockedBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = procAttr()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("%s wrote:\n%s", name, p.out.String())
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if ours, _ := testutil.Listens(p.cmd.Process.Pid, addr); ours {
			return p
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited: %s", name, p.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not listen on %s: %s", name, addr, p.out.String())
		}
	}
}

// buildHook starts building cmd/memcached-hook into a temporary
// directory, removed when t ends, and returns what waits for the build
// and fails t if it failed.
func buildHook(t *testing.T) func() string {
	dir := t.TempDir()
	path := filepath.Join(dir, "memcached-hook")
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		out, berr := exec.Command("go", "build", "-o", path, filepath.Join(testutil.Root(), "cmd", "memcached-hook")).CombinedOutput()
		if berr != nil {
			err = fmt.Errorf("go build ./cmd/memcached-hook: %v\n%s", berr, out)
		}
	}()
	// Before TempDir's removal, which runs after this.
	t.Cleanup(func() { <-done })
	return func() string {
		t.Helper()
		<-done
		if err != nil {
			t.Fatal(err)
		}
		return path
	}
}

// hookRequests are two sync requests for cache/cache-a: one the hook
// answers AsExpected (every kind of child it manages observed), one with
// an invalid spec.
func hookRequests(t *testing.T) (healthy, invalid []byte) {
	t.Helper()
	healthy = testutil.Edit(t, testutil.LoadCapture(t, "v2/0005-sync.json").Request, func(m map[string]any) {
		children := m["children"].(map[string]any)
		for _, k := range []string{memcached.ServiceKey, memcached.PDBKey, memcached.NetworkPolicyKey, memcached.ServiceAccountKey,
			memcached.RoleKey, memcached.RoleBindingKey, memcached.ConfigMapKey, memcached.EndpointSliceKey} {
			if children[k] == nil {
				children[k] = map[string]any{}
			}
		}
	})
	invalid = testutil.Edit(t, healthy, func(m map[string]any) { m["parent"].(map[string]any)["spec"] = map[string]any{"size": -1} })
	return healthy, invalid
}

// postSync calls the hook's sync with body, as Metacontroller does.
func postSync(t *testing.T, addr string, body []byte) {
	t.Helper()
	res, err := http.Post("http://"+addr+"/sync", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("POST /sync: %d %s", res.StatusCode, out)
	}
}

// fillMemory stores items into the memcached at addr (run with -M), past
// its memory, so that it answers SERVER_ERROR out of memory, until the
// test ends.
func fillMemory(t *testing.T, addr string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	stop, done := make(chan struct{}), make(chan error, 1)
	go func() {
		r := bufio.NewReader(conn)
		value := strings.Repeat("x", 32<<10)
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			case <-time.After(5 * time.Millisecond):
			}
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := fmt.Fprintf(conn, "set k%d 0 0 %d\r\n%s\r\n", i, len(value), value); err != nil {
				done <- err
				return
			}
			if _, err := r.ReadString('\n'); err != nil {
				done <- err
				return
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		if err := <-done; err != nil {
			t.Errorf("storing into %s: %v", addr, err)
		}
		conn.Close()
	})
}

// fillExtstore stores 1,000 values of 16 KiB (16 MB, a quarter of -m 64)
// in the memcached with extstore at addr, waits until Prometheus shows
// them on its disk (ext_item_age=0 flushes them as they come), reads each
// back (those flushed, from the disk: ext_recache_rate=0 brings none back
// into RAM), and waits until Prometheus shows bytes read: the extstore
// panels then show a disk at work, not only zeros.
func fillExtstore(t *testing.T, p *promAPI, addr string) {
	t.Helper()
	const items = 1000
	c := memcachedtest.Dial(t, addr)
	value := bytes.Repeat([]byte("x"), 16<<10)
	c.Fill("ext", items, func(string, int) []byte { return value }, 0)
	sel := fmt.Sprintf(`{namespace=%q, memcached=%q}`, promNamespace, promExtstore)
	p.waitFor("items on "+promExtstore+"'s disk", 30*time.Second, func() bool {
		return len(p.query(`memcached_extstore_objects_used`+sel+` > 0`)) > 0
	})
	for i := range items {
		key := fmt.Sprintf("ext-%d", i)
		if it, ok := c.Get(key); !ok || !bytes.Equal(it.Value, value) {
			t.Fatalf("%s: %s came back %v (%d bytes), want its 16 KiB value", addr, key, ok, len(it.Value))
		}
	}
	p.waitFor("reads from "+promExtstore+"'s disk", 30*time.Second, func() bool {
		return len(p.query(`memcached_extstore_bytes_read_total`+sel+` > 0`)) > 0
	})
}

// takeConnections opens connections to the memcached at addr until it has
// 92 % of limit (the connections it serves, as memcached_current_connections
// counts them) open, waits until Prometheus has recorded 90 % or more, as
// a memcached filling up over a scrape interval or more would show, then
// takes every connection left and keeps taking each that frees up (the
// exporter's, when its garbage collector closes them) until the test
// ends.
func takeConnections(t *testing.T, p *promAPI, addr string, limit int) {
	t.Helper()
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	// open opens a connection and says whether memcached serves it: a
	// refused one reads "ERROR Too many open connections", written at
	// accept, before the request.
	open := func() bool {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			return false
		}
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		_, _ = io.WriteString(c, "version\r\n")
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "VERSION ") {
			c.Close()
			return false
		}
		_ = c.SetDeadline(time.Time{})
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		return true
	}
	// topUp opens connections until memcached has 92 % of limit open:
	// the exporter's idle ones, counted too, close now and then, and it
	// opens one a scrape, so memcached may have filled up meanwhile: a
	// refused stats or connection says it has.
	topUp := func() {
		for {
			st, err := memcachedtest.Stats(addr)
			if err != nil {
				return
			}
			var n int
			fmt.Sscan(st["curr_connections"], &n)
			if n >= limit*92/100 || !open() {
				return
			}
		}
	}
	p.waitFor("memcached:connections:percent of m-2 at 90 % or more", 30*time.Second, func() bool {
		topUp()
		return len(p.query(`memcached:connections:percent{pod="m-2"} >= 90`)) > 0
	})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if !open() {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
}

// promAPI queries a Prometheus's HTTP API for t.
type promAPI struct {
	t    *testing.T
	base string
}

func (p *promAPI) with(t *testing.T) *promAPI { return &promAPI{t: t, base: p.base} }

func (p *promAPI) get(path string, v any) {
	p.t.Helper()
	res, err := http.Get(p.base + path)
	if err != nil {
		p.t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		p.t.Fatal(err)
	}
	var r struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.Status != "success" {
		p.t.Fatalf("GET %s: %d %s (%v)", path, res.StatusCode, body, err)
	}
	if err := json.Unmarshal(r.Data, v); err != nil {
		p.t.Fatalf("GET %s: %v: %s", path, err, r.Data)
	}
}

// sample is one element of an instant vector.
type sample struct {
	labels map[string]string
	value  float64
}

func (s sample) String() string { return fmt.Sprintf("%v %v", s.labels, s.value) }

// query evaluates expr now; it fails the test if Prometheus refuses it.
func (p *promAPI) query(expr string) []sample {
	p.t.Helper()
	var d struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	p.get("/api/v1/query?query="+url.QueryEscape(expr), &d)
	var out []sample
	switch d.ResultType {
	case "vector":
		for _, r := range d.Result {
			var v float64
			fmt.Sscan(fmt.Sprint(r.Value[1]), &v)
			out = append(out, sample{labels: r.Metric, value: v})
		}
	default:
		p.t.Fatalf("%s: result type %q, want a vector", expr, d.ResultType)
	}
	return out
}

// alert is one of Prometheus's pending or firing alerts.
type alert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

func (a alert) String() string {
	var kv []string
	for k, v := range a.Labels {
		if k != "alertname" {
			kv = append(kv, k+"="+v)
		}
	}
	sort.Strings(kv)
	return fmt.Sprintf("%s{%s} %s", a.Labels["alertname"], strings.Join(kv, ","), a.State)
}

// is reports whether a is the alert name with the labels match.
func (a alert) is(name string, match map[string]string) bool {
	if a.Labels["alertname"] != name {
		return false
	}
	for k, v := range match {
		if a.Labels[k] != v {
			return false
		}
	}
	return true
}

func (p *promAPI) alerts() []alert {
	p.t.Helper()
	var d struct {
		Alerts []alert `json:"alerts"`
	}
	p.get("/api/v1/alerts", &d)
	return d.Alerts
}

// waitFor polls ok until it holds, or fails the test after d.
func (p *promAPI) waitFor(what string, d time.Duration, ok func() bool) {
	p.t.Helper()
	for deadline := time.Now().Add(d); !ok(); time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			p.t.Fatalf("no %s within %s", what, d)
		}
	}
}
