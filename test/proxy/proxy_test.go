// Package proxy_test proves the proxy tier on this machine with real
// processes only: memcached 1.6.45 processes stand in for the Pods; the
// hook's own logic answers the Memcached's status, and the proxy tier's
// Deployment and ConfigMap, for them (dataplane.Cluster); memcached runs
// as the proxy with the arguments, environment and route configuration the
// hook answered; the agent built from this checkout, with the hook's
// arguments, writes the pool from the Memcached in a file (--from-file)
// that the test rewrites as the hook's answers change it; and the npm
// memcache client uses the proxy as its one server.
//
// It counts the keys whose server changed (asking each memcached
// directly) for a replaced Pod, 3 -> 4 and 4 -> 3, checks that every key
// lands where slots.Place says, times each change from the file's rename
// to the proxy routing by the new pool, and checks that the proxy never
// restarts or exits: not when every backend is gone, not when the agent is
// given a broken or foreign Memcached. The share of keys moved is
// deterministic for the fixed keys: printed and asserted exactly. Times are
// printed as benchmark lines, never asserted.
//
// With zones (zones_test.go), one proxy a zone reads a pool of three zones
// of two memcached: its reads stay in its zone, its
// writes reach every zone, and it goes on reading from the other zones
// when its own is lost. zones_hook_test.go runs the same through the
// hook's answers (each zone's proxy, its agent and the pool from the
// Memcached the hook's logic keeps), with a Pod and a zone lost, and
// measures a zone cut off while still running (issue #34, point 5).
package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/slots"
	"github.com/example/memcached-operator/test/clients"
	"github.com/example/memcached-operator/test/dataplane"
	"github.com/example/memcached-operator/test/memcachedtest"
	"github.com/example/memcached-operator/test/testutil"
)

// ipOf is the address of Pod m-N: a loopback alias of this package's own
// (testutil.Loopback), so that packages running at once do not collide.
func ipOf(n int) string { return testutil.Loopback("test/proxy").IP(n) }

// proxyIP is the proxy's address.
var proxyIP = testutil.Loopback("test/proxy").IP(200)

// keyCount is how many keys each placement sets through the proxy.
const keyCount = 10000

// fixture is the Memcached, its Pods, the proxy, the agent and the client.
type fixture struct {
	t       testing.TB
	c       *dataplane.Cluster
	servers map[string]*dataplane.Memcached // by IP
	proxy   *dataplane.Proxy
	agent   *dataplane.Agent
	client  *clients.Client
	file    string
	keys    []string
	phase   int
	// pools is how many distinct pools the agent had to write.
	pools    int
	lastPool string
}

// pod starts memcached for Pod m-n and returns the Pod, Ready.
func (f *fixture) pod(n int) dataplane.Pod {
	f.servers[ipOf(n)] = dataplane.StartMemcached(f.t, ipOf(n))
	return dataplane.Pod{Name: fmt.Sprintf("m-%d", n), IP: ipOf(n), Ready: true}
}

// kill ends Pod name's memcached and removes the Pod, as once it is gone.
func (f *fixture) kill(name string) {
	for _, p := range f.c.Pods {
		if p.Name == name {
			f.servers[p.IP].Kill()
		}
	}
	f.c.Remove(name)
}

// addrOf is the address the proxy must send key to under table: the
// Serving slot slots.Place gives, or "" when that slot has no Serving Pod
// (the proxy answers an error) or the table has no slot.
func addrOf(table v1alpha1.SlotTable, key string) string {
	if len(table.Slots) == 0 {
		return ""
	}
	e := table.Slots[slots.Place([]byte(key), len(table.Slots))]
	if e.State != v1alpha1.SlotServing {
		return ""
	}
	return e.IP
}

// publish runs the hook for the cluster as it is now and writes the file
// the agent follows; it returns the table before and after, and when the
// file was renamed into place.
func (f *fixture) publish() (before, after v1alpha1.SlotTable, renamed time.Time) {
	f.t.Helper()
	before = f.c.Status().SlotTable
	after = f.c.Sync(f.t).SlotTable
	if pool := dataplane.ExpectedPool(after); pool != f.lastPool {
		f.pools++
		f.lastPool = pool
	}
	f.c.WriteFile(f.t, f.file)
	return before, after, time.Now()
}

// waitPool waits until the agent wrote the pool the table says.
func (f *fixture) waitPool(step string, table v1alpha1.SlotTable) {
	f.t.Helper()
	want := dataplane.ExpectedPool(table)
	var got []byte
	if !testutil.Poll(10*time.Second, func() bool { got, _ = os.ReadFile(f.proxy.PoolFile); return string(got) == want }) {
		f.t.Fatalf("%s: the pool file holds\n%s\nwant\n%s", step, got, want)
	}
}

// change applies a change of the cluster and waits until the proxy routes
// by the new pool. It picks a probe key that the change sends elsewhere,
// stores it on its new server directly, and polls it through the proxy
// from the moment the file is renamed until the proxy answers from the new
// server (or, for a slot that is now down, answers an error while the old
// server is still up), and prints that time. When the old server is gone
// already (an error says nothing then), or no key changes server (every
// slot was down and still is), it waits for the proxy's reload only.
func (f *fixture) change(step string, edit func()) v1alpha1.SlotTable {
	f.t.Helper()
	edit()
	reloads := f.proxy.Stats(f.t)["proxy_config_reloads"]
	old := f.c.Status().SlotTable
	// What the hook will answer (Sync is deterministic), to choose the
	// probe before the rename.
	scratch := *f.c
	next := scratch.Sync(f.t).SlotTable
	probe, from, to := "", "", ""
	for i := 0; i < 10000 && probe == ""; i++ {
		k := fmt.Sprintf("probe-%s-%d", step, i)
		if o, n := addrOf(old, k), addrOf(next, k); o != n {
			probe, from, to = k, o, n
		}
	}
	value := "new-" + step
	if to != "" {
		f.servers[to].Set(f.t, probe, value)
	}
	_, after, renamed := f.publish()
	if dataplane.ExpectedPool(after) != dataplane.ExpectedPool(next) {
		f.t.Fatalf("%s: the hook answered two tables for one cluster:\n%s\n%s", step, dataplane.ExpectedPool(next), dataplane.ExpectedPool(after))
	}
	timed := to != "" || (from != "" && f.servers[from].Running())
	if probe != "" {
		// Within 10 s of the rename, not of now.
		testutil.EventuallyEvery(f.t, time.Until(renamed.Add(10*time.Second)), 5*time.Millisecond, func() error {
			got, err := memcachedtest.Ask(f.proxy.Addr(), "get "+probe+"\r\n")
			if err == nil && (to != "" && strings.Contains(got, "\r\n"+value+"\r\n") || to == "" && strings.HasPrefix(got, "SERVER_ERROR")) {
				return nil
			}
			return fmt.Errorf("%s: the proxy does not route %s to %q within 10 s of the rename: %q, %v\nproxy:\n%s", step, probe, to, got, err, f.proxy.Log())
		})
	}
	if timed && probe != "" {
		testutil.Benchmark("BenchmarkProxyPoolSwitch/"+step, "%.3f s", time.Since(renamed).Seconds())
	}
	f.waitPool(step, after)
	if !testutil.Poll(10*time.Second, func() bool { return f.proxy.Stats(f.t)["proxy_config_reloads"] != reloads }) {
		f.t.Fatalf("%s: the proxy did not reload", step)
	}
	f.alive(step)
	return after
}

// waitCron waits until the proxy's cron (proxy.lua's poll of the pool
// file, once a second) has run n more times.
func (f *fixture) waitCron(step string, n int) {
	f.t.Helper()
	runs := func() int {
		v, err := strconv.Atoi(f.proxy.Stats(f.t)["proxy_config_cron_runs"])
		if err != nil {
			f.t.Fatalf("%s: proxy_config_cron_runs: %v", step, err)
		}
		return v
	}
	from := runs()
	if !testutil.Poll(time.Duration(n)*time.Second+10*time.Second, func() bool { return runs() >= from+n }) {
		f.t.Fatalf("%s: the proxy's cron did not run %d times (proxy_config_cron_runs %d)\n%s", step, n, runs(), f.proxy.Log())
	}
}

// alive checks that the proxy is the one started and answers.
func (f *fixture) alive(step string) {
	f.t.Helper()
	if err := f.proxy.Alive(); err != nil {
		f.t.Fatalf("%s: %v\n%s", step, err, f.proxy.Log())
	}
}

// place sets every key through the proxy with the npm client, a value of
// this placement's own, and returns where each landed, asking each running
// memcached directly; it checks that every key is where slots.Place says
// under table (a key whose slot is down is set nowhere).
func (f *fixture) place(step string, table v1alpha1.SlotTable) map[string]string {
	f.t.Helper()
	f.phase++
	value := fmt.Sprintf("v%d", f.phase)
	res := f.client.Do(f.t, map[string]any{"op": "set", "prefix": "key-", "n": len(f.keys), "value": value})
	down := 0
	for _, k := range f.keys {
		if addrOf(table, k) == "" {
			down++
		}
	}
	if res["ok"] != float64(len(f.keys)-down) || res["errors"] != float64(down) {
		f.t.Errorf("%s: the client set %v, want %d stored and %d errors (keys of slots that are down)", step, res, len(f.keys)-down, down)
	}
	holder := map[string]string{}
	for ip, m := range f.servers {
		if !m.Running() {
			continue
		}
		for k, v := range m.Values(f.t, f.keys) {
			if v != value {
				continue
			}
			if other, twice := holder[k]; twice {
				f.t.Errorf("%s: %s is on %s and %s", step, k, other, ip)
			}
			holder[k] = ip
		}
	}
	wrong := 0
	for _, k := range f.keys {
		if got, want := holder[k], addrOf(table, k); got != want {
			if wrong < 5 {
				f.t.Errorf("%s: %s landed on %q, slots.Place says %q", step, k, got, want)
			}
			wrong++
		}
	}
	if wrong > 0 {
		f.t.Errorf("%s: %d of %d keys are not where slots.Place says", step, wrong, len(f.keys))
	}
	return holder
}

// moved prints the share of keys that changed server between two
// placements, next to the ideal share in percent, and asserts it exactly:
// the keys are fixed, so the keys that move are those want says, from
// slots.Place alone (a key of slot s among n slots: slots.Place(key, n)).
func moved(t *testing.T, step string, before, after map[string]string, keys []string, want func(key []byte) bool, ideal string) {
	t.Helper()
	n, wantN, wrong := 0, 0, 0
	for _, k := range keys {
		got := before[k] != after[k]
		if got {
			n++
		}
		if want([]byte(k)) {
			wantN++
		}
		if got != want([]byte(k)) {
			if wrong < 5 {
				t.Errorf("%s: %s moved %v (from %q to %q), want %v", step, k, got, before[k], after[k], !got)
			}
			wrong++
		}
	}
	testutil.Benchmark("BenchmarkProxyKeysMoved/"+step, "%.2f %%moved %s", 100*float64(n)/float64(len(keys)), ideal)
	if n != wantN || wrong > 0 {
		t.Errorf("%s: %d of %d keys changed server (%.2f %%), %d of them wrongly; want %d (%.2f %%)", step, n, len(keys), 100*float64(n)/float64(len(keys)), wrong, wantN, 100*float64(wantN)/float64(len(keys)))
	}
}

// in is a key of slot s among n slots.
func in(key []byte, s, n int) bool { return slots.Place(key, n) == s }

// metric reads one of the agent's metrics.
func metric(t *testing.T, admin, name string) string {
	t.Helper()
	res, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return v
		}
	}
	return ""
}

func TestProxyFollowsTheSlotTable(t *testing.T) {
	f := &fixture{t: t, servers: map[string]*dataplane.Memcached{}, file: filepath.Join(t.TempDir(), "memcached.json")}
	for i := range keyCount {
		f.keys = append(f.keys, fmt.Sprintf("key-%d", i))
	}
	const spec = `{"size":%d,"proxy":{"enabled":true}}`
	f.c = &dataplane.Cluster{Name: "cache", Namespace: "shop", Spec: fmt.Sprintf(spec, 3), Pods: []dataplane.Pod{f.pod(1), f.pod(2), f.pod(3)}}
	_, table, _ := f.publish()
	f.proxy = dataplane.StartProxy(t, proxyIP, f.c.ProxySetup(t))
	f.agent = dataplane.StartAgent(t, append(f.proxy.AgentArgs(), "--namespace=shop", "--from-file="+f.file, "--shutdown-delay=0s")...)
	f.waitPool("first pool", table)
	if !testutil.Poll(10*time.Second, func() bool {
		return strings.Contains(f.proxy.Log(), fmt.Sprintf("pool version %d: 3 slots, 0 down", table.Version))
	}) {
		t.Fatalf("the proxy never took the first pool:\n%s", f.proxy.Log())
	}
	proxyPID, agentPID := f.proxy.PID(), f.agent.PID()
	f.client = clients.Start(t, clients.Options{}, clients.Node, f.proxy.Addr())
	began := time.Now()
	placed := f.place("first pool", table)
	testutil.Benchmark("BenchmarkProxyPlace/npm-set-through-proxy-and-locate", "%.3f s %d keys", time.Since(began).Seconds(), keyCount)

	// A replaced Pod: m-2 (slot 1) is deleted, m-4 takes its slot while
	// m-2 is still terminating; then m-2 is gone.
	table = f.change("replaced-pod", func() {
		f.c.Pods = append(f.c.Pods, f.pod(4))
		f.c.Set(t, "m-2", func(p *dataplane.Pod) { p.Leaving = true })
	})
	f.kill("m-2")
	_, table, _ = f.publish()
	now := f.place("replaced-pod", table)
	// The replaced Pod's slot, and only it, changes server.
	moved(t, "replaced-pod", placed, now, f.keys, func(k []byte) bool { return in(k, 1, 3) }, "33.33 %ideal")
	placed = now

	// 3 -> 4: m-5 takes the new slot 3.
	table = f.change("grow-3-to-4", func() {
		f.c.Spec = fmt.Sprintf(spec, 4)
		f.c.Pods = append(f.c.Pods, f.pod(5))
	})
	now = f.place("grow-3-to-4", table)
	// Jump hash moves to the new slot only: the keys it gives slot 3.
	moved(t, "grow-3-to-4", placed, now, f.keys, func(k []byte) bool { return in(k, 3, 4) }, "25.00 %ideal")
	placed = now

	// 4 -> 3, the last slot's Pod leaving: only its keys move.
	table = f.change("shrink-4-to-3-last", func() {
		f.c.Spec = fmt.Sprintf(spec, 3)
		f.c.Set(t, "m-5", func(p *dataplane.Pod) { p.Leaving = true })
	})
	f.kill("m-5")
	_, table, _ = f.publish()
	now = f.place("shrink-4-to-3-last", table)
	moved(t, "shrink-4-to-3-last", placed, now, f.keys, func(k []byte) bool { return in(k, 3, 4) }, "25.00 %ideal")

	// 3 -> 4 again (m-6 in slot 3), then 4 -> 3 with a middle Pod
	// leaving: m-4 (slot 1) goes, and sync/slots moves m-6 from slot 3
	// into slot 1. Jump hash moves slot 1's keys and those of slot 3 that
	// do not land on slot 1: 1/4 + 1/4 x 2/3.
	table = f.change("grow-3-to-4-again", func() {
		f.c.Spec = fmt.Sprintf(spec, 4)
		f.c.Pods = append(f.c.Pods, f.pod(6))
	})
	placed = f.place("grow-3-to-4-again", table)
	table = f.change("shrink-4-to-3-middle", func() {
		f.c.Spec = fmt.Sprintf(spec, 3)
		f.c.Set(t, "m-4", func(p *dataplane.Pod) { p.Leaving = true })
	})
	if got := table.Slots[1].Pod; got != "m-6" {
		t.Errorf("after the middle Pod left, slot 1 is %s's, want m-6's (moved from slot 3)", got)
	}
	f.kill("m-4")
	_, table, _ = f.publish()
	now = f.place("shrink-4-to-3-middle", table)
	moved(t, "shrink-4-to-3-middle", placed, now, f.keys, func(k []byte) bool { return in(k, 1, 4) || in(k, 3, 4) && !in(k, 1, 3) }, "25.00 %ideal 41.67 %jump-hash-expected")
	placed = now

	// A broken file and another Memcached: the agent keeps the pool and
	// does not write; the proxy routes as before.
	before, err := os.Stat(f.proxy.PoolFile)
	if err != nil {
		t.Fatal(err)
	}
	reloads := f.proxy.Stats(t)["proxy_config_reloads"]
	for _, bad := range []struct {
		name, reason string
		write        func()
	}{
		{"a broken file", "unreadable", func() {
			if err := os.WriteFile(f.file+".tmp", []byte(`{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":"cache"`), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(f.file+".tmp", f.file); err != nil {
				t.Fatal(err)
			}
		}},
		{"another Memcached", "wrong_object", func() {
			other := &dataplane.Cluster{Name: "other", Namespace: "shop", Spec: fmt.Sprintf(spec, 1), Pods: []dataplane.Pod{{Name: "o-1", IP: ipOf(99), Ready: true}}}
			other.Sync(t)
			other.WriteFile(t, f.file)
		}},
	} {
		name := fmt.Sprintf(`memcached_agent_pool_refused_total{reason=%q}`, bad.reason)
		was := metric(t, f.agent.Admin, name)
		bad.write()
		if !testutil.Poll(10*time.Second, func() bool { return metric(t, f.agent.Admin, name) != was }) {
			t.Fatalf("%s: the agent did not refuse it (%s %s)", bad.name, name, was)
		}
	}
	// The agent is done with both (it refuses instead of writing); a
	// pool file written anyway would be the proxy's at its next poll.
	// Wait for two more runs of the proxy's once-a-second cron: the
	// second began after the refusals, and a reload it scheduled ran
	// before the third.
	f.waitCron("after a broken and a foreign Memcached", 3)
	if after, err := os.Stat(f.proxy.PoolFile); err != nil || !os.SameFile(before, after) {
		t.Errorf("the pool file was replaced after a broken and a foreign Memcached: %v", err)
	}
	if got := f.proxy.Stats(t)["proxy_config_reloads"]; got != reloads {
		t.Errorf("the proxy reloaded (%s -> %s) after a broken and a foreign Memcached", reloads, got)
	}
	f.alive("after a broken and a foreign Memcached")
	res := f.client.Do(t, map[string]any{"op": "get", "prefix": "key-", "n": keyCount})
	if res["hits"] != float64(keyCount) {
		t.Errorf("after a broken and a foreign Memcached the client gets %v, want %d hits", res, keyCount)
	}
	f.c.WriteFile(t, f.file) // the good one again: nothing changes

	// Every Pod not Ready: every slot is a placeholder, requests get
	// errors, the proxy lives. Back Ready, every key is where it was.
	table = f.change("every-pod-not-ready", func() {
		for _, p := range f.c.Pods {
			f.c.Set(t, p.Name, func(p *dataplane.Pod) { p.Ready = false })
		}
	})
	f.place("every-pod-not-ready", table)
	// npm memcache counts a get answered SERVER_ERROR as a miss.
	res = f.client.Do(t, map[string]any{"op": "get", "prefix": "key-", "n": keyCount})
	if res["hits"] != float64(0) {
		t.Errorf("with every slot down the client gets %v, want no hit", res)
	}
	for _, k := range f.keys[:20] {
		if got, err := memcachedtest.Ask(f.proxy.Addr(), "get "+k+"\r\n"); !strings.HasPrefix(got, "SERVER_ERROR") {
			t.Errorf("with every slot down, get %s through the proxy: %q, %v; want SERVER_ERROR", k, got, err)
		}
	}
	table = f.change("ready-again", func() {
		for _, p := range f.c.Pods {
			f.c.Set(t, p.Name, func(p *dataplane.Pod) { p.Ready = true })
		}
	})
	now = f.place("ready-again", table)
	moved(t, "not-ready-and-back", placed, now, f.keys, func([]byte) bool { return false }, "0.00 %ideal")

	// Every Pod gone, then the Memcached scaled to 0: the pool is
	// placeholders, then one; the proxy lives and answers errors.
	table = f.change("every-pod-gone", func() {
		for _, p := range append([]dataplane.Pod(nil), f.c.Pods...) {
			f.kill(p.Name)
		}
	})
	f.place("every-pod-gone", table)
	table = f.change("scaled-to-0", func() { f.c.Spec = fmt.Sprintf(spec, 0) })
	if len(table.Slots) != 0 {
		t.Errorf("scaled to 0, the table has %d slots", len(table.Slots))
	}
	f.place("scaled-to-0", table)

	// Back to 3 new Pods: keys are routed again.
	table = f.change("scaled-back-to-3", func() {
		f.c.Spec = fmt.Sprintf(spec, 3)
		f.c.Pods = []dataplane.Pod{f.pod(7), f.pod(8), f.pod(9)}
	})
	f.place("scaled-back-to-3", table)

	if f.proxy.PID() != proxyPID || f.agent.PID() != agentPID {
		t.Errorf("a process was restarted: proxy %d -> %d, agent %d -> %d", proxyPID, f.proxy.PID(), agentPID, f.agent.PID())
	}
	f.alive("the end")
	st := f.proxy.Stats(t)
	if st["proxy_config_reload_fails"] != "0" {
		t.Errorf("proxy_config_reload_fails %s", st["proxy_config_reload_fails"])
	}
	if got := metric(t, f.agent.Admin, "memcached_agent_pool_writes_total"); got != fmt.Sprint(f.pools) {
		t.Errorf("the agent wrote the pool %s times, want %d: once per change of the pool", got, f.pools)
	}
	t.Logf("proxy reloads %s, pool writes %d", st["proxy_config_reloads"], f.pools)
}
