package handoff

import (
	"fmt"
	"testing"
	"time"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
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
