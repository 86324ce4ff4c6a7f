package contract_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/test/testutil"
)

// table is testutil.SlotTable.
var table = testutil.SlotTable

// TestRenderPool checks the bytes of every kind of pool the writer renders.
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
			want:      "version 1767225600\n10.244.1.7:11211\n10.244.2.3:11211\n10.244.3.9:11211\nend 3\n",
			wantSlots: 3,
		},
		{
			name:  "a slot of each other state keeps its place",
			table: table(7, "S:10.0.0.1", "N:10.0.0.2", "L:10.0.0.3", "E", "S:10.0.0.5"),
			want: "version 7\n10.0.0.1:11211\n127.0.0.1:1 _down_1\n127.0.0.1:1 _down_2\n127.0.0.1:1 _down_3\n" +
				"10.0.0.5:11211\nend 5\n",
			wantSlots: 5, wantDown: 3,
		},
		{
			name:      "IPv6 in brackets, in its canonical form",
			table:     table(8, "S:fd00::7", "S:FD00:0:0:0:0:0:0:8", "S:10.0.0.3"),
			want:      "version 8\n[fd00::7]:11211\n[fd00::8]:11211\n10.0.0.3:11211\nend 3\n",
			wantSlots: 3,
		},
		{
			name:      "every slot down",
			table:     table(9, "N:10.0.0.1", "E", "L:10.0.0.3"),
			want:      "version 9\n127.0.0.1:1 _down_0\n127.0.0.1:1 _down_1\n127.0.0.1:1 _down_2\nend 3\n",
			wantSlots: 3, wantDown: 3,
		},
		{
			name:      "no slot is one placeholder, never an empty pool",
			table:     table(10),
			want:      "version 10\n127.0.0.1:1 _down_0\nend 1\n",
			wantSlots: 1, wantDown: 1,
		},
		{
			name:      "no status yet: version 0, no slot",
			table:     v1alpha1.SlotTable{},
			want:      "version 0\n127.0.0.1:1 _down_0\nend 1\n",
			wantSlots: 1, wantDown: 1,
		},
		{
			name:      "a Serving slot without an ip is not served, as slots.Served has it",
			table:     table(11, "S:10.0.0.1", "S:"),
			want:      "version 11\n10.0.0.1:11211\n127.0.0.1:1 _down_1\nend 2\n",
			wantSlots: 2, wantDown: 1,
		},
		{
			name:      "the same address Serving once and NotReady once",
			table:     table(12, "S:10.0.0.1", "N:10.0.0.1"),
			want:      "version 12\n10.0.0.1:11211\n127.0.0.1:1 _down_1\nend 2\n",
			wantSlots: 2, wantDown: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := contract.RenderPool(tt.table)
			if err != nil {
				t.Fatalf("RenderPool() = %v", err)
			}
			if got := string(p.Content); got != tt.want {
				t.Errorf("RenderPool() =\n%s\nwant\n%s", got, tt.want)
			}
			if p.Version != tt.table.Version || p.Slots != tt.wantSlots || p.Down != tt.wantDown {
				t.Errorf("RenderPool() says version %d, %d slots, %d down; want %d, %d, %d", p.Version, p.Slots, p.Down, tt.table.Version, tt.wantSlots, tt.wantDown)
			}
		})
	}
}

// TestRenderPoolRefuses checks every table RenderPool refuses, and the reason.
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
			p, err := contract.RenderPool(tt.table)
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
	a, _ := contract.RenderPool(tab)
	b, _ := contract.RenderPool(tab)
	if string(a.Content) != string(b.Content) {
		t.Errorf("two renders differ:\n%s\n%s", a.Content, b.Content)
	}
}

// TestParsePoolTakesWhatRenderPoolWrites checks, without Lua, that
// ParsePool reads every kind of pool RenderPool writes as the table says
// (TestParsePoolReadsAsProxyLua holds ParsePool to proxy.lua).
func TestParsePoolTakesWhatRenderPoolWrites(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 1))
	tables := []v1alpha1.SlotTable{
		{},
		table(1, "S:10.0.0.1", "N:10.0.0.2", "L:10.0.0.3", "E", "S:fd00::5", "S:"),
		table(2, make([]string, contract.MaxSlots)...),
		randomTable(r, contract.MaxSlots),
	}
	for range 100 {
		tables = append(tables, randomTable(r, r.IntN(40)))
	}
	for i, tab := range tables {
		p, err := contract.RenderPool(tab)
		if err != nil {
			t.Fatalf("table %d: RenderPool() = %v", i, err)
		}
		if got, want := parseAnswer(p.Content), wantBackends(tab); got != want {
			t.Errorf("table %d: ParsePool made of the pool\n%s\nwant\n%s", i, got, want)
		}
	}
}
