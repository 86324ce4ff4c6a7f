package proxy_test

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/sync/slots"
	"github.com/example/memcached-operator/test/dataplane"
	"github.com/example/memcached-operator/test/memcachedtest"
	"github.com/example/memcached-operator/test/testutil"
)

// zoneIP is an address of the zones' test: a block of its own, apart
// from the other tests' of this package.
func zoneIP(n int) string { return testutil.Loopback("test/proxy zones").IP(n) }

// zoneKeys is how many keys the zones' test reads and writes.
const zoneKeys = 1000

// zonesFixture is three zones of two memcached each, a proxy a zone
// reading a pool with zones, and one proxy over all six Pods reading a
// pool without zones (the single tier, to compare with), all running
// proxy.lua.
type zonesFixture struct {
	zones   []string
	pods    map[string][]*dataplane.Memcached // by zone, in slot order
	proxies map[string]*dataplane.Proxy       // by zone
	single  *dataplane.Proxy
	keys    []string
	// statuses are the zones' status, as the pools were rendered from.
	statuses []v1alpha1.ZoneStatus
}

// hookProxySetup is the proxy container as the hook answers it for a
// Memcached without zones: its arguments and environment. A zone's proxy
// has the same, its zone added (MEMCACHED_PROXY_LOCAL_ZONE), and the zoned
// configuration.
func hookProxySetup(t *testing.T) dataplane.ProxySetup {
	t.Helper()
	c := &dataplane.Cluster{Name: "cache", Namespace: "shop", Spec: `{"size":2,"proxy":{"enabled":true}}`}
	c.Sync(t)
	return c.ProxySetup(t)
}

// startProxyWithPool starts a proxy of setup (the hook's route
// configuration, proxy.lua), in zone (none: ""), gives it pool, and waits
// until it says it took it (want).
func startProxyWithPool(t *testing.T, setup dataplane.ProxySetup, ip, zone string, pool []byte, want string) *dataplane.Proxy {
	t.Helper()
	setup.Env = maps.Clone(setup.Env)
	if zone != "" {
		setup.Env[memcached.ProxyLocalZoneEnv] = zone
	}
	p := dataplane.StartProxy(t, ip, setup)
	givePool(t, p, pool, want)
	return p
}

// givePool replaces p's pool file with pool, as the agent does, and waits
// until the proxy logs want once more than it had.
func givePool(t *testing.T, p *dataplane.Proxy, pool []byte, want string) {
	t.Helper()
	said := strings.Count(p.Log(), want)
	// Readable by the proxy, which runs as nobody under root.
	tmp := p.PoolFile + ".new"
	if err := os.WriteFile(tmp, pool, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p.PoolFile); err != nil {
		t.Fatal(err)
	}
	if !testutil.Poll(10*time.Second, func() bool { return strings.Count(p.Log(), want) > said }) {
		t.Fatalf("the proxy never said %q:\n%s", want, p.Log())
	}
}

// newZonesFixture starts the Pods, writes the pools and starts the
// proxies: zone a's Pods are addresses 1 and 2, b's 3 and 4, c's 5 and 6;
// the single tier's pool lists the six in that order.
func newZonesFixture(t *testing.T) *zonesFixture {
	t.Helper()
	f := &zonesFixture{zones: []string{"a", "b", "c"}, pods: map[string][]*dataplane.Memcached{}, proxies: map[string]*dataplane.Proxy{}}
	var statuses []v1alpha1.ZoneStatus
	var all []string
	n := 0
	for _, z := range f.zones {
		var states []string
		for range 2 {
			n++
			f.pods[z] = append(f.pods[z], dataplane.StartMemcached(t, zoneIP(n)))
			states = append(states, "S:"+zoneIP(n))
		}
		statuses = append(statuses, v1alpha1.ZoneStatus{Name: z, Replicas: 2, ReadyReplicas: 2, SlotTable: testutil.SlotTable(1767225600, states...)})
		all = append(all, states...)
	}
	f.statuses = statuses
	zoned, err := contract.RenderPool(statuses)
	if err != nil {
		t.Fatal(err)
	}
	single, err := contract.RenderPool([]v1alpha1.ZoneStatus{{SlotTable: testutil.SlotTable(1767225600, all...)}})
	if err != nil {
		t.Fatal(err)
	}
	setup := hookProxySetup(t)
	for i, z := range f.zones {
		f.proxies[z] = startProxyWithPool(t, setup, zoneIP(101+i), z, zoned.Content, "pool version 1767225600: 3 zones, 6 slots, 0 down")
	}
	f.single = startProxyWithPool(t, setup, zoneIP(110), "", single.Content, "pool version 1767225600: 6 slots, 0 down")
	for i := range zoneKeys {
		f.keys = append(f.keys, fmt.Sprintf("zone-key-%d", i))
	}
	return f
}

// textConn is a connection through a proxy or to a memcached
// (memcachedtest's), failing the test it is given rather than the one it
// was dialled for.
type textConn struct {
	*memcachedtest.Client
}

func dialText(t *testing.T, addr string) *textConn {
	t.Helper()
	return &textConn{memcachedtest.Dial(t, addr)}
}

// do sends a request and returns the whole answer: up to END after
// VALUE lines, a VA line and its value, or one line.
func (c *textConn) do(t *testing.T, req string) string {
	t.Helper()
	got, err := c.Conn.Do(req)
	if err != nil {
		t.Fatalf("%q: %v", req, err)
	}
	return got
}

// set stores key through c and fails the test on any answer but STORED.
func (c *textConn) set(t *testing.T, key, value string) {
	t.Helper()
	if got := c.do(t, fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", key, len(value), value)); got != "STORED\r\n" {
		t.Fatalf("set %s through %s: %q", key, c.RemoteAddr(), got)
	}
}

// hits reads every key through c with cmd (get, gets or mg) and counts
// the hits.
func (c *textConn) hits(t *testing.T, cmd string, keys []string) int {
	t.Helper()
	n := 0
	for _, k := range keys {
		var got string
		if cmd == "mg" {
			got = c.do(t, "mg "+k+" v\r\n")
		} else {
			got = c.do(t, cmd+" "+k+"\r\n")
		}
		if strings.HasPrefix(got, "VALUE ") || strings.HasPrefix(got, "VA ") {
			n++
		}
	}
	return n
}

// gets is memcached's cmd_get, asked of it directly.
func gets(t *testing.T, m *dataplane.Memcached) int {
	t.Helper()
	c := memcachedtest.Dial(t, m.Addr())
	defer c.Close()
	v, ok := c.Stats("stats")["cmd_get"]
	if !ok {
		t.Fatalf("%s: no cmd_get in stats", m.Addr())
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// getsByZone is each zone's cmd_get, its Pods' summed.
func (f *zonesFixture) getsByZone(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for z, pods := range f.pods {
		for _, m := range pods {
			if m.Running() {
				out[z] += gets(t, m)
			}
		}
	}
	return out
}

// value is key's value in zone z, asked of its Pods directly: "" when
// none holds it.
func (f *zonesFixture) value(t *testing.T, z, key string) string {
	t.Helper()
	for _, m := range f.pods[z] {
		if !m.Running() {
			continue
		}
		got := dialText(t, m.Addr()).do(t, "mg "+key+" v\r\n")
		if strings.HasPrefix(got, "VA ") {
			_, data, _ := strings.Cut(got, "\r\n")
			return strings.TrimSuffix(data, "\r\n")
		}
	}
	return ""
}

// waitZones waits until key's value is want in every zone whose Pods run
// (a write through route_allfastest is answered by the first zone; the
// others follow), and fails the test naming the zones that differ.
func (f *zonesFixture) waitZones(t *testing.T, step, key, want string) {
	t.Helper()
	var wrong []string
	testutil.Poll(5*time.Second, func() bool {
		wrong = nil
		for _, z := range f.zones {
			if f.pods[z][0].Running() {
				if got := f.value(t, z, key); got != want {
					wrong = append(wrong, fmt.Sprintf("%s has %q", z, got))
				}
			}
		}
		return len(wrong) == 0
	})
	if len(wrong) > 0 {
		t.Errorf("%s: %s, want %q in every zone", step, strings.Join(wrong, ", "), want)
	}
}

// TestZonesProxy runs the route configuration (proxy.lua) in memcached
// 1.6.45 over a pool with zones, one proxy a zone over three zones of two
// memcached, with the pool RenderPool writes, and proves what its header
// says of zones:
// reads stay in the proxy's zone; writes, deletes and arithmetic reach
// every zone; gat touches every zone; cas is refused and changes nothing;
// with the proxy's own zone lost, reads go on from the others and a write
// is still answered STORED; a new pool is taken by a reload, a bad one
// refused while the proxy runs on. It prints the share of reads that cross zones,
// for the zone's proxy and for one proxy over all six Pods (a pool
// without zones), and what the zoned proxy costs in latency
// beside that single tier, as benchmark lines.
func TestZonesProxy(t *testing.T) {
	f := newZonesFixture(t)
	a := dialText(t, f.proxies["a"].Addr())
	for _, k := range f.keys {
		a.set(t, k, "v-"+k)
	}
	for _, z := range f.zones {
		held := 0
		for _, m := range f.pods[z] {
			held += m.Keys(t, f.keys)
		}
		if held != len(f.keys) {
			t.Errorf("zone %s holds %d of the %d keys set through zone a's proxy", z, held, len(f.keys))
		}
	}

	t.Run("reads stay in the zone", func(t *testing.T) {
		for _, z := range f.zones {
			c := dialText(t, f.proxies[z].Addr())
			before := f.getsByZone(t)
			for _, cmd := range []string{"get", "gets", "mg"} {
				if got := c.hits(t, cmd, f.keys); got != len(f.keys) {
					t.Errorf("zone %s's proxy: %s hit %d of %d keys", z, cmd, got, len(f.keys))
				}
			}
			after := f.getsByZone(t)
			local, cross := after[z]-before[z], 0
			for _, o := range f.zones {
				if o != z {
					cross += after[o] - before[o]
				}
			}
			if local < len(f.keys) || cross != 0 {
				t.Errorf("zone %s's proxy: its zone served %d reads, the others %d; want every read in the zone", z, local, cross)
			}
			if z == "a" {
				testutil.Benchmark("BenchmarkZoneCrossZoneReads/zone-proxy", "%.3f cross-zone-share", float64(cross)/float64(local+cross))
			}
		}
		// A miss stays in the zone too (miss is unset on the route).
		before := f.getsByZone(t)
		if got := dialText(t, f.proxies["a"].Addr()).do(t, "get no-such-key\r\n"); got != "END\r\n" {
			t.Errorf("a miss through zone a's proxy: %q", got)
		}
		if after := f.getsByZone(t); after["b"] != before["b"] || after["c"] != before["c"] {
			t.Errorf("a miss in zone a was asked of another zone: gets %v, then %v", before, after)
		}
	})

	t.Run("one proxy over the six Pods reads across zones", func(t *testing.T) {
		// The single tier spreads the keys over the six Pods, zone a's
		// first: a client in zone a reads from b and c whatever their
		// slot says, about two thirds of its reads.
		c := dialText(t, f.single.Addr())
		before := f.getsByZone(t)
		c.hits(t, "get", f.keys)
		after := f.getsByZone(t)
		cross, want := (after["b"]-before["b"])+(after["c"]-before["c"]), 0
		for _, k := range f.keys {
			if slots.Place([]byte(k), 6) >= 2 {
				want++
			}
		}
		if cross != want {
			t.Errorf("the single tier sent %d of %d reads outside zone a's Pods, want %d (slots.Place)", cross, len(f.keys), want)
		}
		testutil.Benchmark("BenchmarkZoneCrossZoneReads/one-proxy-six-pods", "%.3f cross-zone-share", float64(cross)/float64(len(f.keys)))
	})

	t.Run("writes reach every zone", func(t *testing.T) {
		for _, z := range f.zones {
			c := dialText(t, f.proxies[z].Addr())
			key := "write-through-" + z
			c.set(t, key, "x")
			f.waitZones(t, "set through zone "+z, key, "x")
			if got := c.do(t, "append "+key+" 0 0 1\r\ny\r\n"); got != "STORED\r\n" {
				t.Errorf("append through zone %s: %q", z, got)
			}
			f.waitZones(t, "append through zone "+z, key, "xy")
			if got := c.do(t, "delete "+key+"\r\n"); got != "DELETED\r\n" {
				t.Errorf("delete through zone %s: %q", z, got)
			}
			f.waitZones(t, "delete through zone "+z, key, "")

			counter := "counter-" + z
			c.set(t, counter, "5")
			if got := c.do(t, "incr "+counter+" 3\r\n"); got != "8\r\n" {
				t.Errorf("incr through zone %s: %q", z, got)
			}
			f.waitZones(t, "incr through zone "+z, counter, "8")
		}
	})

	t.Run("gat touches every zone", func(t *testing.T) {
		key := f.keys[0]
		if got := dialText(t, f.proxies["b"].Addr()).do(t, "gat 1000 "+key+"\r\n"); !strings.HasPrefix(got, "VALUE "+key+" ") {
			t.Fatalf("gat through zone b: %q", got)
		}
		for _, z := range f.zones {
			var ttl string
			testutil.Poll(5*time.Second, func() bool {
				for _, m := range f.pods[z] {
					if got := dialText(t, m.Addr()).do(t, "mg "+key+" t\r\n"); strings.HasPrefix(got, "HD ") {
						ttl = strings.TrimSpace(strings.TrimPrefix(got, "HD t"))
					}
				}
				n, _ := strconv.Atoi(ttl)
				return n > 900 && n <= 1000
			})
			if n, _ := strconv.Atoi(ttl); n <= 900 || n > 1000 {
				t.Errorf("zone %s: %s has TTL %q after gat 1000, want about 1000", z, key, ttl)
			}
		}
	})

	t.Run("cas is refused and changes nothing", func(t *testing.T) {
		key := f.keys[1]
		c := dialText(t, f.proxies["a"].Addr())
		got := c.do(t, "gets "+key+"\r\n")
		fields := strings.Fields(strings.SplitN(got, "\r\n", 2)[0])
		if len(fields) != 5 {
			t.Fatalf("gets through zone a: %q", got)
		}
		if got := c.do(t, fmt.Sprintf("cas %s 0 0 1 %s\r\nz\r\n", key, fields[4])); !strings.HasPrefix(got, "SERVER_ERROR") {
			t.Errorf("cas through zone a: %q, want SERVER_ERROR", got)
		}
		for _, z := range f.zones {
			if got := f.value(t, z, key); got != "v-"+key {
				t.Errorf("zone %s: %s is %q after a refused cas", z, key, got)
			}
		}
	})

	t.Run("a new pool is taken, a bad one refused, the proxy running", func(t *testing.T) {
		// Zone c's second Pod NotReady: its slot is a placeholder, down, and
		// zone c's proxy reads that slot's keys from another zone.
		p, c := f.proxies["c"], dialText(t, f.proxies["c"].Addr())
		reloads := p.Stats(t)["proxy_config_reloads"]
		statuses := slices.Clone(f.statuses)
		statuses[2].SlotTable = testutil.SlotTable(1767225700, "S:"+zoneIP(5), "N:"+zoneIP(6))
		pool, err := contract.RenderPool(statuses)
		if err != nil {
			t.Fatal(err)
		}
		givePool(t, p, pool.Content, "pool version 1767225700: 3 zones, 6 slots, 1 down")
		if got := p.Stats(t)["proxy_config_reloads"]; got == reloads {
			t.Errorf("the proxy took the pool without a reload (proxy_config_reloads %s)", got)
		}
		// The log comes as the reload starts; the workers route by the
		// new pool a moment later: read until the Pod now down is asked
		// nothing.
		down := f.pods["c"][1]
		hits, asked := 0, 0
		testutil.Poll(5*time.Second, func() bool {
			before := gets(t, down)
			hits = c.hits(t, "get", f.keys)
			asked = gets(t, down) - before
			return asked == 0
		})
		if asked != 0 || hits != len(f.keys) {
			t.Errorf("zone c's proxy with its slot 1 down hit %d of %d keys, asking that slot's Pod %d; want every key, from another zone for that slot's", hits, len(f.keys), asked)
		}

		bad := []byte("version 1767225800\n" + zoneIP(1) + ":11211\nzone c\n" + zoneIP(5) + ":11211\nend 2\n")
		givePool(t, p, bad, "a zone line after slot lines of no zone; keeping pool version 1767225700")
		if err := p.Alive(); err != nil {
			t.Fatalf("zone c's proxy after a bad pool: %v", err)
		}

		pool, _ = contract.RenderPool(f.statuses)
		givePool(t, p, pool.Content, "pool version 1767225600: 3 zones, 6 slots, 0 down")
		cross := 0
		testutil.Poll(5*time.Second, func() bool {
			before := f.getsByZone(t)
			hits = c.hits(t, "get", f.keys)
			after := f.getsByZone(t)
			cross = after["a"] - before["a"] + after["b"] - before["b"]
			return cross == 0
		})
		if cross != 0 || hits != len(f.keys) {
			t.Errorf("zone c's proxy, its pool back, hit %d of %d keys, %d of its reads in other zones; want every key, from zone c", hits, len(f.keys), cross)
		}
	})

	t.Run("latency beside the single tier", func(t *testing.T) {
		bin := filepath.Join(t.TempDir(), "loadgen")
		if out, err := exec.Command("go", "build", "-o", bin, filepath.Join(testutil.Root(), "test", "proxy", "loadgen")).CombinedOutput(); err != nil {
			t.Fatalf("building the load generator: %v\n%s", err, out)
		}
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, "-bench", "BenchmarkZoneProxyLatency", "-keys", "2000", "-round", "1s",
			"-target", "one-proxy-six-pods="+f.single.Addr(), "-target", "zone-proxy="+f.proxies["a"].Addr())
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("loadgen: %v\n%s", err, stderr.String())
		}
		for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
			testutil.PrintBenchmarkLine(line)
		}
		if !strings.Contains(stdout.String(), "BenchmarkZoneProxyLatency/zone-proxy-vs-one-proxy-six-pods 1 ") {
			t.Errorf("loadgen printed no comparison:\n%s", stdout.String())
		}
	})

	t.Run("zone a lost", func(t *testing.T) {
		c := dialText(t, f.proxies["a"].Addr())
		before := c.hits(t, "get", f.keys)
		for _, m := range f.pods["a"] {
			m.Kill()
		}
		after := c.hits(t, "get", f.keys)
		ratio := float64(after) / float64(before)
		testutil.Benchmark("BenchmarkZoneLostHitRatio/zone-proxy", "%.3f of-the-hits-before %d hits-before", ratio, before)
		if before == 0 || ratio < 0.95 {
			t.Errorf("zone a's proxy hit %d of %d keys with zone a lost, %d before: want at least 0.95 of before", after, len(f.keys), before)
		}
		c.set(t, "written-with-a-lost", "w")
		f.waitZones(t, "set with zone a lost", "written-with-a-lost", "w")
		if err := f.proxies["a"].Alive(); err != nil {
			t.Errorf("zone a's proxy: %v", err)
		}
	})
}
