package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/test/testutil"
)

// memcachedSlots is Memcached cache in namespace shop as kubectl prints
// it, with a slot table of version whose slots are "ip" (Serving) or "-"
// (Empty).
func memcachedSlots(name string, version int64, slots ...string) []byte {
	var entries []string
	for i, ip := range slots {
		if ip == "-" {
			entries = append(entries, fmt.Sprintf(`{"slot":%d,"state":"Empty"}`, i))
			continue
		}
		entries = append(entries, fmt.Sprintf(`{"slot":%d,"pod":"cache-%d","ip":%q,"state":"Serving"}`, i, i, ip))
	}
	return []byte(fmt.Sprintf(`{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":%q,"namespace":"shop"},"spec":{"size":%d},"status":{"slotTable":{"version":%d,"slots":[%s]}}}`,
		name, len(slots), version, strings.Join(entries, ",")))
}

// waitForFile waits until path holds want.
func waitForFile(t *testing.T, path, want string) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, func() error {
		if b, _ := os.ReadFile(path); string(b) != want {
			return fmt.Errorf("%s holds %q, want %q", path, b, want)
		}
		return nil
	})
}

// waitForMetric waits until /metrics shows line.
func waitForMetric(t *testing.T, admin, line string) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, func() error {
		if _, text := httpGet(t, admin+"/metrics"); !strings.Contains(text, line+"\n") {
			return fmt.Errorf("/metrics has no %q:\n%s", line, text)
		}
		return nil
	})
}

// metricValue is the value of series in /metrics, 0 when it is not there.
func metricValue(t *testing.T, admin, series string) int {
	t.Helper()
	_, text := httpGet(t, admin+"/metrics")
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("/metrics: %s is %q, not a count", series, v)
			}
			return n
		}
	}
	return 0
}

// TestRunPoolFile runs the program as the proxy Pod's sidecar does (no
// endpoint, --pool-file): /readyz fails until a pool is written; the pool
// follows the file through a change and a table with no Serving slot
// (which no list would serve, and which the proxy must still be given);
// a broken file and another Memcached leave the pool as it was; /metrics
// counts it all.
func TestRunPoolFile(t *testing.T) {
	dir := t.TempDir()
	source, poolFile := filepath.Join(dir, "cache.json"), filepath.Join(dir, "run", "pool")
	if err := os.Mkdir(filepath.Dir(poolFile), 0o755); err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, []string{"--memcached=cache", "--from-file=" + source, "--file-poll-interval=20ms", "--listen=", "--pool-file=" + poolFile, "--proxy-addr="}, nil)
	admin := "http://" + a.admin
	if a.addr != "" {
		t.Errorf("an endpoint listens on %s with --listen empty", a.addr)
	}
	if code, body := httpGet(t, admin+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "no pool written yet") {
		t.Errorf("/readyz before a pool: %d %q", code, body)
	}

	testutil.WriteFileAtomic(t, source, memcachedSlots("cache", 1767225600, "10.0.0.1", "10.0.0.2"))
	waitForFile(t, poolFile, "version 1767225600\n# tables =1767225600\n10.0.0.1:11211\n10.0.0.2:11211\nend 2\n")
	// The writer takes note of the pool once its file is in place.
	if code, body := waitForReadyz(t, admin, func(body string) bool { return body == "ok: pool version 1767225600, 2 slots, 0 down\n" }); code != http.StatusOK {
		t.Errorf("/readyz with a pool: %d %q", code, body)
	}
	if fi, _ := os.Stat(poolFile); fi.Mode().Perm() != 0o644 {
		t.Errorf("the pool file's mode is %v, want 0644", fi.Mode())
	}

	testutil.WriteFileAtomic(t, source, memcachedSlots("cache", 1767225601, "-", "-", "-"))
	allDown := "version 1767225601\n# tables =1767225601\n127.0.0.1:1 _down_0\n127.0.0.1:1 _down_1\n127.0.0.1:1 _down_2\nend 3\n"
	waitForFile(t, poolFile, allDown)
	waitForMetric(t, admin, `memcached_agent_lists_refused_total{reason="no_servers"} 1`)
	if code, body := waitForReadyz(t, admin, func(body string) bool { return strings.Contains(body, "3 down") }); code != http.StatusOK {
		t.Errorf("/readyz with every slot down: %d %q, want 200: the proxy has a pool", code, body)
	}

	before, _ := os.Stat(poolFile)
	// The follower may have found no file at all before the test wrote
	// the first one, which counts as unreadable too: count from here.
	unreadable := `memcached_agent_pool_refused_total{reason="unreadable"}`
	seen := metricValue(t, admin, unreadable)
	testutil.WriteFileAtomic(t, source, []byte(`{"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcach`))
	waitForMetric(t, admin, fmt.Sprintf("%s %d", unreadable, seen+1))
	testutil.WriteFileAtomic(t, source, memcachedSlots("other", 1767225602, "10.9.9.9"))
	waitForMetric(t, admin, `memcached_agent_pool_refused_total{reason="wrong_object"} 1`)
	after, _ := os.Stat(poolFile)
	if !os.SameFile(before, after) {
		t.Errorf("the pool file was replaced by a broken or foreign Memcached")
	}
	waitForFile(t, poolFile, allDown)

	testutil.WriteFileAtomic(t, source, memcachedSlots("cache", 1767225603, "10.0.0.1", "10.0.0.2", "10.0.0.3"))
	waitForFile(t, poolFile, "version 1767225603\n# tables =1767225603\n10.0.0.1:11211\n10.0.0.2:11211\n10.0.0.3:11211\nend 3\n")
	for _, line := range []string{
		"memcached_agent_pool_writes_total 3",
		"memcached_agent_pool_version 1.767225603e+09",
		"memcached_agent_pool_slots 3",
		"memcached_agent_pool_down_slots 0",
		`memcached_agent_pool_refused_total{reason="bad_address"} 0`,
		"memcached_agent_pool_write_errors_total 0",
	} {
		waitForMetric(t, admin, line)
	}
	entries, _ := os.ReadDir(filepath.Dir(poolFile))
	if len(entries) != 1 {
		t.Errorf("the pool's directory holds %d files, want the pool alone", len(entries))
	}
	if err := a.stop(t); err != nil {
		t.Errorf("run = %v", err)
	}
}

// TestRunPoolFileAndEndpoint runs both: /readyz needs a list to serve and
// a pool; a table with no Serving slot is written into the pool and not
// served.
func TestRunPoolFileAndEndpoint(t *testing.T) {
	dir := t.TempDir()
	source, poolFile := filepath.Join(dir, "cache.json"), filepath.Join(dir, "pool")
	testutil.WriteFileAtomic(t, source, memcachedSlots("cache", 1767225600, "-"))
	a := startAgent(t, []string{"--memcached=cache", "--from-file=" + source, "--file-poll-interval=20ms", "--pool-file=" + poolFile, "--proxy-addr="}, nil)
	admin := "http://" + a.admin
	waitForFile(t, poolFile, "version 1767225600\n# tables =1767225600\n127.0.0.1:1 _down_0\nend 1\n")
	if code, body := httpGet(t, admin+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "no server list yet") {
		t.Errorf("/readyz with a pool and no list: %d %q", code, body)
	}
	if got, _ := ask(t, a.addr, nil, "config get cluster\r\n"); got != "SERVER_ERROR no server list yet\r\n" {
		t.Errorf("config get cluster: %q", got)
	}
	testutil.WriteFileAtomic(t, source, memcachedSlots("cache", 1767225601, "10.0.0.1"))
	waitForFile(t, poolFile, "version 1767225601\n# tables =1767225601\n10.0.0.1:11211\nend 1\n")
	a.stdout.WaitFor(t, "serving a new server list", a.exited)
	// The writer takes note of the pool once its file is in place: ask
	// until it has.
	want := "ok: version 1767225601, 1 servers; pool version 1767225601, 1 slots, 0 down\n"
	if code, body := waitForReadyz(t, admin, func(body string) bool { return body == want }); code != http.StatusOK || body != want {
		t.Errorf("/readyz with both: %d %q, want 200 %q", code, body, want)
	}
}

// TestRunPoolFileNeedsItsDirectory checks that a --pool-file whose
// directory does not exist is refused before anything listens.
func TestRunPoolFileNeedsItsDirectory(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"memcached-agent", "--admin-listen=127.0.0.1:0", "--memcached=a", "--from-file=/x", "--listen=",
		"--pool-file=/nonexistent/run/pool"}, env(nil), &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "--pool-file /nonexistent/run/pool") {
		t.Errorf("run = %v, want the missing directory named", err)
	}
	if strings.Contains(stdout.String(), `"listening"`) {
		t.Errorf("run started serving")
	}
}

// TestRunHelpNamesPoolFile checks that --help describes --pool-file.
func TestRunHelpNamesPoolFile(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"memcached-agent", "--help"}, env(nil), &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), "-pool-file file") {
		t.Errorf("help does not describe -pool-file:\n%s", stderr.String())
	}
}

// waitForReadyz asks /readyz until it answers 200 with a body ok takes,
// for at most 10 s, and returns the last answer.
func waitForReadyz(t *testing.T, admin string, ok func(body string) bool) (int, string) {
	t.Helper()
	var code int
	var body string
	testutil.Poll(10*time.Second, func() bool {
		code, body = httpGet(t, admin+"/readyz")
		return code == http.StatusOK && ok(body)
	})
	return code, body
}

// TestRunPoolFileZones runs the proxy's sidecar on a Memcached with zones
// (status.zones): the pool file holds every zone's table, as the zoned
// proxies read it; /readyz and /metrics count every zone's slots; a status
// with an address Serving in two zones leaves the pool as it was.
func TestRunPoolFileZones(t *testing.T) {
	dir := t.TempDir()
	source, poolFile := filepath.Join(dir, "cache.json"), filepath.Join(dir, "run", "pool")
	if err := os.Mkdir(filepath.Dir(poolFile), 0o755); err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, []string{"--memcached=cache", "--from-file=" + source, "--file-poll-interval=20ms", "--listen=", "--pool-file=" + poolFile, "--proxy-addr="}, nil)
	admin := "http://" + a.admin
	zones := func(version int64, a0, b0 string) []byte {
		return []byte(fmt.Sprintf(`{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":"cache","namespace":"shop"},`+
			`"spec":{"size":2,"zones":{"names":["a","b"]}},"status":{"zones":[`+
			`{"name":"a","replicas":2,"readyReplicas":2,"slotTable":{"version":%d,"slots":[{"slot":0,"pod":"cache-a-0","ip":%q,"state":"Serving"},{"slot":1,"state":"Empty"}]}},`+
			`{"name":"b","replicas":2,"readyReplicas":2,"slotTable":{"version":%d,"slots":[{"slot":0,"pod":"cache-b-0","ip":%q,"state":"Serving"},{"slot":1,"state":"Empty"}]}}]}}`,
			version, a0, version+1, b0))
	}

	testutil.WriteFileAtomic(t, source, zones(1767225600, "10.0.1.1", "10.0.2.1"))
	want := "version 1767225601\n# tables a=1767225600 b=1767225601\nzone a\n10.0.1.1:11211\n127.0.0.1:1 _down_a_1\nzone b\n10.0.2.1:11211\n127.0.0.1:1 _down_b_1\nend 4\n"
	waitForFile(t, poolFile, want)
	if code, body := waitForReadyz(t, admin, func(body string) bool { return body == "ok: pool version 1767225601, 4 slots, 2 down\n" }); code != http.StatusOK {
		t.Errorf("/readyz with a zoned pool: %d %q", code, body)
	}
	for _, line := range []string{
		"memcached_agent_pool_slots 4",
		"memcached_agent_pool_down_slots 2",
		`memcached_agent_pool_refused_total{reason="bad_zone"} 0`,
	} {
		waitForMetric(t, admin, line)
	}

	testutil.WriteFileAtomic(t, source, zones(1767225700, "10.0.1.1", "10.0.1.1"))
	waitForMetric(t, admin, `memcached_agent_pool_refused_total{reason="bad_address"} 1`)
	if b, _ := os.ReadFile(poolFile); string(b) != want {
		t.Errorf("the pool file after a refused status holds\n%s\nwant\n%s", b, want)
	}
}
