package handoff

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/sync/slots"
	"github.com/example/memcached-operator/test/testutil"
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
	if opts.ReportLinger == 0 {
		opts.ReportLinger = 100 * time.Millisecond
	}
	m := &meter{}
	r := New(opts, rec, m, testLogger(t))
	t.Cleanup(r.Stop)
	return r, m
}

// newHookedRunner is newRunner with test hooks, which production's
// Options do not carry: set on the Runner before it is given work, so
// that none of its goroutines reads them meanwhile.
func newHookedRunner(t testing.TB, self string, rec *recorder, opts Options, hooks testHooks) (*Runner, *meter) {
	t.Helper()
	r, m := newRunner(t, self, rec, opts)
	r.hooks = hooks
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
		{name: "binary key of the reserved prefix", key: contract.ReservedKeyPrefix + "bin", binary: true, value: []byte("r")},
		{name: "near the largest size", key: "largest", value: valueFor("largest", largest), want: valueFor("largest", largest)},
		{name: "chunked", key: "chunked", value: valueFor("chunked", 600<<10), want: valueFor("chunked", 600<<10)},
		{name: "newer on the destination", key: "newer", value: []byte("old"), onDest: []byte("new"), want: []byte("new")},
		{name: "deleted after the dump", key: "deleted", value: []byte("gone"), deleteAfterDump: true},
		{name: "reserved key", key: contract.ReservedKeyPrefix + "other", value: []byte("r")},
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

	// The TTLs as they are just before the copy.
	ttlBefore := map[string]int64{}
	for _, tt := range tests {
		if tt.ttl != 0 {
			g, _ := from.get(wire(tt.key, tt.binary))
			ttlBefore[tt.name] = g.ttl
		}
	}

	rec := newRecorder()
	// An item is deleted once the dump has listed it, before it is read.
	var mu sync.Mutex
	listed := map[string]bool{}
	r, m := newHookedRunner(t, "agent-a", rec, Options{Batch: 64}, testHooks{beforeGet: func(batch []dumpKey) {
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
	// The copy's Event follows its last report.
	rec.wait(t, "the copy's Event", 10*time.Second, func(r *recorder) bool { return len(r.events) > 0 })
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
			// The remaining TTL is the source's: memcached counts it in
			// whole seconds, each process from its own start, so the
			// destination's is at most what the source's was just before
			// the copy, and at least what it is now less the second the
			// two clocks may tick apart. A Unix time (over 30 days) the
			// copy writes from its own clock, which runs up to a second
			// or two apart from either memcached's.
			lowest, highest := s.ttl-1, ttlBefore[tt.name]
			if tt.ttl > maxRelativeTTL {
				lowest, highest = s.ttl-2, highest+2
			}
			if s.ttl == -1 && g.ttl != -1 || s.ttl != -1 && (g.ttl < lowest || g.ttl > highest) {
				t.Errorf("remaining TTL %d on the destination, %d on the source (%d before the copy): want -1 for none, else %d to %d", g.ttl, s.ttl, ttlBefore[tt.name], lowest, highest)
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
	for _, k := range []string{LockKey, CopiedKey, contract.DoneKey} {
		if _, ok := to.get(k); ok {
			t.Errorf("the destination holds %s", k)
		}
	}
	// The done marker follows the Done report: the slot serves the new
	// Pod (this table), then clients move (ClientMove, 0 here).
	testutil.Eventually(t, 10*time.Second, func() error {
		if _, ok := from.get(contract.DoneKey); !ok {
			return errors.New("no done marker on the source")
		}
		return nil
	})
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

	// The same status again starts nothing: each copy runs once. Update
	// decides at once (it starts a copy, and never waits for one): the
	// runner still holds the job that ran, and no other.
	r.mu.Lock()
	ran := r.jobs["cache-old"]
	r.mu.Unlock()
	r.Update([]v1alpha1.Handoff{h}, []v1alpha1.Slot{serving(0, "cache-new", dst.ip)})
	r.mu.Lock()
	if again := r.jobs["cache-old"]; ran == nil || again != ran {
		t.Errorf("the same status started the copy again (job %p, then %p)", ran, again)
	}
	r.mu.Unlock()
	// Its entry gone, its report goes too.
	r.Update(nil, []v1alpha1.Slot{serving(0, "cache-new", dst.ip)})
	rec.wait(t, "the report forgotten", 5*time.Second, func(r *recorder) bool { return slices.Contains(r.forgot, "cache-old") })
}

// place is where slots.Place puts a key of the dump among n slots.
func place(key string, n int) int { return slots.Place([]byte(key), n) }

// TestPlaced hands a removed Pod's items (and a moved Pod's) each to the
// slot slots.Place gives its key over the slot table, as the proxy will
// look for it: none lands elsewhere, and the items of a slot that is not
// Serving (a hole) or that is the source's own stay behind.
func TestPlaced(t *testing.T) {
	tests := []struct {
		name   string
		reason v1alpha1.HandoffReason
		// source is the slot the source holds now (Moved), or -1.
		source int
		// wantDone: a leaving source gets the done marker.
		wantDone bool
	}{
		{name: "removed", reason: v1alpha1.HandoffRemoved, source: -1, wantDone: true},
		{name: "moved", reason: v1alpha1.HandoffMoved, source: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := startServer(t, nextIP(t), 64)
			b := startServer(t, nextIP(t), 64)
			src := b
			if tt.source < 0 {
				src = startServer(t, nextIP(t), 64)
			}
			// Slot 2 is a hole: its Pod runs, but is not Ready.
			c := startServer(t, nextIP(t), 64)
			table := []v1alpha1.Slot{serving(0, "cache-a", a.ip), serving(1, "cache-b", b.ip), {Slot: 2, Pod: "cache-c", IP: c.ip, State: v1alpha1.SlotNotReady}}
			const count = 3000
			fill(t, src.addr, "item", count, func(i int) int { return 100 + i%1000 }, 0)

			rec := newRecorder()
			r, _ := newRunner(t, "agent-a", rec, Options{Batch: 50})
			h := v1alpha1.Handoff{Pod: "cache-src", IP: src.ip, Reason: tt.reason}
			if tt.source >= 0 {
				h.Pod, h.Slot, h.To, h.ToIP = "cache-b", slot(int32(tt.source)), "cache-b", b.ip
			}
			r.Update([]v1alpha1.Handoff{h}, table)
			p := rec.final(t, contract.ReportKey(h), 60*time.Second)
			// The copy's Event follows its last report.
			rec.wait(t, "the copy's Event", 10*time.Second, func(r *recorder) bool { return len(r.events) > 0 })

			clients := []*client{newClient(t, a.addr), newClient(t, b.addr), newClient(t, c.addr)}
			var wantItems, homeless int64
			for i := range count {
				k := fmt.Sprintf("item-%d", i)
				s := place(k, len(table))
				if s == 2 || s == tt.source {
					homeless++
				} else {
					wantItems++
				}
				for j, c := range clients {
					if j == tt.source {
						continue
					}
					g, ok := c.get(k)
					switch {
					case j == s && j != 2 && (!ok || !bytes.Equal(g.value, valueFor(k, 100+i%1000))):
						t.Fatalf("%s (slot %d) is not on slot %d: %v", k, s, j, ok)
					case (j != s || j == 2) && ok:
						t.Fatalf("%s (slot %d) is on slot %d", k, s, j)
					}
				}
			}
			if homeless == 0 || wantItems == 0 {
				t.Fatalf("the keys do not test both sides: %d homeless, %d placed", homeless, wantItems)
			}
			wantMsg := fmt.Sprintf("%d items had no Serving slot to go to", homeless)
			if p.State != "Done" || p.Items != wantItems || p.Skipped != 0 || p.Message != wantMsg {
				t.Errorf("final report %+v, want Done, %d items, message %q", p, wantItems, wantMsg)
			}
			from := newClient(t, src.addr)
			if tt.wantDone {
				// It follows the Done report, once clients are given the
				// keys' new places (this table) and had ClientMove.
				testutil.Eventually(t, 10*time.Second, func() error {
					if _, ok := from.get(contract.DoneKey); !ok {
						return errors.New("no done marker on the source")
					}
					return nil
				})
			} else if _, ok := from.get(contract.DoneKey); ok {
				t.Errorf("done marker on a source that stays")
			}
			// The copied marker: the copy's identity, then its report.
			if v, ok := from.get(CopiedKey); !ok || string(v.value) != jobID(h)+"\n"+mustJSON(t, p) {
				t.Errorf("copied marker %q, %v; want %q and the final report %+v", v.value, ok, jobID(h), p)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			want := regexp.MustCompile(`^Normal HandedOff: handed on \d+ items \([0-9.]+ MiB\) from ` + h.Pod + ` to (cache-a, cache-b|cache-a) in [0-9.]+ s, 0 already there; ` + wantMsg + `$`)
			if len(rec.events) != 1 || !want.MatchString(rec.events[0]) {
				t.Errorf("events %q, want one matching %s", rec.events, want)
			}
		})
	}
}

// TestCancelled cuts copies short: the entry leaves the status, or the
// source dies. The destination holds whole items only, each the source's,
// and the runner goes on to copy what it is asked next.
func TestCancelled(t *testing.T) {
	tests := []struct {
		name string
		cut  func(r *Runner, src *server, table []v1alpha1.Slot)
		// wantState is the last report; "" when the report is forgotten.
		wantState v1alpha1.HandoffState
	}{
		{name: "entry gone", cut: func(r *Runner, _ *server, table []v1alpha1.Slot) { r.Update(nil, table) }},
		{name: "source killed", cut: func(_ *Runner, src *server, _ []v1alpha1.Slot) { src.kill() }, wantState: "Failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := startServer(t, nextIP(t), 512)
			dst := startServer(t, nextIP(t), 512)
			size := func(i int) int { return 50<<10 + i%(100<<10) }
			const count = 3000
			fill(t, src.addr, "big", count, size, 0)
			to := newClient(t, dst.addr)
			// The destination's connections but the test's own.
			idle := to.stat("curr_connections")
			rec := newRecorder()
			r, m := newRunner(t, "agent-a", rec, Options{Batch: 20, Retries: 1})
			table := []v1alpha1.Slot{serving(0, "cache-new", dst.ip)}
			h := v1alpha1.Handoff{Pod: "cache-old", IP: src.ip, Reason: v1alpha1.HandoffReplaced, Slot: slot(0), To: "cache-new", ToIP: dst.ip}
			r.Update([]v1alpha1.Handoff{h}, table)
			testutil.EventuallyEvery(t, 30*time.Second, time.Millisecond, func() error { return copyStarted(to) })
			tt.cut(r, src, table)
			if tt.wantState == "" {
				rec.wait(t, "the report forgotten", 30*time.Second, func(r *recorder) bool { return slices.Contains(r.forgot, "cache-old") })
			} else if p := rec.final(t, "cache-old", 30*time.Second); p.State != tt.wantState || p.Message == "" {
				t.Errorf("final report %+v, want %s with a message", p, tt.wantState)
			}
			// The copy's connections closed, memcached still takes what
			// they sent before: once it has closed them too, it has.
			testutil.EventuallyEvery(t, 30*time.Second, 10*time.Millisecond, func() error {
				if n := to.stat("curr_connections"); n > idle {
					return fmt.Errorf("the destination still has %d connections but the test's %d after the copy ended", n, idle)
				}
				return nil
			})
			n := to.stat("curr_items")
			if n == 0 || n >= count {
				t.Errorf("the destination holds %d items: the copy was not cut midway", n)
			}
			keys := to.keys()
			if int64(len(keys)) != n {
				t.Errorf("%d keys listed, %d items", len(keys), n)
			}
			for _, k := range keys {
				var i int
				if _, err := fmt.Sscanf(k, "big-%d", &i); err != nil {
					t.Fatalf("the destination holds %q", k)
				}
				if g, ok := to.get(k); !ok || !bytes.Equal(g.value, valueFor(k, size(i))) || g.flags != uint32(i) {
					t.Fatalf("%s on the destination is not the source's (%d bytes, flags %d)", k, len(g.value), g.flags)
				}
			}
			m.mu.Lock()
			results := slices.Clone(m.results)
			m.mu.Unlock()
			if want := map[v1alpha1.HandoffState]string{"": ResultCancelled, "Failed": ResultFailed}[tt.wantState]; !slices.Equal(results, []string{want}) {
				t.Errorf("results %q, want %q", results, want)
			}
			if tt.wantState == "" {
				if _, ok := newClient(t, src.addr).get(LockKey); ok {
					t.Errorf("a cancelled copy kept its lock")
				}
			}

			// The runner goes on: another source, another copy.
			next := startServer(t, nextIP(t), 64)
			fill(t, next.addr, "next", 10, func(int) int { return 10 }, 0)
			r.Update([]v1alpha1.Handoff{{Pod: "cache-next", IP: next.ip, Reason: v1alpha1.HandoffReplaced, Slot: slot(0), To: "cache-new", ToIP: dst.ip}}, table)
			if p := rec.final(t, "cache-next", 30*time.Second); p.State != "Done" || p.Items != 10 {
				t.Errorf("the next copy: %+v", p)
			}
		})
	}
}

// TestLastReportRetried sends a copy's last report again until it goes
// through: a Moved hand-off leaves the status only once the hook reads
// it, so a report lost to an API server that was away would keep it there.
func TestLastReportRetried(t *testing.T) {
	src := startServer(t, nextIP(t), 64)
	dst := startServer(t, nextIP(t), 64)
	fill(t, src.addr, "item", 100, func(int) int { return 100 }, 0)
	rec := newRecorder()
	rec.failLast = 2
	r, _ := newRunner(t, "agent-a", rec, Options{})
	r.Update([]v1alpha1.Handoff{{Pod: "cache-b", IP: src.ip, Reason: v1alpha1.HandoffReplaced, Slot: slot(0), To: "cache-c", ToIP: dst.ip}},
		[]v1alpha1.Slot{serving(0, "cache-c", dst.ip)})
	if p := rec.final(t, "cache-b", 30*time.Second); p.State != "Done" || p.Items != 100 {
		t.Errorf("final report %+v, want Done with 100 items", p)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.failLast != 0 {
		t.Errorf("%d failures left: the last report was not sent again", rec.failLast)
	}
}

// TestTwoRunners follows one status with two agents: one copies, the
// other waits and finds the copy done; every item is written once.
func TestTwoRunners(t *testing.T) {
	src := startServer(t, nextIP(t), 64)
	dst := startServer(t, nextIP(t), 64)
	fill(t, src.addr, "item", 2000, func(i int) int { return 1000 }, 0)
	recA, recB := newRecorder(), newRecorder()
	a, _ := newRunner(t, "agent-a", recA, Options{})
	b, _ := newRunner(t, "agent-b", recB, Options{})
	table := []v1alpha1.Slot{serving(0, "cache-new", dst.ip)}
	hs := []v1alpha1.Handoff{{Pod: "cache-old", IP: src.ip, Reason: v1alpha1.HandoffReplaced, Slot: slot(0), To: "cache-new", ToIP: dst.ip}}
	a.Update(hs, table)
	b.Update(hs, table)
	// Each ends on the copier's report: the copier once it is done, the
	// other once it finds the copy done (it looks every fifth of the
	// lock's TTL), sending that report again (the copier might have died
	// before it sent it). The copier's Event follows its report; the
	// other sends none.
	var reports []v1alpha1.HandoffProgress
	for _, rec := range []*recorder{recA, recB} {
		reports = append(reports, rec.final(t, "cache-old", 30*time.Second))
	}
	events := func() []string {
		var events []string
		for _, rec := range []*recorder{recA, recB} {
			rec.mu.Lock()
			events = append(events, rec.events...)
			rec.mu.Unlock()
		}
		return events
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if len(events()) == 0 {
			return fmt.Errorf("no Event after the copy ended: reports %+v", reports)
		}
		return nil
	})

	for _, p := range reports {
		if p != reports[0] || p.State != "Done" || p.Items != 2000 || p.Skipped != 0 {
			t.Errorf("reports %+v, want the copier's in each: Done, 2000 items, none already there", reports)
		}
	}
	if events := events(); len(events) != 1 {
		t.Errorf("events %q, want one: the copier's", events)
	}
}

// copyStarted is nil once the copy has brought 100 items to c's memcached.
func copyStarted(c *client) error {
	if n := c.stat("curr_items"); n < 100 {
		return fmt.Errorf("the copy did not start: %d items copied", n)
	}
	return nil
}

// TestRefusals copies from and to memcacheds that say no: one that may not
// dump its keys (-X) or has no LRU crawler fails the copy with its own
// words; one whose crawler is busy is asked again until it is free; a
// destination whose items are smaller (-I) refuses the larger ones, and
// the copy goes on and says so.
func TestRefusals(t *testing.T) {
	tests := []struct {
		name     string
		srcArgs  []string
		dstArgs  []string
		busy     bool
		wantDone bool
		wantMsg  string
	}{
		{name: "key dump not allowed", srcArgs: []string{"-X"}, wantMsg: "refused to list its keys: ERROR key dump not allowed"},
		{name: "no LRU crawler", srcArgs: []string{"-o", "no_lru_crawler"}, wantMsg: "refused to list its keys: CLIENT_ERROR lru crawler disabled"},
		// A hash table as large as 200,000 items need from the start:
		// one that grows ends the dump that holds the crawler ("ERROR
		// locked try again later"), and frees it.
		{name: "crawler busy", srcArgs: []string{"-o", "hashpower=18"}, busy: true, wantDone: true},
		{name: "items too large for the destination", dstArgs: []string{"-I", "512k"}, wantDone: true,
			wantMsg: "1 items refused by the destination (SERVER_ERROR object too large for cache)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := startServer(t, nextIP(t), 64, tt.srcArgs...)
			dst := startServer(t, nextIP(t), 64, tt.dstArgs...)
			count, prefix := 1000, "item"
			if tt.busy {
				// Another dump that nobody reads holds the crawler, as a
				// stalled agent's would: enough keys (11 MB of dump lines)
				// to outgrow memcached's send buffer and a reader's
				// receive buffer of 4 KiB.
				count, prefix = 200000, "a-key-long-enough-to-fill-the-buffers-of-the-dump"
			}
			fill(t, src.addr, prefix, count, func(int) int { return 10 }, 0)
			newClient(t, src.addr).set("large", valueFor("large", 600<<10), 0, 0)
			var opts Options
			// busy is closed once the copy has been told the crawler is
			// busy; release frees the crawler.
			busy, release := make(chan struct{}), func() {}
			if tt.busy {
				d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
					var serr error
					err := rc.Control(func(fd uintptr) {
						serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
					})
					return errors.Join(err, serr)
				}}
				c, err := d.Dial("tcp", src.addr)
				if err != nil {
					t.Fatal(err)
				}
				release = func() { c.Close() }
				t.Cleanup(release)
				if _, err := io.WriteString(c, "lru_crawler mgdump hash\r\n"); err != nil {
					t.Fatal(err)
				}
				// The dump has begun (OK, then keys), and holds the crawler
				// before the copy asks for it.
				c.SetReadDeadline(time.Now().Add(30 * time.Second))
				br := bufio.NewReaderSize(c, 16)
				for _, want := range []string{"OK\r\n", "mg "} {
					if l, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(l, want) {
						t.Fatalf("the dump that holds the crawler said %q, %v; want %q", l, err, want)
					}
				}
				var once sync.Once
				opts.Dial = tapDialer(src.addr, func(c *tapConn) {
					c.read = func(p []byte) {
						if bytes.HasPrefix(p, []byte("BUSY ")) {
							once.Do(func() { close(busy) })
						}
					}
				})
			}
			rec := newRecorder()
			r, _ := newRunner(t, "agent-a", rec, opts)
			r.Update([]v1alpha1.Handoff{{Pod: "cache-old", IP: src.ip, Reason: v1alpha1.HandoffReplaced, Slot: slot(0), To: "cache-new", ToIP: dst.ip}},
				[]v1alpha1.Slot{serving(0, "cache-new", dst.ip)})
			if tt.busy {
				// Told it is busy, the copy waits and asks again: it has
				// not ended when the crawler is freed.
				await(t, busy, 30*time.Second, "the copy to be told the crawler is busy")
				rec.mu.Lock()
				p, ok := rec.last["cache-old"]
				rec.mu.Unlock()
				if ok && p.State != v1alpha1.HandoffCopying {
					t.Errorf("the copy ended while the crawler was busy: %+v", p)
				}
				release()
			}
			p := rec.final(t, "cache-old", 60*time.Second)
			if got := p.State == "Done"; got != tt.wantDone || !strings.Contains(p.Message, tt.wantMsg) {
				t.Errorf("final report %+v; want done %v, a message with %q", p, tt.wantDone, tt.wantMsg)
			}
			if tt.wantDone && p.Items < int64(count) {
				t.Errorf("%d items handed on, want at least %d", p.Items, count)
			}
		})
	}
}

// TestNoSlot sets the done marker on a leaving Pod that held no slot, and
// copies nothing.
func TestNoSlot(t *testing.T) {
	src := startServer(t, nextIP(t), 64)
	dst := startServer(t, nextIP(t), 64)
	fill(t, src.addr, "item", 10, func(int) int { return 10 }, 0)
	rec := newRecorder()
	r, m := newRunner(t, "agent-a", rec, Options{})
	r.Update([]v1alpha1.Handoff{{Pod: "cache-extra", IP: src.ip, Reason: v1alpha1.HandoffNoSlot}}, []v1alpha1.Slot{serving(0, "cache-b", dst.ip)})
	if p := rec.final(t, "cache-extra", 10*time.Second); p.State != "Done" || p.Items != 0 {
		t.Errorf("final report %+v, want Done with nothing", p)
	}
	if _, ok := newClient(t, src.addr).get(contract.DoneKey); !ok {
		t.Error("no done marker on the source")
	}
	if n := newClient(t, dst.addr).stat("curr_items"); n != 0 {
		t.Errorf("%d items copied for NoSlot", n)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.events) != 0 || len(m.results) != 0 {
		t.Errorf("events %q, results %q for nothing copied", rec.events, m.results)
	}
}

// TestEntryChanged changes a hand-off while its copy runs: the copy is
// cancelled, and the new one starts once it has ended (one copy of a
// source at a time in a process), then runs to its end.
func TestEntryChanged(t *testing.T) {
	src := startServer(t, nextIP(t), 512)
	first := startServer(t, nextIP(t), 512)
	second := startServer(t, nextIP(t), 512)
	const count = 3000
	fill(t, src.addr, "big", count, func(int) int { return 100 << 10 }, 0)
	rec := newRecorder()
	r, m := newRunner(t, "agent-a", rec, Options{Batch: 20})
	h := v1alpha1.Handoff{Pod: "cache-old", IP: src.ip, Reason: v1alpha1.HandoffReplaced, Slot: slot(0), To: "cache-1", ToIP: first.ip}
	r.Update([]v1alpha1.Handoff{h}, []v1alpha1.Slot{serving(0, "cache-1", first.ip)})
	to := newClient(t, first.addr)
	testutil.EventuallyEvery(t, 30*time.Second, time.Millisecond, func() error { return copyStarted(to) })
	h.To, h.ToIP = "cache-2", second.ip
	r.Update([]v1alpha1.Handoff{h}, []v1alpha1.Slot{serving(0, "cache-2", second.ip)})
	p := rec.final(t, "cache-old", 60*time.Second)
	// The first copy routes each item to the slot's holder as the table
	// stands when it writes it (Update stores the table, then cancels the
	// copy): the few it writes after the new table landed are on the
	// second destination already.
	if p.State != "Done" || p.Items+p.Skipped != count {
		t.Errorf("final report %+v, want Done, %d items handed on or already there", p, count)
	}
	if n := to.stat("curr_items"); n >= count {
		t.Errorf("the first copy was not cancelled: %d items", n)
	}
	if n := newClient(t, second.addr).stat("curr_items"); n != count {
		t.Errorf("the second destination holds %d items, want %d", n, count)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if want := []string{ResultCancelled, ResultDone}; !slices.Equal(m.results, want) {
		t.Errorf("results %q, want %q", m.results, want)
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReplacedGoesToTheSlotsHolder changes the slot table, not the entry,
// while a copy waits out its settle: the copy goes to the Pod that holds
// the slot when it starts, and to no Pod the table does not name Serving.
func TestReplacedGoesToTheSlotsHolder(t *testing.T) {
	tests := []struct {
		name string
		// then is the slot table that lands during the settle; other is
		// the address of a Pod that is not the entry's destination.
		then func(dst, other string) []v1alpha1.Slot
		// wantDst and wantOther are the items each ends up with.
		wantDst, wantOther int
	}{{
		name:    "the table still names the entry's Pod",
		then:    func(dst, _ string) []v1alpha1.Slot { return []v1alpha1.Slot{serving(0, "cache-new", dst)} },
		wantDst: 50,
	}, {
		name:      "a newer table names another Pod",
		then:      func(_, other string) []v1alpha1.Slot { return []v1alpha1.Slot{serving(0, "cache-other", other)} },
		wantOther: 50,
	}, {
		name: "the slot's Pod is not Serving",
		then: func(dst, _ string) []v1alpha1.Slot {
			return []v1alpha1.Slot{{Slot: 0, Pod: "cache-new", IP: dst, State: v1alpha1.SlotNotReady}}
		},
	}, {
		name: "the table has no such slot",
		then: func(string, string) []v1alpha1.Slot { return nil },
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := startServer(t, nextIP(t), 64)
			dst := startServer(t, nextIP(t), 64)
			other := startServer(t, nextIP(t), 64)
			fill(t, src.addr, "k", 50, func(int) int { return 10 }, 0)
			rec := newRecorder()
			// The copy, its settle over, reaches the source only once the
			// newer table has landed: not only when the two Updates come
			// within the settle of each other.
			landed := make(chan struct{})
			dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
				if addr == src.addr {
					select {
					case <-landed:
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				}
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			}
			r, _ := newRunner(t, "agent-a", rec, Options{ClientMove: 300 * time.Millisecond, Dial: dial})
			h := v1alpha1.Handoff{Pod: "cache-old", IP: src.ip, Reason: v1alpha1.HandoffReplaced, Slot: slot(0), To: "cache-new", ToIP: dst.ip}
			r.Update([]v1alpha1.Handoff{h}, []v1alpha1.Slot{serving(0, "cache-new", dst.ip)})
			r.Update([]v1alpha1.Handoff{h}, tt.then(dst.ip, other.ip))
			close(landed)
			if p := rec.final(t, "cache-old", 30*time.Second); p.State != "Done" || p.Items != int64(tt.wantDst+tt.wantOther) {
				t.Errorf("final report %+v, want Done with %d items", p, tt.wantDst+tt.wantOther)
			}
			if got := newClient(t, dst.addr).stat("curr_items"); got != int64(tt.wantDst) {
				t.Errorf("the entry's Pod holds %d items, want %d", got, tt.wantDst)
			}
			if got := newClient(t, other.addr).stat("curr_items"); got != int64(tt.wantOther) {
				t.Errorf("the other Pod holds %d items, want %d", got, tt.wantOther)
			}
		})
	}
}
