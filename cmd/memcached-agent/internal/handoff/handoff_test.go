package handoff

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/sync/slots"
)

// testLogger logs to the test's output with -v, else nowhere.
func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return slog.New(slog.DiscardHandler)
}

// newRunner runs a Runner named self for the test.
func newRunner(t testing.TB, self string, rec *recorder, opts Options) (*Runner, *meter) {
	t.Helper()
	opts.Self = self
	if opts.LockTTL == 0 {
		opts.LockTTL = 3 * time.Second
	}
	if opts.ReportEvery == 0 {
		opts.ReportEvery = 200 * time.Millisecond
	}
	m := &meter{}
	r := New(opts, rec, m, testLogger(t))
	t.Cleanup(r.Stop)
	return r, m
}

func slot(n int32) *int32 { return &n }

// serving is a slot table entry.
func serving(n int, pod, ip string) v1alpha1.Slot {
	return v1alpha1.Slot{Slot: int32(n), Pod: pod, IP: ip, State: v1alpha1.SlotServing}
}

// TestReplaced hands every item of a replaced Pod to its successor, with
// its value, flags and remaining TTL, through one Runner: an item the
// successor holds already (newer) stays, an item deleted on the source
// after the dump is not brought back, the operator's keys stay behind,
// and the source gets the done marker.
func TestReplaced(t *testing.T) {
	src := startServer(t, nextIP(t), 64)
	dst := startServer(t, nextIP(t), 64)
	from, to := newClient(t, src.addr), newClient(t, dst.addr)
	now := time.Now()
	// The largest item memcached takes with -I 1m, less its header.
	largest := 1<<20 - 512

	tests := []struct {
		name string
		key  string // raw: a binary key goes base64 with b
		// binary keys are sent base64 with the b flag.
		binary bool
		value  []byte
		flags  uint32
		ttl    int64
		// onDest is written to the destination before the copy.
		onDest []byte
		// deleteAfterDump deletes it from the source once listed.
		deleteAfterDump bool
		// want is the destination's value after the copy; nil: none.
		want []byte
	}{
		{name: "plain", key: "plain", value: []byte("hello"), want: []byte("hello")},
		{name: "empty value", key: "empty", value: []byte{}, want: []byte{}},
		{name: "value holding line ends", key: "crlf", value: []byte("a\r\nEN\r\nmn\r\n"), want: []byte("a\r\nEN\r\nmn\r\n")},
		{name: "largest flags", key: "flags", value: []byte("f"), flags: 1<<32 - 1, want: []byte("f")},
		{name: "a TTL", key: "ttl", value: []byte("t"), ttl: 100, want: []byte("t")},
		{name: "a TTL of 30 days exactly", key: "ttl-30d", value: []byte("t"), ttl: maxRelativeTTL, want: []byte("t")},
		{name: "a TTL over 30 days (a Unix time)", key: "ttl-40d", value: []byte("t"), ttl: now.Unix() + 40*24*3600, want: []byte("t")},
		{name: "binary key", key: "\x00\xffbin\r\n", binary: true, value: []byte("b"), want: []byte("b")},
		{name: "binary key of the reserved prefix", key: memcached.ReservedKeyPrefix + "bin", binary: true, value: []byte("r")},
		{name: "near the largest size", key: "largest", value: valueFor("largest", largest), want: valueFor("largest", largest)},
		{name: "chunked", key: "chunked", value: valueFor("chunked", 600<<10), want: valueFor("chunked", 600<<10)},
		{name: "newer on the destination", key: "newer", value: []byte("old"), onDest: []byte("new"), want: []byte("new")},
		{name: "deleted after the dump", key: "deleted", value: []byte("gone"), deleteAfterDump: true},
		{name: "reserved key", key: memcached.ReservedKeyPrefix + "other", value: []byte("r")},
	}
	// wire is the key as the text protocol takes it.
	wire := func(key string, binary bool) string {
		if binary {
			return base64.StdEncoding.EncodeToString([]byte(key)) + " b"
		}
		return key
	}
	deleted := map[string]bool{}
	var wantBytes int64
	for _, tt := range tests {
		k := wire(tt.key, tt.binary)
		from.set(k, tt.value, tt.flags, tt.ttl)
		if tt.onDest != nil {
			to.set(k, tt.onDest, 7, 0)
		}
		if tt.deleteAfterDump {
			deleted[strings.TrimSuffix(k, " b")] = true
		}
		if tt.want != nil && tt.onDest == nil {
			wantBytes += int64(len(tt.value))
		}
	}
	// Enough small items for many batches.
	const filler = 2500
	wantBytes += fill(t, src.addr, "filler", filler, func(i int) int { return 10 + i%500 }, 0)

	rec := newRecorder()
	// An item is deleted once the dump has listed it, before it is read.
	var mu sync.Mutex
	listed := map[string]bool{}
	r, m := newRunner(t, "agent-a", rec, Options{Batch: 64, beforeGet: func(batch []dumpKey) {
		mu.Lock()
		defer mu.Unlock()
		for _, k := range batch {
			if deleted[k.key] {
				listed[k.key] = true
				newClient(t, src.addr).delete(k.key)
			}
		}
	}})
	h := v1alpha1.Handoff{Pod: "cache-old", IP: src.ip, Reason: v1alpha1.HandoffReplaced, Slot: slot(0), To: "cache-new", ToIP: dst.ip}
	r.Update([]v1alpha1.Handoff{h}, []v1alpha1.Slot{serving(0, "cache-new", dst.ip)})
	p := rec.final(t, "cache-old", 60*time.Second)
	mu.Lock()
	if len(listed) != len(deleted) {
		t.Errorf("deleted %v after the dump listed them, want %v", listed, deleted)
	}
	mu.Unlock()

	wantItems := int64(filler)
	for _, tt := range tests {
		if tt.want != nil && tt.onDest == nil {
			wantItems++
		}
	}
	if p.State != "Done" || p.Items != wantItems || p.Bytes != wantBytes || p.Skipped != 1 || p.Message != "" {
		t.Errorf("final report %+v, want Done, %d items, %d bytes, 1 skipped, no message", p, wantItems, wantBytes)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := wire(tt.key, tt.binary)
			g, ok := to.get(k)
			switch {
			case tt.want == nil && ok:
				t.Fatalf("the destination holds %q = %q", k, g.value)
			case tt.want == nil:
				return
			case !ok:
				t.Fatalf("the destination does not hold %q", k)
			case !bytes.Equal(g.value, tt.want):
				t.Fatalf("the destination holds %q = %.40q (%d bytes), want %.40q (%d bytes)", k, g.value, len(g.value), tt.want, len(tt.want))
			}
			if tt.onDest != nil {
				if g.flags != 7 {
					t.Errorf("flags %d, want the destination's own, 7", g.flags)
				}
				return
			}
			s, ok := from.get(k)
			if !ok {
				t.Fatalf("the source lost %q", k)
			}
			if g.flags != tt.flags {
				t.Errorf("flags %d, want %d", g.flags, tt.flags)
			}
			if d := g.ttl - s.ttl; s.ttl == -1 && g.ttl != -1 || d < -1 || d > 1 {
				t.Errorf("remaining TTL %d on the destination, %d on the source", g.ttl, s.ttl)
			}
		})
	}
	for i := 0; i < filler; i += 97 {
		k := fmt.Sprintf("filler-%d", i)
		if g, ok := to.get(k); !ok || !bytes.Equal(g.value, valueFor(k, 10+i%500)) || g.flags != uint32(i) {
			t.Errorf("%s on the destination: %v, flags %d, value %.20q", k, ok, g.flags, g.value)
		}
	}
	if n := to.stat("curr_items"); n != wantItems+1 {
		t.Errorf("the destination holds %d items, want %d", n, wantItems+1)
	}
	for _, k := range []string{LockKey, CopiedKey, memcached.DoneKey} {
		if _, ok := to.get(k); ok {
			t.Errorf("the destination holds %s", k)
		}
	}
	if _, ok := from.get(memcached.DoneKey); !ok {
		t.Errorf("no done marker on the source")
	}
	if _, ok := from.get(LockKey); ok {
		t.Errorf("the lock is still held")
	}

	rec.mu.Lock()
	events, states := slices.Clone(rec.events), slices.Clone(rec.states["cache-old"])
	rec.mu.Unlock()
	if want := []string{"Copying", "Done"}; !slices.Equal(states, want) {
		t.Errorf("states reported %q, want %q", states, want)
	}
	event := regexp.MustCompile(`^Normal HandedOff: handed on (\d+) items \(([0-9.]+) MiB\) from cache-old to cache-new in [0-9.]+ s, 1 already there$`)
	if len(events) != 1 || !event.MatchString(events[0]) {
		t.Errorf("events %q, want one matching %s", events, event)
	} else if sub := event.FindStringSubmatch(events[0]); sub[1] != fmt.Sprint(wantItems) || sub[2] != fmt.Sprintf("%.1f", float64(wantBytes)/(1<<20)) {
		t.Errorf("event %q: want %d items, %.1f MiB", events[0], wantItems, float64(wantBytes)/(1<<20))
	}
	if m.items.Load() != wantItems || m.bytes.Load() != wantBytes {
		t.Errorf("observed %d items, %d bytes; want %d, %d", m.items.Load(), m.bytes.Load(), wantItems, wantBytes)
	}

	// The same status again starts nothing: each copy runs once.
	r.Update([]v1alpha1.Handoff{h}, []v1alpha1.Slot{serving(0, "cache-new", dst.ip)})
	time.Sleep(300 * time.Millisecond)
	rec.mu.Lock()
	if len(rec.events) != 1 {
		t.Errorf("the same status ran the copy again: %q", rec.events)
	}
	rec.mu.Unlock()
	// Its entry gone, its report goes too.
	r.Update(nil, []v1alpha1.Slot{serving(0, "cache-new", dst.ip)})
	rec.wait(t, "the report forgotten", 5*time.Second, func(r *recorder) bool { return slices.Contains(r.forgot, "cache-old") })
}

// place is where slots.Place puts a key of the dump among n slots.
func place(key string, n int) int { return slots.Place([]byte(key), n) }
