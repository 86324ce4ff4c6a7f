package handoff

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/test/memcachedtest"
)

// extstoreSpec is the spec.extstore the extstore tests run: a 448 MiB
// file (512 MiB of disk, its whole pages less one) for 16 KiB values,
// the rest the hook's defaults.
const extstoreSpec = `{"memcached":{"maxMemoryMB":64},"extstore":{"size":"512Mi","expectedItemSize":16384}}`

// extstoreArgs is the -o that turns extstore on, as the hook renders it
// for spec (sync/memcached.Args), with the file in a folder of the test's
// that memcached may write however it runs, rather than the Pod's volume.
func extstoreArgs(t testing.TB, spec string) []string {
	t.Helper()
	var s v1alpha1.MemcachedSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		t.Fatal(err)
	}
	s.Default()
	args := memcached.Args(&s)
	dir, err := os.MkdirTemp("", "extstore-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	for i, a := range args[:len(args)-1] {
		if a != "-o" || !strings.HasPrefix(args[i+1], "ext_path=") {
			continue
		}
		path, rest, _ := strings.Cut(strings.TrimPrefix(args[i+1], "ext_path="), ":")
		return []string{"-o", "ext_path=" + filepath.Join(dir, filepath.Base(path)) + ":" + rest}
	}
	t.Fatalf("the hook's arguments for %s turn no extstore on: %q", spec, args)
	return nil
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

// TestExtstoreItemsAreCopied proves what the hand-off assumes of a source
// with extstore (memcached 1.6.45, the hook's flags): lru_crawler mgdump
// lists the items whose values are on disk as well as those in RAM, and
// the copy's pipelined mg reads their values back (memcached reads them
// from the disk asynchronously and answers in order all the same), so a
// Replaced copy into a Pod without extstore hands on every item. The
// source's own counters say how many items were on disk when the copy
// began and how many of its reads went to the disk.
func TestExtstoreItemsAreCopied(t *testing.T) {
	const items = 2 * 64 << 20 / extstoreValueSize // twice -m
	src := startServer(t, nextIP(t), 64, extstoreArgs(t, extstoreSpec)...)
	dst := startServer(t, nextIP(t), 3*items*extstoreValueSize>>20)
	fillPaced(t, src.addr, "item", items, 50<<20)
	from := newClient(t, src.addr)
	onDisk := from.stat("extstore_objects_used")
	if onDisk < items/2 {
		t.Fatalf("%d of %d items on disk before the copy, want most: the test would not be about items on disk", onDisk, items)
	}
	if got := len(from.keys()); got != items {
		t.Errorf("the dump listed %d keys, want %d (%d of them on disk)", got, items, onDisk)
	}
	readsBefore := from.stat("get_extstore")

	rec := newRecorder()
	r, _ := newRunner(t, "agent-a", rec, Options{})
	r.Update([]v1alpha1.Handoff{{Pod: "cache-old", IP: src.ip, Reason: v1alpha1.HandoffReplaced, Slot: slot(0), To: "cache-new", ToIP: dst.ip}},
		[]v1alpha1.Slot{serving(0, "cache-new", dst.ip)})
	p := rec.final(t, "cache-old", time.Minute)

	if p.State != "Done" || p.Items != items {
		t.Errorf("final report %+v, want Done with %d items", p, items)
	}
	reads := from.stat("get_extstore") - readsBefore
	t.Logf("%d of %d items on the source's disk, %d read from it by the copy", onDisk, items, reads)
	if reads < onDisk {
		t.Errorf("the copy read %d items from the source's disk, want at least the %d there", reads, onDisk)
	}
	if n := from.stat("miss_from_extstore") + from.stat("get_aborted_extstore"); n != 0 {
		t.Errorf("%d reads from the source's disk missed or were aborted", n)
	}
	hits, stale, missing := readBack(t, dst.addr, "item", items)
	if hits != items {
		t.Errorf("the destination holds %d of %d items with their values (%d stale, %d missing)", hits, items, stale, missing)
	}
	if _, ok := newClient(t, dst.addr).get(contract.DoneKey); ok {
		t.Errorf("the done marker was copied")
	}
}
