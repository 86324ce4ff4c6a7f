package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/test/dataplane"
	"github.com/example/memcached-operator/test/testutil"
)

// proxyReport is the agent's report of its proxy in the report file: the
// contract.ProxyReport's JSON, or "" when there is none.
func proxyReport(t *testing.T, reportFile, pod string) string {
	t.Helper()
	b, err := os.ReadFile(reportFile)
	if os.IsNotExist(err) {
		return ""
	}
	var data map[string]string
	if err != nil || json.Unmarshal(b, &data) != nil {
		t.Fatalf("the report file: %v\n%s", err, b)
	}
	raw, ok := data[contract.ProxyReportKey(pod)]
	if !ok {
		return ""
	}
	if _, err := contract.DecodeProxyReport(raw); err != nil {
		t.Fatalf("the proxy's report %q: %v", raw, err)
	}
	return raw
}

// waitForReport waits until the report file holds want for pod's proxy.
func waitForReport(t *testing.T, reportFile, pod, want string) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := proxyReport(t, reportFile, pod); got != want {
			return fmt.Errorf("the proxy's report is %q, want %q", got, want)
		}
		return nil
	})
}

// statOf is one of the proxy's stats, as a number.
func statOf(t *testing.T, p *dataplane.Proxy, name string) int {
	t.Helper()
	n, err := strconv.Atoi(p.Stats(t)[name])
	if err != nil {
		t.Fatalf("the proxy's stat %s: %v", name, err)
	}
	return n
}

// TestRunConfirmsWhatTheProxyLoaded runs the agent as the proxy Pod's
// sidecar (the hook's arguments, --from-file and --report-file in place
// of the API server) beside memcached 1.6.45 running as the proxy with
// the hook's route configuration. The agent's readiness and its report
// follow what the proxy says it routes by, not the file the agent wrote:
// nothing before any pool (the proxy routes by its placeholder); the
// table's version once the proxy loaded it; a new one after a change of
// routes (a reload) and after a change of versions alone (no reload); a
// proxy that says nothing (frozen) is not Ready, and its report says no
// pool, though the file holds a newer one; thawed, it loads that one;
// with zones, each zone's version; on a graceful stop the report goes.
func TestRunConfirmsWhatTheProxyLoaded(t *testing.T) {
	c := &dataplane.Cluster{Name: "cache", Namespace: "shop", Spec: `{"size":2,"proxy":{"enabled":true}}`}
	c.Sync(t)
	p := dataplane.StartProxy(t, nextIP(t), c.ProxySetup(t))
	dir := t.TempDir()
	source, reportFile := filepath.Join(dir, "cache.json"), filepath.Join(dir, "reports.json")
	const pod = "cache-proxy-7d9f-x2k"
	a := startAgent(t, append(p.AgentArgs(), "--from-file="+source, "--file-poll-interval=20ms", "--report-file="+reportFile), map[string]string{"POD_NAME": pod})
	admin := "http://" + a.admin

	// No pool: the agent writes none, the proxy routes by its
	// placeholder and says nothing, for two of its crons at least.
	a.stdout.WaitFor(t, "watching the proxy's announcements", a.exited)
	runs := statOf(t, p, "proxy_config_cron_runs")
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := statOf(t, p, "proxy_config_cron_runs"); n < runs+2 {
			return fmt.Errorf("the proxy's cron ran %d times, want %d", n, runs+2)
		}
		return nil
	})
	if got := proxyReport(t, reportFile, pod); got != "" {
		t.Errorf("before any pool, the report is %q, want none", got)
	}
	if code, body := httpGet(t, admin+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz before any pool: %d %q", code, body)
	}
	if got := metricValue(t, admin, "memcached_agent_proxy_loaded"); got != 0 {
		t.Errorf("memcached_agent_proxy_loaded before any pool = %d", got)
	}

	// The first pool, of a Memcached that hands nothing off: the agent
	// is Ready once the proxy loaded it, and reports nothing (nobody
	// waits for the proxy's word, and ConfigMap NAME-agent does not
	// exist), two of the proxy's announcements later.
	const v1 = 1767225600000
	testutil.WriteFileAtomic(t, source, memcachedSlots("cache", v1, "10.0.0.1", "10.0.0.2"))
	want := fmt.Sprintf("ok: pool version %d, 2 slots, 0 down; the proxy loaded =%d\n", v1, v1)
	if code, body := waitForReadyz(t, admin, func(body string) bool { return body == want }); code != http.StatusOK || body != want {
		t.Errorf("/readyz once the proxy loaded the pool: %d %q, want 200 %q", code, body, want)
	}
	runs = statOf(t, p, "proxy_config_cron_runs")
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := statOf(t, p, "proxy_config_cron_runs"); n < runs+2 {
			return fmt.Errorf("the proxy's cron ran %d times, want %d", n, runs+2)
		}
		return nil
	})
	if got := proxyReport(t, reportFile, pod); got != "" {
		t.Errorf("a Memcached that hands nothing off: the report is %q, want none", got)
	}
	if strings.Contains(a.stdout.String(), "cannot report") {
		t.Errorf("the agent warned of a report nobody asked for:\n%s", a.stdout.String())
	}

	// keepWarm on: copies wait for the proxies' word, which is reported.
	testutil.WriteFileAtomic(t, source, keepWarmSlots("cache", v1, "10.0.0.1", "10.0.0.2"))
	waitForReport(t, reportFile, pod, fmt.Sprintf(`{"loaded":{"":%d}}`, v1))
	waitForMetric(t, admin, "memcached_agent_proxy_loaded 1")
	waitForMetric(t, admin, fmt.Sprintf("memcached_agent_proxy_loaded_version %s", strconv.FormatFloat(v1, 'g', -1, 64)))
	reloads := statOf(t, p, "proxy_config_reloads")

	// Other routes: the proxy reloads. Timed from the status's rename to
	// the report (the pool is written within milliseconds; the proxy
	// loads it at its next whole second and says so at the one after).
	began := time.Now()
	testutil.WriteFileAtomic(t, source, keepWarmSlots("cache", v1+1, "10.0.0.1", "10.0.0.3"))
	waitForReport(t, reportFile, pod, fmt.Sprintf(`{"loaded":{"":%d}}`, v1+1))
	testutil.Benchmark("BenchmarkProxyConfirm/routes", "%.3f s", time.Since(began).Seconds())
	if got := statOf(t, p, "proxy_config_reloads"); got != reloads+1 {
		t.Errorf("the proxy reloaded %d times for a change of routes, want 1", got-reloads)
	}

	// Another version, the same routes: taken without a reload, and said
	// at the proxy's next whole second.
	began = time.Now()
	testutil.WriteFileAtomic(t, source, keepWarmSlots("cache", v1+2, "10.0.0.1", "10.0.0.3"))
	waitForReport(t, reportFile, pod, fmt.Sprintf(`{"loaded":{"":%d}}`, v1+2))
	testutil.Benchmark("BenchmarkProxyConfirm/versions", "%.3f s", time.Since(began).Seconds())
	if got := statOf(t, p, "proxy_config_reloads"); got != reloads+1 {
		t.Errorf("the proxy reloaded %d times for a change of versions alone, want none", got-reloads-1)
	}

	// A proxy that says nothing: the file moves on, the report does not
	// follow it; past confirm.Quiet the agent knows nothing.
	p.Freeze(t)
	frozen := true
	defer func() {
		if frozen {
			p.Thaw(t)
		}
	}()
	testutil.WriteFileAtomic(t, source, keepWarmSlots("cache", v1+3, "10.0.0.4"))
	waitForFile(t, p.PoolFile, fmt.Sprintf("version %d\n# tables =%d\n10.0.0.4:11211\nend 1\n", v1+3, v1+3))
	waitForReport(t, reportFile, pod, `{"loaded":{}}`)
	if code, body := httpGet(t, admin+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "the proxy has not said it loaded a pool") {
		t.Errorf("/readyz with the proxy silent: %d %q", code, body)
	}
	waitForMetric(t, admin, "memcached_agent_proxy_loaded 0")
	p.Thaw(t)
	frozen = false
	waitForReport(t, reportFile, pod, fmt.Sprintf(`{"loaded":{"":%d}}`, v1+3))
	if code, body := waitForReadyz(t, admin, func(body string) bool { return strings.Contains(body, "the proxy loaded =") }); code != http.StatusOK {
		t.Errorf("/readyz once the proxy speaks again: %d %q", code, body)
	}

	// Zones: each zone's version, in one report.
	testutil.WriteFileAtomic(t, source, []byte(fmt.Sprintf(`{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":"cache","namespace":"shop"},`+
		`"spec":{"size":1,"zones":{"names":["a","b"]}},"status":{"zones":[`+
		`{"name":"a","slotTable":{"version":%d,"slots":[{"slot":0,"pod":"cache-a-0","ip":"10.0.1.1","state":"Serving"}]}},`+
		`{"name":"b","slotTable":{"version":%d,"slots":[{"slot":0,"pod":"cache-b-0","ip":"10.0.2.1","state":"Serving"}]}}]}}`, v1+5, v1+4)))
	waitForReport(t, reportFile, pod, fmt.Sprintf(`{"loaded":{"a":%d,"b":%d}}`, v1+5, v1+4))
	waitForMetric(t, admin, fmt.Sprintf("memcached_agent_proxy_loaded_version %s", strconv.FormatFloat(v1+5, 'g', -1, 64)))

	if err := a.stop(t); err != nil {
		t.Errorf("run = %v", err)
	}
	if got := proxyReport(t, reportFile, pod); got != "" {
		t.Errorf("after a graceful stop, the report is %q, want none", got)
	}
	if n := proxyExited(p); n != "" {
		t.Errorf("the proxy: %s", n)
	}
}

// keepWarmSlots is memcachedSlots of a Memcached with keepWarm: it hands
// items off, and its copies wait for the proxies' word.
func keepWarmSlots(name string, version int64, slots ...string) []byte {
	return bytes.Replace(memcachedSlots(name, version, slots...), []byte(`"spec":{`), []byte(`"spec":{"rollout":{"keepWarm":true},`), 1)
}

// proxyExited says how the proxy exited, "" while it runs.
func proxyExited(p *dataplane.Proxy) string {
	if exited, how := p.Exited(); exited {
		return "exited: " + how + ": " + p.Log()
	}
	return ""
}
