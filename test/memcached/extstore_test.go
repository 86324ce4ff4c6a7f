//go:build linux

package memcached_test

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/test/pod"
	"github.com/example/memcached-operator/test/testutil"
)

// TestExtstoreHoldsMoreThanMemory runs the Pod template the hook answers
// for spec.extstore, with its file in the Pod's emptyDir (a temporary
// folder here), and writes a working set four times -m: 16 KiB values,
// 256 MiB against -m 64, on one connection paced at 50 MB/s, then reads
// every key back. With extstore memcached flushes the values to disk as
// they come and keeps them (at least 0.99 of the keys come back, with
// their values); the same working set without extstore keeps what -m
// holds, and with extstore unpaced (as fast as loopback takes it) the
// values arrive faster than memcached flushes them and it evicts the ones
// it has not written yet. The three hit ratios, the write rate and the
// evictions are printed as benchmark lines; only the paced extstore's
// floor is asserted, the figure the API reference promises.
func TestExtstoreHoldsMoreThanMemory(t *testing.T) {
	const (
		valueSize = 16 << 10
		items     = 4 * 64 << 20 / valueSize // four times -m
		paced     = 50 << 20                 // bytes a second
	)
	withExtstore := `{"memcached":{"maxMemoryMB":64},"extstore":{"size":"512Mi","expectedItemSize":16384}}`
	tests := []struct {
		name  string
		spec  string
		rate  int // bytes a second; 0: unpaced
		floor float64
	}{
		{name: "extstore", spec: withExtstore, rate: paced, floor: 0.99},
		{name: "no-extstore", spec: `{"memcached":{"maxMemoryMB":64}}`, rate: paced},
		{name: "extstore-unpaced", spec: withExtstore},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl := template(t, answer(t, withSpec(fmt.Sprintf("ext-%d", i), tt.spec)))
			p := pod.Run(t, tmpl, pod.Options{})
			c := dial(t, p, 11211)
			start := time.Now()
			writeItems(t, c, items, valueSize, tt.rate)
			took := time.Since(start)
			// What the flusher still holds in its write buffers is read
			// back from RAM: no wait for it.
			hits := readItems(t, c, items, valueSize)
			st := c.stats(t, "stats")
			ratio := float64(hits) / items
			testutil.Benchmark("BenchmarkExtstoreHits/"+tt.name, "%.3f hit-ratio %.0f MB/s %d items %s evictions %s extstore-objects",
				ratio, float64(items*valueSize)/took.Seconds()/1e6, items, st["evictions"], st["extstore_objects_written"])
			if tt.floor > 0 && ratio < tt.floor {
				t.Errorf("%d of %d keys came back (%.3f), want at least %.2f: evictions %s, extstore_objects_written %s, extstore_bytes_written %s",
					hits, items, ratio, tt.floor, st["evictions"], st["extstore_objects_written"], st["extstore_bytes_written"])
			}
		})
	}
}

// extstoreValue is key i's value: its own bytes, so that a read that
// returns another key's value is told from a hit.
func extstoreValue(i, size int) string {
	v := fmt.Sprintf("value-%d-", i)
	return (strings.Repeat(v, size/len(v)+1))[:size]
}

// writeItems sets items values of size bytes with noreply on c, rate bytes
// a second (0: as fast as memcached takes them), a 1 MiB batch at a time,
// then waits for memcached to have read them all (a version answered).
func writeItems(t *testing.T, c *client, items, size, rate int) {
	t.Helper()
	w := bufio.NewWriterSize(c.conn, 1<<20)
	batch := max(1, (1<<20)/size)
	start := time.Now()
	for i := 0; i < items; i++ {
		c.conn.SetDeadline(time.Now().Add(60 * time.Second))
		fmt.Fprintf(w, "set key-%d 0 0 %d noreply\r\n%s\r\n", i, size, extstoreValue(i, size))
		if (i+1)%batch != 0 {
			continue
		}
		if err := w.Flush(); err != nil {
			t.Fatalf("writing: %v", err)
		}
		if rate > 0 {
			due := start.Add(time.Duration(float64((i+1)*size) / float64(rate) * float64(time.Second)))
			time.Sleep(time.Until(due))
		}
	}
	fmt.Fprintf(w, "version\r\n")
	if err := w.Flush(); err != nil {
		t.Fatalf("writing: %v", err)
	}
	if line, err := c.r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "VERSION ") {
		t.Fatalf("after the writes: %q, %v", line, err)
	}
}

// readItems gets every key back, 100 to a request, and counts those that
// come back with their own value.
func readItems(t *testing.T, c *client, items, size int) int {
	t.Helper()
	hits := 0
	for first := 0; first < items; first += 100 {
		c.conn.SetDeadline(time.Now().Add(30 * time.Second))
		var keys []string
		for i := first; i < min(first+100, items); i++ {
			keys = append(keys, fmt.Sprintf("key-%d", i))
		}
		fmt.Fprintf(c.conn, "get %s\r\n", strings.Join(keys, " "))
		for {
			line, err := c.r.ReadString('\n')
			if err != nil {
				t.Fatalf("reading: %v", err)
			}
			if line == "END\r\n" {
				break
			}
			var i, n int
			if _, err := fmt.Sscanf(line, "VALUE key-%d 0 %d\r\n", &i, &n); err != nil {
				t.Fatalf("reading: %q", line)
			}
			data := make([]byte, n+2)
			if _, err := io.ReadFull(c.r, data); err != nil {
				t.Fatalf("reading: %v", err)
			}
			if string(data[:n]) == extstoreValue(i, size) {
				hits++
			}
		}
	}
	return hits
}
