package handoff

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
)

// TestGrown hands on a Pod's items after a scale-up (Grown): each item
// whose key now hashes to an added slot goes to that slot's Pod, as the
// proxy will look for it, and leaves the source; every other item stays
// on the source and goes nowhere (those of the old slots are not this
// copy's: no client asks the source for them). An added slot that does
// not serve keeps its items on the source. An item the destination holds
// already is newer and stays, and the source's older copy goes; an item
// written on the source after the copy read it stays there. The source
// stays, and gets no done marker.
func TestGrown(t *testing.T) {
	tests := []struct {
		name string
		// added is the number of slots added to the three old ones.
		added int
		// down is an added slot that does not serve (a hole), or -1.
		down int
	}{
		{name: "3 → 4", added: 1, down: -1},
		{name: "3 → 6", added: 3, down: -1},
		{name: "3 → 6, an added slot not serving", added: 3, down: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var servers []*server
			var table []v1alpha1.Slot
			for i := range 3 + tt.added {
				s := startServer(t, nextIP(t), 64)
				servers = append(servers, s)
				e := serving(i, fmt.Sprintf("cache-%d", i), s.ip)
				if i == tt.down {
					e.State = v1alpha1.SlotNotReady
				}
				table = append(table, e)
			}
			src := servers[0]
			const count = 3000
			fill(t, src.addr, "item", count, func(i int) int { return 100 + i%1000 }, 0)

			// Two items of the first added slot: one the destination
			// holds already, newer; one written on the source after the
			// copy read it.
			var newer, changed string
			for i := range count {
				k := fmt.Sprintf("item-%d", i)
				if place(k, len(table)) != 3 {
					continue
				}
				if newer == "" {
					newer = k
				} else if changed == "" {
					changed = k
				}
			}
			newClient(t, servers[3].addr).set(newer, []byte("newer"), 0, 0)
			writer := newClient(t, src.addr)

			rec := newRecorder()
			r, _ := newHookedRunner(t, "agent-a", rec, Options{Batch: 50}, testHooks{beforeRemove: func(key string) {
				if key == changed {
					writer.set(changed, []byte("changed"), 0, 0)
				}
			}})
			h := v1alpha1.Handoff{Pod: "cache-0", IP: src.ip, Reason: v1alpha1.HandoffGrown, Slot: slot(3), To: "cache-3", ToIP: servers[3].ip}
			r.Update([]v1alpha1.Handoff{h}, table)
			p := rec.final(t, contract.ReportKey(h), 60*time.Second)

			clients := make([]*client, len(servers))
			for i, s := range servers {
				clients[i] = newClient(t, s.addr)
			}
			var wantItems, homeless, stayed int64
			for i := range count {
				k := fmt.Sprintf("item-%d", i)
				s := place(k, len(table))
				value := valueFor(k, 100+i%1000)
				// home is where the item must be after the copy.
				home := s
				switch {
				case s < 3:
					home, stayed = 0, stayed+1
				case s == tt.down:
					home, homeless = 0, homeless+1
				case k == newer:
					value = []byte("newer")
				case k == changed:
				default:
					wantItems++
				}
				for j, c := range clients {
					g, ok := c.get(k)
					switch {
					case k == changed && j == 0:
						if !ok || string(g.value) != "changed" {
							t.Errorf("%s, written on the source after the copy read it, is %q there, %v: want it kept", k, g.value, ok)
						}
					case j == home && (!ok || !bytes.Equal(g.value, value)):
						t.Fatalf("%s (slot %d) is not on slot %d as it should be: %v", k, s, j, ok)
					case j != home && ok && !(k == changed && j == 3):
						t.Fatalf("%s (slot %d) is on slot %d too", k, s, j)
					}
				}
			}
			if stayed == 0 || wantItems == 0 {
				t.Fatalf("the keys do not test both sides: %d stayed, %d added", stayed, wantItems)
			}
			// The changed item was copied (as read) too.
			wantItems++
			wantMsg := "1 items stayed on the source too: written there since the copy read them"
			if homeless > 0 {
				wantMsg = fmt.Sprintf("%d items had no Serving slot to go to; %s", homeless, wantMsg)
			}
			if p.State != "Done" || p.Items != wantItems || p.Skipped != 1 || p.Message != wantMsg {
				t.Errorf("final report %+v, want Done, %d items, 1 skipped, message %q", p, wantItems, wantMsg)
			}
			t.Logf("%d of %d items copied (%.1f %%) to %d added slots", p.Items, count, 100*float64(p.Items)/count, tt.added)
			if _, ok := clients[0].get(contract.DoneKey); ok {
				t.Error("the source, which stays, got the done marker")
			}
			if v, ok := clients[0].get(CopiedKey); !ok || !strings.HasPrefix(string(v.value), jobID(h)+"\n") {
				t.Errorf("copied marker %q, %v; want the copy's identity", v.value, ok)
			}
		})
	}
}

// TestGrowThenShrink is why a Grown copy removes what it copied from its
// source: after a scale-up (Grown) clients write newer values to the
// added slot, and a scale-down then removes it again (Removed), copying
// its items back in add mode. A source that kept its copies holds the
// older values then, and add mode keeps them: every key written between
// the two reads stale. Removed from the source, the newer values come
// back.
func TestGrowThenShrink(t *testing.T) {
	tests := []struct {
		name string
		keep bool
		// wantStale: every key written since the scale-up reads old.
		wantStale bool
	}{
		{name: "removed from the source: the newer values come back", keep: false, wantStale: false},
		{name: "left on the source: the older values stay in front", keep: true, wantStale: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := startServer(t, nextIP(t), 64)
			b := startServer(t, nextIP(t), 64)
			const count = 2000
			fill(t, a.addr, "item", count, func(int) int { return 100 }, 0)

			rec := newRecorder()
			r, _ := newHookedRunner(t, "agent-a", rec, Options{}, testHooks{keepGrown: tt.keep})
			grow := v1alpha1.Handoff{Pod: "cache-a", IP: a.ip, Reason: v1alpha1.HandoffGrown, Slot: slot(1), To: "cache-b", ToIP: b.ip}
			grown := []v1alpha1.Slot{serving(0, "cache-a", a.ip), serving(1, "cache-b", b.ip)}
			r.Update([]v1alpha1.Handoff{grow}, grown)
			if p := rec.final(t, contract.ReportKey(grow), 60*time.Second); p.State != "Done" || p.Items == 0 {
				t.Fatalf("the Grown copy: %+v", p)
			}

			// Clients write the keys of the added slot there.
			toB := newClient(t, b.addr)
			var written []string
			for i := range count {
				if k := fmt.Sprintf("item-%d", i); place(k, 2) == 1 {
					toB.set(k, []byte("newer"), 0, 0)
					written = append(written, k)
				}
			}

			shrink := v1alpha1.Handoff{Pod: "cache-b", IP: b.ip, Reason: v1alpha1.HandoffRemoved}
			r.Update([]v1alpha1.Handoff{shrink}, grown[:1])
			if p := rec.final(t, contract.ReportKey(shrink), 60*time.Second); p.State != "Done" {
				t.Fatalf("the Removed copy: %+v", p)
			}
			fromA := newClient(t, a.addr)
			stale := 0
			for _, k := range written {
				if g, ok := fromA.get(k); !ok || string(g.value) != "newer" {
					stale++
				}
			}
			t.Logf("%d of %d keys written between the scale-up and the scale-down read an older value", stale, len(written))
			if got := stale > 0; got != tt.wantStale || (tt.wantStale && stale != len(written)) {
				t.Errorf("%d of %d keys read an older value after the scale-down; want stale: %v", stale, len(written), tt.wantStale)
			}
		})
	}
}
