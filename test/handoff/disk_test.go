//go:build linux

package handoff_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/example/memcached-operator/test/dataplane"
	"github.com/example/memcached-operator/test/memcachedtest"
	"github.com/example/memcached-operator/test/testutil"
)

// TestRollingReplacementOnDisk replaces, one at a time, every Pod of three
// whose items are mostly on extstore's disk (spec.extstore, -m 64 and
// 20,000 values of 16 KiB: five times what the Pods' memory holds), with
// keepWarm, under a load through the proxy: the copy dumps the items on
// disk too and reads each back from it (the agent's TestExtstoreCopy), and
// paces itself by the successor's flush. 0 stale reads and 0 errors are
// required; the hit ratio, the share of items on disk and the copies'
// rate are printed.
func TestRollingReplacementOnDisk(t *testing.T) {
	t.Parallel()
	spec := `{"size":3,"proxy":{"enabled":true},"rollout":{"keepWarm":true},` +
		`"memcached":{"maxMemoryMB":64},"extstore":{"size":"512Mi","expectedItemSize":16384}}`
	k := newCluster(t, "disk", spec, 3, testutil.Loopback("test/handoff").IP(6))
	load := &dataplane.Load{Addr: k.proxy.Addr(), Keys: keys, ValueSize: 16 << 10, SetShare: setShare, Workers: workers, Rate: 500}
	fillThroughProxy(t, load)
	var items, onDisk int64
	for _, name := range []string{"disk-0", "disk-1", "disk-2"} {
		items += k.stat(name, "curr_items")
		onDisk += k.stat(name, "extstore_objects_used")
	}
	load.Start()
	defer load.Stop()
	s := sample(t, "keepwarm/on-disk", load)
	var ended []left
	before, d := ratioOf(load, func() {
		for _, old := range []string{"disk-0", "disk-1", "disk-2"} {
			k.c.Pods = append(k.c.Pods, k.start())
			k.publish()
			ended = append(ended, k.replace([]string{old}, false)...)
		}
	})
	lowest := s.done()
	var copied int64
	for i, e := range ended {
		t.Logf("disk-%d left in %.1f s of preStop; its hand-off: %+v", i, e.preStop.Seconds(), e.report)
		if e.report == nil || e.report.State != "Done" || e.report.Items == 0 {
			t.Errorf("disk-%d's hand-off reported %+v, want Done with items", i, e.report)
			continue
		}
		copied += e.report.Items
	}
	// The copies' rate, from the agents' logs (JSON; a report's seconds
	// are whole).
	var bytes, seconds float64
	for _, a := range []*dataplane.Agent{k.agent, k.proxyAgent} {
		for _, line := range strings.Split(a.Log(), "\n") {
			var l struct {
				Msg     string  `json:"msg"`
				Bytes   float64 `json:"bytes"`
				Seconds float64 `json:"seconds"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "handed items on" {
				bytes, seconds = bytes+l.Bytes, seconds+l.Seconds
			}
		}
	}
	testutil.Benchmark("BenchmarkHandoff/keepwarm/on-disk/rolling-replacement",
		"%.3f hit-ratio-before %.3f hit-ratio-during %.3f of-before %.3f lowest-second %d errors %d stale %.3f items-on-disk %d items-copied %.1f MiB-copied %.1f MiB/s",
		before, d.HitRatio(), d.HitRatio()/before, lowest, d.Errors, d.Stale, float64(onDisk)/float64(max(items, 1)), copied, bytes/(1<<20), bytes/(1<<20)/max(seconds, 1e-3))
	if d.Stale != 0 {
		t.Errorf("%d stale reads through the rolling replacement of Pods on disk, want 0; %s", d.Stale, k.switched())
	}
	if d.Errors != 0 {
		t.Errorf("%d errors through the rolling replacement of Pods on disk, want 0; %s", d.Errors, k.switched())
	}
}

// stat is a number memcached's stats give for Pod name.
func (k *cluster) stat(name, stat string) int64 {
	k.t.Helper()
	out, err := memcachedtest.Ask(k.pods[name].Addr(dataplane.Port), "stats\r\n")
	if err != nil {
		k.t.Fatalf("stats of %s: %v", name, err)
	}
	for _, line := range strings.Split(out, "\r\n") {
		if v, ok := strings.CutPrefix(line, "STAT "+stat+" "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	k.t.Fatalf("stats of %s have no %s:\n%s", name, stat, out)
	return 0
}
