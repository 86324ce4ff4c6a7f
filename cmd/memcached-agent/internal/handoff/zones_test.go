package handoff

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/sync/slots"
)

// TestZonesRouteByTheirZonesTable removes a slot in zone b while zone a's
// table is longer: the leaving Pod's items go where their keys hash in
// zone b's table, to zone b's Pods, and none to zone a's (spec.zones: a
// hand-off stays within its zone).
func TestZonesRouteByTheirZonesTable(t *testing.T) {
	src := startServer(t, nextIP(t), 64)
	b0 := startServer(t, nextIP(t), 64)
	b1 := startServer(t, nextIP(t), 64)
	a := []*server{startServer(t, nextIP(t), 64), startServer(t, nextIP(t), 64), startServer(t, nextIP(t), 64)}
	const count = 300
	keys := make([]string, count)
	c := newClient(t, src.addr)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%d", i)
		c.set(keys[i], []byte("v"), 0, 0)
	}
	tables := map[string][]v1alpha1.Slot{
		"a": {serving(0, "a-0", a[0].ip), serving(1, "a-1", a[1].ip), serving(2, "a-2", a[2].ip)},
		"b": {serving(0, "b-0", b0.ip), serving(1, "b-1", b1.ip)},
	}
	rec := newRecorder()
	r, _ := newRunner(t, "agent-a", rec, Options{})
	r.UpdateZones([]v1alpha1.Handoff{{Pod: "b-2", IP: src.ip, Reason: v1alpha1.HandoffRemoved, Zone: "b"}}, tables)
	if p := rec.final(t, "b-2", 30*time.Second); p.State != "Done" || p.Items != count {
		t.Fatalf("final report %+v, want Done with %d items", p, count)
	}
	dst := []*server{b0, b1}
	for _, k := range keys {
		want := slots.Place([]byte(k), 2)
		for i, s := range dst {
			if _, ok := newClient(t, s.addr).get(k); ok != (i == want) {
				t.Errorf("key %s on zone b's slot %d: %v, want it on slot %d only", k, i, ok, want)
			}
		}
	}
	for i, s := range a {
		if n := newClient(t, s.addr).stat("curr_items"); n != 0 {
			t.Errorf("zone a's slot %d got %d items of zone b's hand-off", i, n)
		}
	}
}

// TestRefill fills a Pod that took slot 1 of zone a cold from the Pod
// that holds slot 1 in zone b: the items whose keys hash to slot 1 go to
// it, a newer value it holds already stays, the source keeps every item
// and gets no done marker (it stays), and the items of other slots the
// source kept from earlier changes stay where they are. The slot is
// Filling (down in zone a) meanwhile: the copy starts at once, well
// within ClientMove, and reports Copied; once the slot is listed, Done.
func TestRefill(t *testing.T) {
	src := startServer(t, nextIP(t), 64)
	dst := startServer(t, nextIP(t), 64)
	const count, n = 600, 3
	c := newClient(t, src.addr)
	var mine []string
	for i := range count {
		k := fmt.Sprintf("key-%d", i)
		c.set(k, []byte("old"), 7, 0)
		if slots.Place([]byte(k), n) == 1 {
			mine = append(mine, k)
		}
	}
	// Written to the filled Pod since it took the slot: newer.
	newClient(t, dst.addr).set(mine[0], []byte("new"), 0, 0)

	zoneA := func(e v1alpha1.Slot) []v1alpha1.Slot {
		return []v1alpha1.Slot{serving(0, "a-0", "192.0.2.10"), e, serving(2, "a-2", "192.0.2.12")}
	}
	zoneB := []v1alpha1.Slot{serving(0, "b-0", "192.0.2.20"), serving(1, "b-1", src.ip), serving(2, "b-2", "192.0.2.22")}
	rec := newRecorder()
	// Long enough that a copy which waited it first would not have
	// started by then.
	const settle = 3 * time.Second
	var once sync.Once
	var firstGet time.Time
	r, _ := newHookedRunner(t, "agent-a", rec, Options{ClientMove: settle}, testHooks{beforeGet: func([]dumpKey) { once.Do(func() { firstGet = time.Now() }) }})
	h := v1alpha1.Handoff{Pod: "b-1", IP: src.ip, Reason: v1alpha1.HandoffRefill, Zone: "a", Slot: slot(1), To: "a-1", ToIP: dst.ip}
	key := contract.ReportKey(h)
	start := time.Now()
	filling := v1alpha1.Slot{Slot: 1, Pod: "a-1", IP: dst.ip, State: v1alpha1.SlotFilling}
	r.UpdateZones([]v1alpha1.Handoff{h}, map[string][]v1alpha1.Slot{"a": zoneA(filling), "b": zoneB})
	rec.wait(t, "the Refill's copy to copy", 30*time.Second, func(r *recorder) bool { return r.last[key].State == v1alpha1.HandoffCopied })
	if d := firstGet.Sub(start); d >= settle {
		t.Errorf("the copy read its first item %s after the entry came, want it at once, well within ClientMove (%s): nobody reads the slot from the filled Pod", d, settle)
	}
	r.UpdateZones([]v1alpha1.Handoff{h}, map[string][]v1alpha1.Slot{"a": zoneA(serving(1, "a-1", dst.ip)), "b": zoneB})
	p := rec.final(t, key, 30*time.Second)
	if want := int64(len(mine) - 1); p.State != v1alpha1.HandoffDone || p.Items != want || p.Skipped != 1 {
		t.Errorf("final report %+v, want Done, %d items, 1 skipped", p, want)
	}
	to := newClient(t, dst.addr)
	for i, k := range mine {
		g, ok := to.get(k)
		want := "old"
		if i == 0 {
			want = "new"
		}
		if !ok || string(g.value) != want {
			t.Errorf("filled Pod's %s = %q (%v), want %q", k, g.value, ok, want)
		}
	}
	if got := to.stat("curr_items"); got != int64(len(mine)) {
		t.Errorf("filled Pod holds %d items, want slot 1's %d alone", got, len(mine))
	}
	for i := range count {
		if _, ok := c.get(fmt.Sprintf("key-%d", i)); !ok {
			t.Errorf("the source lost key-%d: it stays, and keeps its items", i)
		}
	}
	if _, ok := c.get(contract.DoneKey); ok {
		t.Error("the source got the done marker: it does not leave")
	}
}

// TestRefillFlush fills a Pod back in its own slot after a partition:
// what it kept from before (a value the other zones overwrote since, a key
// they deleted) is gone, and it holds the source's items of the slot. It
// is emptied before the copy, which ends once the slot is listed.
func TestRefillFlush(t *testing.T) {
	src := startServer(t, nextIP(t), 64)
	dst := startServer(t, nextIP(t), 64)
	const n = 2
	var keys []string
	for i := 0; len(keys) < 3; i++ {
		if k := fmt.Sprintf("key-%d", i); slots.Place([]byte(k), n) == 0 {
			keys = append(keys, k)
		}
	}
	from, to := newClient(t, src.addr), newClient(t, dst.addr)
	// While the filled Pod was away, keys[0] was overwritten and keys[1]
	// deleted in the other zones; keys[2] never changed.
	to.set(keys[0], []byte("stale"), 0, 0)
	to.set(keys[1], []byte("deleted meanwhile"), 0, 0)
	to.set(keys[2], []byte("same"), 0, 0)
	from.set(keys[0], []byte("fresh"), 0, 0)
	from.set(keys[2], []byte("same"), 0, 0)

	table := func(e v1alpha1.Slot) []v1alpha1.Slot {
		return []v1alpha1.Slot{e, serving(1, "y", "192.0.2.1")}
	}
	rec := newRecorder()
	r, _ := newRunner(t, "agent-a", rec, Options{ClientMove: 200 * time.Millisecond})
	h := v1alpha1.Handoff{Pod: "b-0", IP: src.ip, Reason: v1alpha1.HandoffRefill, Zone: "a", Slot: slot(0), To: "x", ToIP: dst.ip, Flush: true}
	key := contract.ReportKey(h)
	zoneB := table(serving(0, "b-0", src.ip))
	r.UpdateZones([]v1alpha1.Handoff{h}, map[string][]v1alpha1.Slot{"a": table(v1alpha1.Slot{Slot: 0, Pod: "x", IP: dst.ip, State: v1alpha1.SlotFilling}), "b": zoneB})
	rec.wait(t, "the Refill's copy to copy", 30*time.Second, func(r *recorder) bool { return r.last[key].State == v1alpha1.HandoffCopied })
	if _, ok := to.get(keys[1]); ok {
		t.Errorf("the filled Pod still holds %s once the copy copied: it was not emptied first", keys[1])
	}
	r.UpdateZones([]v1alpha1.Handoff{h}, map[string][]v1alpha1.Slot{"a": table(serving(0, "x", dst.ip)), "b": zoneB})
	if p := rec.final(t, key, 30*time.Second); p.State != v1alpha1.HandoffDone || p.Items != 2 || p.Skipped != 0 {
		t.Errorf("final report %+v, want Done, 2 items, none skipped", p)
	}
	for _, tt := range []struct {
		key, want string
		ok        bool
	}{{keys[0], "fresh", true}, {keys[1], "", false}, {keys[2], "same", true}} {
		g, ok := to.get(tt.key)
		if ok != tt.ok || string(g.value) != tt.want {
			t.Errorf("filled Pod's %s = %q (%v), want %q (%v)", tt.key, g.value, ok, tt.want, tt.ok)
		}
	}
}
