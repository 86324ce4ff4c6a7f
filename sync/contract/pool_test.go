package contract_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/test/testutil"
)

// table is testutil.SlotTable.
var table = testutil.SlotTable

// TestRenderPool checks the bytes of every kind of pool the writer renders
// for a Memcached without zones, the one zone "": no zone line, the file
// it was before zones.
func TestRenderPool(t *testing.T) {
	tests := []struct {
		name      string
		table     v1alpha1.SlotTable
		want      string
		wantSlots int
		wantDown  int
	}{
		{
			name:      "three Serving slots",
			table:     table(1767225600, "S:10.244.1.7", "S:10.244.2.3", "S:10.244.3.9"),
			want:      "version 1767225600\n# tables =1767225600\n10.244.1.7:11211\n10.244.2.3:11211\n10.244.3.9:11211\nend 3\n",
			wantSlots: 3,
		},
		{
			name:  "a slot of each other state keeps its place",
			table: table(7, "S:10.0.0.1", "N:10.0.0.2", "E", "S:10.0.0.5"),
			want: "version 7\n# tables =7\n10.0.0.1:11211\n127.0.0.1:1 _down_1\n127.0.0.1:1 _down_2\n" +
				"10.0.0.5:11211\nend 4\n",
			wantSlots: 4, wantDown: 2,
		},
		{
			// A leaving Pod serves until its hand-off ends, and a Pod
			// that took a leaving Pod's slot is served only once it
			// holds its items: until then the leaving Pod is.
			name:      "a Leaving slot serves its Pod, a Filling one the Pod it is filled from",
			table:     table(7, "S:10.0.0.1", "L:10.0.0.2", "F:10.0.0.4<10.0.0.3"),
			want:      "version 7\n# tables =7\n10.0.0.1:11211\n10.0.0.2:11211\n10.0.0.3:11211\nend 3\n",
			wantSlots: 3,
		},
		{
			name:      "IPv6 in brackets, in its canonical form",
			table:     table(8, "S:fd00::7", "S:FD00:0:0:0:0:0:0:8", "S:10.0.0.3"),
			want:      "version 8\n# tables =8\n[fd00::7]:11211\n[fd00::8]:11211\n10.0.0.3:11211\nend 3\n",
			wantSlots: 3,
		},
		{
			name:      "every slot down",
			table:     table(9, "N:10.0.0.1", "E", "E"),
			want:      "version 9\n# tables =9\n127.0.0.1:1 _down_0\n127.0.0.1:1 _down_1\n127.0.0.1:1 _down_2\nend 3\n",
			wantSlots: 3, wantDown: 3,
		},
		{
			name:      "no slot is one placeholder, never an empty pool",
			table:     table(10),
			want:      "version 10\n# tables =10\n127.0.0.1:1 _down_0\nend 1\n",
			wantSlots: 1, wantDown: 1,
		},
		{
			name:      "no status yet: version 0, no slot",
			table:     v1alpha1.SlotTable{},
			want:      "version 0\n# tables =0\n127.0.0.1:1 _down_0\nend 1\n",
			wantSlots: 1, wantDown: 1,
		},
		{
			name:      "a Serving slot without an ip is not served, as slots.Served has it",
			table:     table(11, "S:10.0.0.1", "S:"),
			want:      "version 11\n# tables =11\n10.0.0.1:11211\n127.0.0.1:1 _down_1\nend 2\n",
			wantSlots: 2, wantDown: 1,
		},
		{
			name:      "the same address Serving once and NotReady once",
			table:     table(12, "S:10.0.0.1", "N:10.0.0.1"),
			want:      "version 12\n# tables =12\n10.0.0.1:11211\n127.0.0.1:1 _down_1\nend 2\n",
			wantSlots: 2, wantDown: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := contract.RenderPool(plain(tt.table))
			if err != nil {
				t.Fatalf("RenderPool() = %v", err)
			}
			if got := string(p.Content); got != tt.want {
				t.Errorf("RenderPool() =\n%s\nwant\n%s", got, tt.want)
			}
			if p.Version != tt.table.Version || p.Slots != tt.wantSlots || p.Down != tt.wantDown {
				t.Errorf("RenderPool() says version %d, %d slots, %d down; want %d, %d, %d", p.Version, p.Slots, p.Down, tt.table.Version, tt.wantSlots, tt.wantDown)
			}
			if got, want := fmt.Sprint(p.Zones), fmt.Sprint([]contract.ZonePool{{Version: tt.table.Version, Slots: tt.wantSlots, Down: tt.wantDown}}); got != want {
				t.Errorf("RenderPool() says zones %s, want %s", got, want)
			}
		})
	}
}

// TestRenderPoolRefuses checks every table of a Memcached without zones
// RenderPool refuses, and the reason.
func TestRenderPoolRefuses(t *testing.T) {
	many := make([]string, 1001)
	for i := range many {
		many[i] = "E"
	}
	outOfOrder := table(5, "S:10.0.0.1", "S:10.0.0.2")
	outOfOrder.Slots[0].Slot, outOfOrder.Slots[1].Slot = 1, 0
	twice := table(5, "S:10.0.0.1", "S:10.0.0.2")
	twice.Slots[1].Slot = 0
	hole := table(5, "S:10.0.0.1", "S:10.0.0.2")
	hole.Slots[1].Slot = 2
	tests := []struct {
		name       string
		table      v1alpha1.SlotTable
		wantReason string
		wantMsg    string
	}{
		{name: "slots out of order", table: outOfOrder, wantReason: contract.BadSlots, wantMsg: "slots[0] is slot 1"},
		{name: "a slot listed twice", table: twice, wantReason: contract.BadSlots, wantMsg: "slots[1] is slot 0"},
		{name: "a slot number skipped", table: hole, wantReason: contract.BadSlots, wantMsg: "slots[1] is slot 2"},
		{name: "more slots than the proxy takes", table: table(5, many...), wantReason: contract.TooManySlots, wantMsg: "1001 slots"},
		{name: "a name, not an address", table: table(5, "S:cache-0.example"), wantReason: contract.BadAddress, wantMsg: `"cache-0.example"`},
		{name: "an IPv4 address with leading zeros", table: table(5, "S:10.0.0.011"), wantReason: contract.BadAddress, wantMsg: "10.0.0.011"},
		{name: "an address and port", table: table(5, "S:10.0.0.1:11211"), wantReason: contract.BadAddress, wantMsg: "10.0.0.1:11211"},
		{name: "an IPv6 zone", table: table(5, "S:fe80::1%eth0"), wantReason: contract.BadAddress, wantMsg: "fe80::1%eth0"},
		{name: "two Serving slots at one address", table: table(5, "S:10.0.0.1", "E", "S:10.0.0.1"), wantReason: contract.BadAddress, wantMsg: "slots 0 and 2"},
		{name: "one IPv6 address written two ways", table: table(5, "S:fd00::7", "S:fd00:0::7"), wantReason: contract.BadAddress, wantMsg: "slots 0 and 1"},
		{name: "a negative version", table: table(-1, "S:10.0.0.1"), wantReason: contract.BadVersion, wantMsg: "-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := contract.RenderPool(plain(tt.table))
			var e *contract.PoolError
			if !errors.As(err, &e) {
				t.Fatalf("RenderPool() = %v, %v; want a *PoolError", p, err)
			}
			if e.Reason != tt.wantReason || !strings.Contains(e.Msg, tt.wantMsg) {
				t.Errorf("RenderPool() refused with %s: %q; want %s naming %q", e.Reason, e.Msg, tt.wantReason, tt.wantMsg)
			}
		})
	}
}

// TestRenderPoolIsDeterministic renders one table twice.
func TestRenderPoolIsDeterministic(t *testing.T) {
	tab := table(3, "S:10.0.0.1", "N:10.0.0.2", "S:fd00::3")
	a, _ := contract.RenderPool(plain(tab))
	b, _ := contract.RenderPool(plain(tab))
	if string(a.Content) != string(b.Content) {
		t.Errorf("two renders differ:\n%s\n%s", a.Content, b.Content)
	}
}

// zone is a zone's status of a table, for the zoned pool's tests.
func zone(name string, tab v1alpha1.SlotTable) v1alpha1.ZoneStatus {
	return v1alpha1.ZoneStatus{Name: name, SlotTable: tab}
}

// TestRenderPoolWithZones checks the bytes of every kind of pool the
// writer renders for a Memcached with zones, and what it says of them.
func TestRenderPoolWithZones(t *testing.T) {
	tests := []struct {
		name      string
		zones     []v1alpha1.ZoneStatus
		want      string
		wantZones []contract.ZonePool
	}{
		{
			name: "two zones, a slot down in each",
			zones: []v1alpha1.ZoneStatus{
				zone("a", table(4, "S:10.244.1.7", "N:10.244.1.8")),
				zone("b", table(3, "S:10.244.2.7", "E")),
			},
			want:      "version 4\n# tables a=4 b=3\nzone a\n10.244.1.7:11211\n127.0.0.1:1 _down_a_1\nzone b\n10.244.2.7:11211\n127.0.0.1:1 _down_b_1\nend 4\n",
			wantZones: []contract.ZonePool{{Name: "a", Version: 4, Slots: 2, Down: 1}, {Name: "b", Version: 3, Slots: 2, Down: 1}},
		},
		{
			name:      "one zone",
			zones:     []v1alpha1.ZoneStatus{zone("us-east-1a", table(1, "S:10.0.0.1"))},
			want:      "version 1\n# tables us-east-1a=1\nzone us-east-1a\n10.0.0.1:11211\nend 1\n",
			wantZones: []contract.ZonePool{{Name: "us-east-1a", Version: 1, Slots: 1}},
		},
		{
			name: "the zones' order is the status's",
			zones: []v1alpha1.ZoneStatus{
				zone("c", table(1, "S:10.0.3.1")),
				zone("a", table(1, "S:10.0.1.1")),
			},
			want:      "version 1\n# tables c=1 a=1\nzone c\n10.0.3.1:11211\nzone a\n10.0.1.1:11211\nend 2\n",
			wantZones: []contract.ZonePool{{Name: "c", Version: 1, Slots: 1}, {Name: "a", Version: 1, Slots: 1}},
		},
		{
			name: "a zone with no slot is one placeholder",
			zones: []v1alpha1.ZoneStatus{
				zone("a", table(5, "S:10.0.1.1")),
				zone("b", v1alpha1.SlotTable{}),
			},
			want:      "version 5\n# tables a=5 b=0\nzone a\n10.0.1.1:11211\nzone b\n127.0.0.1:1 _down_b_0\nend 2\n",
			wantZones: []contract.ZonePool{{Name: "a", Version: 5, Slots: 1}, {Name: "b", Slots: 1, Down: 1}},
		},
		{
			name: "zones of different sizes, during a scale change",
			zones: []v1alpha1.ZoneStatus{
				zone("a", table(6, "S:10.0.1.1", "S:10.0.1.2", "S:fd00::3")),
				zone("b", table(7, "S:10.0.2.1")),
			},
			want:      "version 7\n# tables a=6 b=7\nzone a\n10.0.1.1:11211\n10.0.1.2:11211\n[fd00::3]:11211\nzone b\n10.0.2.1:11211\nend 4\n",
			wantZones: []contract.ZonePool{{Name: "a", Version: 6, Slots: 3}, {Name: "b", Version: 7, Slots: 1}},
		},
		{
			name: "the same address Serving in one zone, NotReady in another",
			zones: []v1alpha1.ZoneStatus{
				zone("a", table(1, "S:10.0.0.1")),
				zone("b", table(1, "N:10.0.0.1")),
			},
			want:      "version 1\n# tables a=1 b=1\nzone a\n10.0.0.1:11211\nzone b\n127.0.0.1:1 _down_b_0\nend 2\n",
			wantZones: []contract.ZonePool{{Name: "a", Version: 1, Slots: 1}, {Name: "b", Version: 1, Slots: 1, Down: 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := contract.RenderPool(tt.zones)
			if err != nil {
				t.Fatalf("RenderPool() = %v", err)
			}
			if got := string(p.Content); got != tt.want {
				t.Errorf("RenderPool() =\n%s\nwant\n%s", got, tt.want)
			}
			if got, want := fmt.Sprint(p.Zones), fmt.Sprint(tt.wantZones); got != want {
				t.Errorf("RenderPool() says zones %s, want %s", got, want)
			}
			slots, down := 0, 0
			for _, z := range tt.wantZones {
				slots, down = slots+z.Slots, down+z.Down
			}
			if p.Slots != slots || p.Down != down {
				t.Errorf("RenderPool() says %d slots, %d down; want %d, %d", p.Slots, p.Down, slots, down)
			}
		})
	}
}

// TestRenderPoolRefusesZones checks every set of zones RenderPool refuses,
// and the reason.
func TestRenderPoolRefusesZones(t *testing.T) {
	ok := table(5, "S:10.0.0.1")
	outOfOrder := table(5, "S:10.0.1.1", "S:10.0.1.2")
	outOfOrder.Slots[0].Slot, outOfOrder.Slots[1].Slot = 1, 0
	var nine []v1alpha1.ZoneStatus
	for z := range v1alpha1.MaxZones + 1 {
		nine = append(nine, zone(fmt.Sprintf("z%d", z), v1alpha1.SlotTable{}))
	}
	tests := []struct {
		name       string
		zones      []v1alpha1.ZoneStatus
		wantReason string
		wantMsg    string
	}{
		{name: "no zone", zones: nil, wantReason: contract.BadZone, wantMsg: "no zone"},
		{name: "the zone of no name beside another", zones: []v1alpha1.ZoneStatus{zone("", ok), zone("a", table(5, "S:10.0.0.2"))}, wantReason: contract.BadZone, wantMsg: `""`},
		{name: "a zone beside the zone of no name", zones: []v1alpha1.ZoneStatus{zone("a", ok), zone("", table(5, "S:10.0.0.2"))}, wantReason: contract.BadZone, wantMsg: `""`},
		{name: "a zone in upper case", zones: []v1alpha1.ZoneStatus{zone("A", ok)}, wantReason: contract.BadZone, wantMsg: `"A"`},
		{name: "a zone with an underscore", zones: []v1alpha1.ZoneStatus{zone("a_b", ok)}, wantReason: contract.BadZone, wantMsg: `"a_b"`},
		{name: "a zone ending in -", zones: []v1alpha1.ZoneStatus{zone("a-", ok)}, wantReason: contract.BadZone, wantMsg: `"a-"`},
		{name: "a zone name of 41", zones: []v1alpha1.ZoneStatus{zone(strings.Repeat("a", 41), ok)}, wantReason: contract.BadZone, wantMsg: "at most 40"},
		{name: "a zone listed twice", zones: []v1alpha1.ZoneStatus{zone("a", ok), zone("a", table(5, "S:10.0.0.2"))}, wantReason: contract.BadZone, wantMsg: "zone a is listed twice"},
		{name: "an address Serving in two zones", zones: []v1alpha1.ZoneStatus{zone("a", ok), zone("b", ok)}, wantReason: contract.BadAddress, wantMsg: "zone a's slot 0 and zone b's slot 0"},
		{name: "a zone's slots out of order", zones: []v1alpha1.ZoneStatus{zone("a", ok), zone("b", outOfOrder)}, wantReason: contract.BadSlots, wantMsg: "zone b: status.slotTable.slots[0] is slot 1"},
		{name: "a zone's bad address", zones: []v1alpha1.ZoneStatus{zone("a", table(5, "S:cache-0"))}, wantReason: contract.BadAddress, wantMsg: `zone a: slot 0's ip "cache-0"`},
		{name: "a zone's negative version", zones: []v1alpha1.ZoneStatus{zone("a", ok), zone("b", table(-1, "S:10.0.0.2"))}, wantReason: contract.BadVersion, wantMsg: "zone b"},
		{name: "a zone of more slots than the proxy takes", zones: []v1alpha1.ZoneStatus{zone("a", table(5, make([]string, contract.MaxSlots+1)...))}, wantReason: contract.TooManySlots, wantMsg: "zone a's slot table has 1001 slots"},
		{name: "more zones than the API takes", zones: nine, wantReason: contract.BadZone, wantMsg: "9 zones"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := contract.RenderPool(tt.zones)
			var e *contract.PoolError
			if !errors.As(err, &e) {
				t.Fatalf("RenderPool() = %v, %v; want a *PoolError", p, err)
			}
			if e.Reason != tt.wantReason || !strings.Contains(e.Msg, tt.wantMsg) {
				t.Errorf("RenderPool() refused with %s: %q; want %s naming %q", e.Reason, e.Msg, tt.wantReason, tt.wantMsg)
			}
		})
	}
}

// TestParsePoolTakesWhatRenderPoolWrites checks, without Lua, that
// ParsePool reads every kind of pool RenderPool writes (everyPool) as its
// tables say (TestParsePoolReadsAsProxyLua holds ParsePool to proxy.lua).
func TestParsePoolTakesWhatRenderPoolWrites(t *testing.T) {
	for _, n := range everyPool() {
		p, err := contract.RenderPool(n.zones)
		if err != nil {
			t.Fatalf("%s: RenderPool() = %v", n.name, err)
		}
		if got, want := parseAnswer(p.Content), wantPool(n.zones); got != want {
			t.Errorf("%s: ParsePool made of the pool\n%s\nwant\n%s", n.name, got, want)
		}
	}
}

// TestPoolZones checks the pool set of a status: its zones, or without
// zones the one zone "" of its slot table.
func TestPoolZones(t *testing.T) {
	tab := table(3, "S:10.0.0.1")
	zones := []v1alpha1.ZoneStatus{zone("a", table(4, "S:10.0.1.1")), zone("b", table(5, "E"))}
	tests := []struct {
		name   string
		status v1alpha1.MemcachedStatus
		want   []v1alpha1.ZoneStatus
	}{
		{name: "no status yet", status: v1alpha1.MemcachedStatus{}, want: []v1alpha1.ZoneStatus{{}}},
		{name: "a slot table", status: v1alpha1.MemcachedStatus{SlotTable: tab}, want: []v1alpha1.ZoneStatus{{SlotTable: tab}}},
		{name: "zones", status: v1alpha1.MemcachedStatus{Zones: zones}, want: zones},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := contract.PoolZones(&tt.status); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("PoolZones() = %v, want %v", got, tt.want)
			}
		})
	}
}
