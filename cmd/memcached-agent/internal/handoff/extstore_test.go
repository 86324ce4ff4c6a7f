package handoff

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/test/memcachedtest"
	"github.com/example/memcached-operator/test/testutil"
)

// extstoreMemoryMB is -m of the memcacheds with extstore the tests run,
// and extstoreSpec their spec: a 448 MiB file (512 MiB of disk, its whole
// pages less one) for 16 KiB values, the rest the hook's defaults. -m is
// small so that a working set four times it is quick to write and read.
const (
	extstoreMemoryMB = 32
	extstoreSpec     = `{"memcached":{"maxMemoryMB":32},"extstore":{"size":"512Mi","expectedItemSize":16384}}`
)

// extstoreArgs are memcached's arguments as the hook renders them for
// spec (sync/memcached.Args: -m, -t, -I, and the -o that turns extstore
// on) but the port, which the test's own launcher gives, with the file in
// a folder of the test's that memcached may write however it runs rather
// than the Pod's volume.
func extstoreArgs(t testing.TB, spec string) []string {
	t.Helper()
	var s v1alpha1.MemcachedSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		t.Fatal(err)
	}
	s.Default()
	dir, err := os.MkdirTemp("", "extstore-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	var args []string
	ext := false
	for a := range slices.Values(memcached.Args(&s)) {
		if v, ok := strings.CutPrefix(a, "ext_path="); ok {
			path, rest, _ := strings.Cut(v, ":")
			a, ext = "ext_path="+filepath.Join(dir, filepath.Base(path))+":"+rest, true
		}
		args = append(args, a)
	}
	if !ext {
		t.Fatalf("the hook's arguments for %s turn no extstore on: %q", spec, args)
	}
	// The port is the launcher's (-p last wins, but say it once).
	if i := slices.Index(args, "-p"); i >= 0 {
		args = slices.Delete(args, i, i+2)
	}
	return args
}

// extstoreValueSize is the values' size in the extstore tests: a chunk
// of the caches extstore is for, well above ext_item_size.
const extstoreValueSize = 16 << 10

// fillPaced writes count values of extstoreValueSize named prefix-i
// (valueFor) to addr at rate bytes a second, in batches of 1 MiB closed by
// mn, so that memcached flushes them to disk as they come rather than
// evicting them first (the 50 MB/s keeps every one). It returns
// how long it took.
func fillPaced(t testing.TB, addr, prefix string, count int, rate float64) time.Duration {
	t.Helper()
	c := memcachedtest.Dial(t, addr)
	defer c.Close()
	var req strings.Builder
	batch := max(1, (1<<20)/extstoreValueSize)
	start := time.Now()
	for i := range count {
		key := fmt.Sprintf("%s-%d", prefix, i)
		fmt.Fprintf(&req, "ms %s %d T0 F%d q\r\n%s\r\n", key, extstoreValueSize, i, valueFor(key, extstoreValueSize))
		if (i+1)%batch != 0 && i != count-1 {
			continue
		}
		req.WriteString("mn\r\n")
		if got := c.Do(req.String()); got != "MN\r\n" {
			t.Fatalf("filling %s: %q", addr, got)
		}
		req.Reset()
		due := start.Add(time.Duration(float64((i+1)*extstoreValueSize) / rate * float64(time.Second)))
		time.Sleep(time.Until(due))
	}
	return time.Since(start)
}

// readBack reads prefix-0 to prefix-(count-1) from addr, 100 pipelined mg
// at a time, and counts the keys that come back with the value written
// (hits), with another value (stale), or not at all.
func readBack(t testing.TB, addr, prefix string, count int) (hits, stale, missing int) {
	t.Helper()
	c := memcachedtest.Dial(t, addr)
	defer c.Close()
	for first := 0; first < count; first += 100 {
		var req strings.Builder
		last := min(first+100, count)
		for i := first; i < last; i++ {
			fmt.Fprintf(&req, "mg %s-%d v f\r\n", prefix, i)
		}
		if err := c.Send(req.String()); err != nil {
			t.Fatal(err)
		}
		for i := first; i < last; i++ {
			got, err := c.Answer()
			if err != nil {
				t.Fatal(err)
			}
			key := fmt.Sprintf("%s-%d", prefix, i)
			want := fmt.Sprintf("VA %d f%d\r\n%s\r\n", extstoreValueSize, i, valueFor(key, extstoreValueSize))
			switch {
			case got == "EN\r\n":
				missing++
			case got == want:
				hits++
			default:
				stale++
			}
		}
	}
	return hits, stale, missing
}

// forgetCopies deletes the markers of the copies a source made, so that
// it hands its items on again.
func (cl *client) forgetCopies() {
	cl.t.Helper()
	for _, k := range []string{contract.DoneKey, CopiedKey} {
		if got := cl.Do("md " + k + "\r\n"); got != "HD\r\n" && got != "NF\r\n" {
			cl.t.Fatalf("md %s: %q", k, got)
		}
	}
}

// TestExtstoreCopy is a keepWarm rolling replacement of a Pod that holds
// its items on disk (issue #42), on memcached 1.6.45 with the hook's flags:
// a working set four times -m of 16 KiB values, written at 50 MB/s so
// that (nearly) all of them land on the source's disk, is handed by a Replaced
// copy to a successor with the same extstore.
//
// It proves what the copy assumes of such a source: lru_crawler mgdump
// lists the items whose values are on disk, and the copy's pipelined mg
// reads each from the disk (memcached reads it asynchronously and answers
// in order all the same: get_extstore counts every item on disk, none
// missed or aborted). And it holds the copy to its pacing (pace.go): the
// successor ends holding at least 0.99 of the keys, none stale. The same
// copy from a source that holds the working set in RAM gives the rate
// from RAM beside the rate from disk; the copy from disk unpaced shows
// what the successor keeps without pacing (not asserted: that depends on
// how fast this machine copies against how fast it flushes). Each copy's
// rate, the successor's hit ratio and evictions are printed as benchmark
// lines.
func TestExtstoreCopy(t *testing.T) {
	const items = 4 * extstoreMemoryMB << 20 / extstoreValueSize // four times -m
	onDisk := startServer(t, nextIP(t), extstoreMemoryMB, extstoreArgs(t, extstoreSpec)...)
	fillPaced(t, onDisk.addr, "item", items, 50<<20)
	source := newClient(t, onDisk.addr)
	// The flusher may still be behind the writes on a loaded machine;
	// the last items written may stay in RAM (memcached's HOT LRU).
	var stored int64
	testutil.Eventually(t, 10*time.Second, func() error {
		if stored = source.stat("extstore_objects_used"); stored < items*3/4 {
			return fmt.Errorf("%d of %d items on the source's disk, want most: the test would not be about items on disk", stored, items)
		}
		return nil
	})
	if got := len(source.keys()); got != items {
		t.Errorf("the dump listed %d keys, want %d (%d of them on disk)", got, items, stored)
	}
	inRAM := startServer(t, nextIP(t), 2*items*extstoreValueSize>>20)
	fill(t, inRAM.addr, "item", items, func(int) int { return extstoreValueSize }, 0)

	tests := []struct {
		name string
		src  *server
		pace *paceRule
		// floor is the share of the keys the successor must hold; 0:
		// printed only.
		floor float64
	}{
		{name: "from-disk", src: onDisk, floor: 0.99},
		{name: "from-RAM", src: inRAM, floor: 0.99},
		{name: "from-disk-unpaced", src: onDisk, pace: &paceRule{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			from := newClient(t, tt.src.addr)
			from.forgetCopies()
			readsBefore := from.stat("get_extstore")
			dst := startServer(t, nextIP(t), extstoreMemoryMB, extstoreArgs(t, extstoreSpec)...)
			rec := newRecorder()
			r, _ := newHookedRunner(t, "agent-a", rec, Options{}, testHooks{pace: tt.pace})
			start := time.Now()
			r.Update([]v1alpha1.Handoff{{Pod: "cache-old", IP: tt.src.ip, Reason: v1alpha1.HandoffReplaced, Slot: slot(0), To: "cache-new", ToIP: dst.ip}},
				[]v1alpha1.Slot{serving(0, "cache-new", dst.ip)})
			p := rec.final(t, "cache-old", 2*time.Minute)
			took := time.Since(start)
			if p.State != "Done" || p.Items != items {
				t.Fatalf("final report %+v, want Done with %d items", p, items)
			}
			if tt.src == onDisk {
				if reads := from.stat("get_extstore") - readsBefore; reads < stored {
					t.Errorf("the copy read %d items from the source's disk, want at least the %d there", reads, stored)
				}
				if n := from.stat("miss_from_extstore") + from.stat("get_aborted_extstore"); n != 0 {
					t.Errorf("%d reads from the source's disk missed or were aborted", n)
				}
			}
			hits, stale, missing := readBack(t, dst.addr, "item", items)
			ratio := float64(hits) / items
			to := newClient(t, dst.addr)
			testutil.Benchmark("BenchmarkExtstoreCopy/"+tt.name, "%.1f MiB/s %.3f hit-ratio %d stale %d evictions %.2f s",
				float64(p.Bytes)/(1<<20)/took.Seconds(), ratio, stale, to.stat("evictions"), took.Seconds())
			t.Logf("%s: %d hits, %d stale, %d missing of %d; %s", tt.name, hits, stale, missing, items, p.Message)
			if stale != 0 {
				t.Errorf("%d keys stale on the successor", stale)
			}
			if tt.floor > 0 && ratio < tt.floor {
				t.Errorf("the successor holds %d of %d keys (%.3f), want at least %.2f: %d evictions, %d bytes flushed, %s",
					hits, items, ratio, tt.floor, to.stat("evictions"), to.stat("extstore_bytes_written"), p.Message)
			}
		})
	}
}

// TestPace holds the copy's pacing to its rule (pace.go) against real
// destinations: a copy of three quarters of the destinations' -m, so that nothing is evicted whatever the pacing does. Into a
// destination whose extstore flushes nothing until its memory is short
// (itemAgeSeconds), the copy waits once it has sent half of -m, gives up
// waiting once the destination has flushed nothing for the rule's stall,
// says so, and ends with every item; into one that flushes as items come
// (the hook's defaults), it never waits to the bound; into one without
// extstore, it never waits.
func TestPace(t *testing.T) {
	const items = 3 * extstoreMemoryMB << 20 / 4 / extstoreValueSize
	// The bound comes sooner, where it is to be reached.
	short := defaultPace
	short.stall = 300 * time.Millisecond
	tests := []struct {
		name string
		args []string
		rule paceRule
		// bound: a wait ended on the bound (else none did); quiet: the
		// copy's report says nothing of pacing.
		bound, quiet bool
	}{
		{name: "extstore flushing nothing", args: extstoreArgs(t, strings.Replace(extstoreSpec, `"expectedItemSize"`, `"itemAgeSeconds":3600,"expectedItemSize"`, 1)),
			rule: short, bound: true},
		{name: "extstore flushing", args: extstoreArgs(t, extstoreSpec), rule: defaultPace},
		{name: "no extstore", args: nil, rule: defaultPace, quiet: true},
	}
	src := startServer(t, nextIP(t), 2*items*extstoreValueSize>>20)
	fill(t, src.addr, "item", items, func(int) int { return extstoreValueSize }, 0)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newClient(t, src.addr).forgetCopies()
			dst := startServer(t, nextIP(t), extstoreMemoryMB, tt.args...)
			rec := newRecorder()
			r, _ := newHookedRunner(t, "agent-a", rec, Options{}, testHooks{pace: &tt.rule})
			r.Update([]v1alpha1.Handoff{{Pod: "cache-old", IP: src.ip, Reason: v1alpha1.HandoffReplaced, Slot: slot(0), To: "cache-new", ToIP: dst.ip}},
				[]v1alpha1.Slot{serving(0, "cache-new", dst.ip)})
			p := rec.final(t, "cache-old", time.Minute)
			if p.State != "Done" || p.Items != items {
				t.Fatalf("final report %+v, want Done with %d items", p, items)
			}
			t.Logf("%s: %q", tt.name, p.Message)
			if got := strings.Contains(p.Message, "given up"); got != tt.bound {
				t.Errorf("the copy's report %q says a wait ended on the bound: %v, want %v", p.Message, got, tt.bound)
			}
			if tt.quiet && p.Message != "" {
				t.Errorf("the copy's report says %q, want nothing", p.Message)
			}
			if hits, stale, missing := readBack(t, dst.addr, "item", items); hits != items {
				t.Errorf("the destination holds %d of %d items (%d stale, %d missing)", hits, items, stale, missing)
			}
		})
	}
}
