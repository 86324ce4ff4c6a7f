//go:build linux

package handoff_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/sync/slots"
	"github.com/example/memcached-operator/test/dataplane"
	"github.com/example/memcached-operator/test/memcachedtest"
	"github.com/example/memcached-operator/test/pod"
	"github.com/example/memcached-operator/test/testutil"
)

// The refill's load: steadyLoad's, over enough items of about a kilobyte
// that a slot's copy takes a measurable time (10,000 in each of three
// slots, some 12 MiB a Pod).
const (
	refillKeys      = 30000
	refillValueSize = 1000
)

// newZoneCluster starts size Pods in each of zones (the spec's), the
// agent Deployment's agent, and each zone's proxy at proxyIPs[zone] with
// the agent beside it, all as the hook answers them; every agent follows
// the status and reports into a file of its own, which the next status
// carries, as in keepWarm's tests. It returns once each proxy routes by
// the first pool, with the proxies by zone and every agent.
func newZoneCluster(t *testing.T, name, spec string, zones []string, size int, proxyIPs map[string]string) (*cluster, map[string]*dataplane.Proxy, []*dataplane.Agent) {
	t.Helper()
	dir := dataplane.ReadableDir(t)
	k := &cluster{t: t, name: name, pods: map[string]*pod.Pod{}, tmpls: map[string]corev1.PodTemplateSpec{},
		// A Refill's slot stays Filling until its report, or the fill
		// bound, comes (the publishes that follow): not the Sync's
		// resync to the bound.
		c:   &dataplane.Cluster{Name: name, Namespace: "default", Spec: spec, MaxResync: 5 * time.Second},
		dir: dir, file: filepath.Join(dir, "memcached.json")}
	k.c.Sync(t)
	for _, z := range zones {
		k.tmpls[z] = k.c.ZonePodTemplate(t, z)
		for range size {
			k.c.Pods = append(k.c.Pods, k.startIn(z))
		}
	}
	st := k.publish()
	pool, err := contract.RenderPool(st.Zones)
	if err != nil {
		t.Fatalf("the hook's status.zones renders no pool: %v", err)
	}
	if pool.Down != 0 {
		t.Fatalf("the first pool has %d slots down:\n%s", pool.Down, pool.Content)
	}
	k.agent = dataplane.StartAgent(t, append(append([]string{"--memcached=" + name, "--listen=127.0.0.1:0"}, k.follow()...), k.settle()...)...)
	agents := []*dataplane.Agent{k.agent}
	proxies := map[string]*dataplane.Proxy{}
	for _, z := range zones {
		setup := k.c.ZoneProxySetup(t, z)
		if got := setup.Env[memcached.ProxyLocalZoneEnv]; got != z {
			t.Fatalf("the hook's proxy Deployment of zone %s sets %s=%q", z, memcached.ProxyLocalZoneEnv, got)
		}
		p := dataplane.StartProxy(t, proxyIPs[z], setup)
		a := dataplane.StartAgent(t, append(p.AgentArgs(), k.follow()...)...)
		agents = append(agents, a)
		proxies[z] = p
		k.c.Proxies = append(k.c.Proxies, dataplane.Pod{Name: a.Name, IP: proxyIPs[z], Zone: z, Ready: true})
	}
	for z, p := range proxies {
		var got []byte
		if !testutil.Poll(10*time.Second, func() bool { got, _ = os.ReadFile(p.PoolFile); return bytes.Equal(got, pool.Content) }) {
			t.Fatalf("zone %s's agent wrote the pool\n%s\nwant\n%s", z, got, pool.Content)
		}
		// The proxy polls its pool file once a second, and answers with
		// its placeholder (an error) until its workers route by it: a
		// read answered from the zone (a miss) says they do.
		var answer string
		if !testutil.Poll(10*time.Second, func() bool {
			answer, _ = memcachedtest.Ask(p.Addr(), "mg zone-no-such-key v\r\n")
			return answer == "EN\r\n"
		}) {
			t.Fatalf("zone %s's proxy does not route by its first pool: a read answered %q\n%s", z, answer, p.Log())
		}
	}
	return k, proxies, agents
}

// zoneSlot is slot s of zone in the status.
func zoneSlot(t *testing.T, st v1alpha1.MemcachedStatus, zone string, s int) v1alpha1.Slot {
	t.Helper()
	for _, z := range st.Zones {
		if z.Name == zone && s < len(z.SlotTable.Slots) {
			return z.SlotTable.Slots[s]
		}
	}
	t.Fatalf("no slot %d of zone %s in the status: %+v", s, zone, st.Zones)
	return v1alpha1.Slot{}
}

// refillOf is the status's Refill of Pod to, or nil.
func refillOf(st v1alpha1.MemcachedStatus, to string) *v1alpha1.Handoff {
	for i, h := range st.Handoffs {
		if _, filled, _, ok := h.Refilled(); ok && filled == to {
			return &st.Handoffs[i]
		}
	}
	return nil
}

// TestZoneRefill loses a Pod of zone a without grace (issue #34: "warm
// after a loss"), under steadyLoad's read-and-rewrite load through zone
// a's proxy, in a Memcached of two zones of three Pods: the agent
// Deployment's agent and each zone's proxy with its agent, as the hook
// answers them, every agent following the status. While no Pod serves
// the lost slot, zone a's proxy reads its keys from zone b; its successor
// takes the slot empty, the hook plans a Refill from the Pod that holds
// the slot in zone b and keeps the slot down in zone a (Filling, served
// by no Pod: make before break), an agent copies it, forwarding the
// source's writes, and reports it Copied; the hook then lists the new
// Pod, the agent waits for the proxies to move, reports Done, and the
// entry leaves the status. The slot is listed only once its copy copied;
// through zone a's proxy the hit ratio after the refill is at least 0.95
// of the ratio before the loss, no get of the load's, during or after,
// returns a value older than one the cache acknowledged, and neither does
// a sweep of every key once the refill ended. It prints the hit ratios
// before, while the slot was down, while the refill ran (the new Pod
// taking the slot, the copy, the proxies' move) and after, the lowest
// second and the errors from the loss on; what the loss would cost
// without a refill (the ratio while the proxy read the slot from the new,
// empty Pod, before the copy: only when the slot was listed before its
// copy copied, as before make before break); and the refill's items per
// second, from the copying agent's log (its report counts whole seconds,
// 0 for a copy this size).
func TestZoneRefill(t *testing.T) {
	t.Parallel()
	block := testutil.Loopback("test/handoff")
	k, proxies, agents := newZoneCluster(t, "zr", `{"size":3,"zones":{"names":["a","b"]}}`, []string{"a", "b"}, 3,
		map[string]string{"a": block.IP(21), "b": block.IP(22)})
	load := &dataplane.Load{Addr: proxies["a"].Addr(), Keys: refillKeys, ValueSize: refillValueSize, SetShare: setShare, Workers: workers, Rate: rate}
	fillThroughProxy(t, load)
	// Zone b took every write too (the proxy answers a write once one
	// zone stored it): the refill's source holds the slot's keys.
	for _, z := range []string{"a", "b"} {
		var held int
		if !testutil.Poll(10*time.Second, func() bool {
			held = 0
			for _, p := range k.c.Pods {
				if p.Zone == z {
					held += itemCount(t, p.IP)
				}
			}
			return held >= refillKeys
		}) {
			t.Fatalf("zone %s holds %d items after the fill, want %d", z, held, refillKeys)
		}
	}
	load.Start()
	defer load.Stop()
	s := sample(t, "zones/refill", load)

	const slot = 1
	lost := zoneSlot(t, k.c.Status(), "a", slot)
	source := zoneSlot(t, k.c.Status(), "b", slot)
	b0 := load.Counts()
	time.Sleep(3 * time.Second)
	b1 := load.Counts()

	// Lost without grace: its slot goes down, and zone a's proxy reads
	// its keys from zone b meanwhile.
	k.pods[lost.Pod].Kill()
	k.c.Remove(lost.Pod)
	delete(k.pods, lost.Pod)
	st := k.publish()
	if got := zoneSlot(t, st, "a", slot); got.State == v1alpha1.SlotServing {
		t.Fatalf("zone a's slot %d still serves after its Pod was lost: %+v", slot, got)
	}
	pool, err := contract.RenderPool(st.Zones)
	if err != nil {
		t.Fatal(err)
	}
	said := fmt.Sprintf("pool version %d: 2 zones, 6 slots, 1 down", pool.Version)
	if !testutil.Poll(10*time.Second, func() bool { return strings.Contains(proxies["a"].Log(), said) }) {
		t.Fatalf("zone a's proxy never said %q:\n%s", said, proxies["a"].Log())
	}
	next := k.startIn("a")
	b2 := load.Counts()

	// Its successor, Ready, takes the slot empty: the Refill. The slot
	// stays down in zone a until the copy copied.
	k.c.Pods = append(k.c.Pods, next)
	st = k.publish()
	tookSlot := time.Now()
	if got := zoneSlot(t, st, "a", slot); got.Pod != next.Name || got.State != v1alpha1.SlotFilling || got.ServedIP() != "" {
		t.Fatalf("the new Pod %s is not in zone a's slot %d, Filling and served by no Pod: %+v", next.Name, slot, got)
	}
	h := refillOf(st, next.Name)
	if h == nil {
		t.Fatalf("no Refill of %s in the status: %+v", next.Name, st.Handoffs)
	}
	if filled, _, _, _ := h.Refilled(); h.Pod != source.Pod || h.Zone != "a" || filled != slot || h.Flush {
		t.Errorf("the Refill is %+v, want %s (zone b's slot %d) filling %s in zone a, without a flush", *h, source.Pod, slot, next.Name)
	}
	// Until the refill ends, the status carries the agents' reports; the
	// proxy's first read of the slot from the new Pod (a probe only it
	// holds) marks when zone a's reads of the slot's keys went there.
	key := contract.ReportKey(*h)
	probe := probeOn(t, next, slot, 3)
	var report *v1alpha1.HandoffProgress
	var switched time.Time
	var atSwitch dataplane.Counts
	routes := func() bool {
		if switched.IsZero() && reads(proxies["a"], probe) {
			switched, atSwitch = time.Now(), load.Counts()
		}
		return !switched.IsZero()
	}
	// listedBy is the report the status that listed the new Pod was
	// computed from.
	var listedBy *v1alpha1.HandoffProgress
	if !testutil.Poll(120*time.Second, func() bool {
		routes()
		st := k.publish()
		p, ok := k.reports()[key]
		if ok {
			report = &p
		}
		if e := zoneSlot(t, st, "a", slot); listedBy == nil && e.Pod == next.Name && e.State == v1alpha1.SlotServing {
			listedBy = &v1alpha1.HandoffProgress{}
			if ok {
				listedBy = &p
			}
		}
		return refillOf(st, next.Name) == nil
	}) {
		t.Fatalf("the Refill did not end: %+v, its last report %+v", k.c.Status().Handoffs, report)
	}
	took := time.Since(tookSlot)
	b3 := load.Counts()
	if !testutil.Poll(30*time.Second, routes) {
		t.Fatalf("zone a's proxy does not read slot %d from %s:\n%s", slot, next.Name, proxies["a"].Log())
	}
	// After: as long a window as before the loss.
	time.Sleep(3 * time.Second)
	b4 := load.Counts()
	// The load's gets sample the keys; a sweep reads each once, beside
	// it.
	swept, err := load.Sweep(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	lowest := s.done()

	before, down, during, after := b1.Sub(b0).HitRatio(), b2.Sub(b1).HitRatio(), b3.Sub(b2).HitRatio(), b4.Sub(b3).HitRatio()
	stale, errs := b4.Sub(b1).Stale, b4.Sub(b1).Errors
	var items, skipped, seconds int64
	if report != nil {
		items, skipped, seconds = report.Items, report.Skipped, report.Seconds
	}
	testutil.Benchmark("BenchmarkHandoff/zones/refill/hit-ratio",
		"%.3f hit-ratio-before %.3f hit-ratio-slot-down %.3f hit-ratio-during-refill %.3f hit-ratio-after %.3f after-of-before %.3f during-of-before %d stale",
		before, down, during, after, after/before, during/before, stale)
	// From the loss to the end: make before break's figures, as the
	// other hand-offs print them.
	testutil.Benchmark("BenchmarkHandoff/zones/refill/loss-to-after", "%.3f hit-ratio %.3f of-before %.3f lowest-second %d errors %d stale",
		b4.Sub(b1).HitRatio(), b4.Sub(b1).HitRatio()/before, lowest, errs, stale)
	testutil.Benchmark("BenchmarkHandoff/zones/refill/proxy-switch", "%.3f s-from-the-status %.3f s-from-the-status-to-the-refill's-end", switched.Sub(tookSlot).Seconds(), took.Seconds())
	// What the loss costs without a refill: the slot served by the new,
	// empty Pod, from the proxy's switch to the copy, when the slot was
	// listed before its copy copied (as before make before break).
	filledFirst := listedBy != nil && (listedBy.State == v1alpha1.HandoffCopied || listedBy.State == v1alpha1.HandoffDone)
	if !filledFirst && switched.Before(tookSlot.Add(took)) {
		cold := b3.Sub(atSwitch)
		testutil.Benchmark("BenchmarkHandoff/zones/refill/before-the-copy", "%.3f hit-ratio %.3f of-before %d gets", cold.HitRatio(), cold.HitRatio()/before, cold.Hits+cold.Misses+cold.Errors)
	}
	testutil.Benchmark("BenchmarkHandoff/zones/refill/sweep-after", "%.3f hit-ratio %d stale %d keys", swept.HitRatio(), swept.Stale, refillKeys)
	// The agent's report counts whole seconds; its log has the copy's
	// own, to the nanosecond.
	copied, copySeconds := refillLogged(t, agents, h.Pod)
	testutil.Benchmark("BenchmarkHandoff/zones/refill/items-per-second",
		"%.0f items/s %d items %.3f s %d items-already-there %d s-reported", float64(copied)/copySeconds, copied, copySeconds, skipped, seconds)
	if copied != items {
		t.Errorf("the agent logged %d items copied, its report %d", copied, items)
	}

	if !filledFirst {
		t.Errorf("the hook listed the new Pod in zone a's slot %d from the report %+v, want the copy Copied first: the proxy read the slot from an empty Pod", slot, listedBy)
	}
	switch {
	case report == nil || report.State != v1alpha1.HandoffDone:
		t.Errorf("the Refill's last report: %+v, want Done", report)
	case report.Items == 0:
		t.Errorf("the Refill copied no item: %+v", report)
	}
	if stale != 0 {
		t.Errorf("%d stale reads through zone a's proxy while the slot was down, refilled and after, want 0: the refilled Pod served values older than writes the cache acknowledged", stale)
	}
	if swept.Stale != 0 {
		t.Errorf("a sweep of every key through zone a's proxy after the refill read %d stale values, want 0: %+v", swept.Stale, swept)
	}
	if after < 0.95*before {
		t.Errorf("after the refill zone a's proxy's hit ratio is %.3f, %.0f %% of the %.3f before the loss; want at least 95 %%", after, 100*after/before, before)
	}
	if err := proxies["a"].Alive(); err != nil {
		t.Errorf("zone a's proxy: %v", err)
	}
}

// probeOn stores, on Pod p alone, a key of slot (of size slots), and
// returns it: a proxy that reads it reads the slot from p.
func probeOn(t *testing.T, p dataplane.Pod, slot, size int) string {
	t.Helper()
	key := ""
	for i := 0; key == ""; i++ {
		if c := fmt.Sprintf("zone-probe-%s-%d", p.Name, i); slots.Place([]byte(c), size) == slot {
			key = c
		}
	}
	addr := net.JoinHostPort(p.IP, fmt.Sprint(dataplane.Port))
	if got, err := memcachedtest.Ask(addr, fmt.Sprintf("set %s 0 120 1\r\nv\r\n", key)); err != nil || got != "STORED\r\n" {
		t.Fatalf("storing the probe %s on %s: %q %v", key, p.Name, got, err)
	}
	return key
}

// reads tells whether proxy reads probe (probeOn's).
func reads(proxy *dataplane.Proxy, probe string) bool {
	got, _ := memcachedtest.Ask(proxy.Addr(), "get "+probe+"\r\n")
	return strings.Contains(got, "\r\nv\r\n")
}

// refillLogged is what the agent that copied source's Refill logged of
// it ("handed items on"): the items copied and the copy's seconds.
func refillLogged(t *testing.T, agents []*dataplane.Agent, source string) (int64, float64) {
	t.Helper()
	for _, a := range agents {
		for _, line := range strings.Split(a.Log(), "\n") {
			var l struct {
				Msg, Pod, Reason string
				Items            int64
				Seconds          float64
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "handed items on" && l.Reason == string(v1alpha1.HandoffRefill) && l.Pod == source {
				return l.Items, l.Seconds
			}
		}
	}
	t.Fatalf("no agent logged the Refill from %s", source)
	return 0, 0
}

// itemCount is the memcached at ip's curr_items.
func itemCount(t *testing.T, ip string) int {
	t.Helper()
	got, err := memcachedtest.Stats(net.JoinHostPort(ip, fmt.Sprint(dataplane.Port)))
	if err != nil {
		t.Fatalf("stats of %s: %v", ip, err)
	}
	var n int
	if _, err := fmt.Sscan(got["curr_items"], &n); err != nil {
		t.Fatalf("%s: curr_items %q: %v", ip, got["curr_items"], err)
	}
	return n
}
