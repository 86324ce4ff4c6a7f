package contract_test

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/test/testutil"
)

// EnvLua names memcached's own Lua interpreter (make test builds it from
// memcached's vendor/lua: test/tools/memcached-lua.mk).
const EnvLua = "MEMCACHED_LUA_BIN"

// runProxyLua runs the proxy's route configuration, the bytes the hook
// ships (memcached.ProxyConfig), on each pool file as routelib would load
// it (testdata/parse.lua), and returns one answer a file: "ok" and the
// backends routelib was given, "refused ..." or "raised ...".
func runProxyLua(t *testing.T, files []string) []string {
	t.Helper()
	lua := testutil.Program(t, EnvLua, "memcached Lua interpreter (make memcached-lua builds it alone)")
	config := filepath.Join(t.TempDir(), "proxy.lua")
	if err := os.WriteFile(config, []byte(memcached.ProxyConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(lua, append([]string{filepath.Join("testdata", "parse.lua"), config}, files...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("lua: %v\n%s", err, stderr.String())
	}
	var out []string
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	if len(out) != len(files) {
		t.Fatalf("lua answered %d lines for %d files:\n%s\n%s", len(out), len(files), stdout.String(), stderr.String())
	}
	return out
}

// wantBackends is what routelib must be given for a table, worked out from
// the table itself (not from RenderPool): one backend a slot, in slot order, a
// Serving slot its address with the address as label, any other a
// placeholder labelled _down_<slot>, marked down; one placeholder for a
// table with no slot.
func wantBackends(tab v1alpha1.SlotTable) string {
	parts := []string{}
	for i, e := range tab.Slots {
		if e.State == v1alpha1.SlotServing && e.IP != "" {
			host := netip.MustParseAddr(e.IP).String()
			parts = append(parts, fmt.Sprintf("%s|11211|%s:11211|false", host, host))
		} else {
			parts = append(parts, fmt.Sprintf("127.0.0.1|1|_down_%d|true", i))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "127.0.0.1|1|_down_0|true")
	}
	return "ok " + strings.Join(parts, " ")
}

// randomTable is a table of n slots in random states at random addresses,
// IPv4 and IPv6 (some written long-hand), no two Serving slots alike.
func randomTable(r *rand.Rand, n int) v1alpha1.SlotTable {
	tab := v1alpha1.SlotTable{Version: r.Int64N(1 << 62), Slots: make([]v1alpha1.Slot, n)}
	states := []v1alpha1.SlotState{v1alpha1.SlotServing, v1alpha1.SlotServing, v1alpha1.SlotServing, v1alpha1.SlotNotReady, v1alpha1.SlotLeaving, v1alpha1.SlotEmpty}
	used := map[netip.Addr]bool{}
	for i := range tab.Slots {
		var a netip.Addr
		for !a.IsValid() || used[a] {
			if r.IntN(4) == 0 {
				var b [16]byte
				b[0], b[1] = 0xfd, byte(r.IntN(256))
				for j := 2 + r.IntN(14); j < 16; j++ {
					b[j] = byte(r.IntN(256))
				}
				a = netip.AddrFrom16(b)
			} else {
				a = netip.AddrFrom4([4]byte{byte(1 + r.IntN(254)), byte(r.IntN(256)), byte(r.IntN(256)), byte(1 + r.IntN(254))})
			}
		}
		used[a] = true
		ip := a.String()
		if a.Is6() && r.IntN(3) == 0 {
			ip = a.StringExpanded()
		}
		tab.Slots[i] = v1alpha1.Slot{Slot: int32(i), Pod: fmt.Sprintf("cache-%d", i), IP: ip, State: states[r.IntN(len(states))]}
	}
	return tab
}

// TestProxyLuaTakesEveryPool renders every kind of slot table, named ones
// and random ones up to the 1,000 slots the proxy takes, and runs each
// pool through proxy.lua under memcached's own Lua: each is taken, never
// refused and never raising, and gives routelib exactly the backends the
// table says, in slot order. A truncated pool and one with a bad line
// are refused, so that the harness is seen to tell.
func TestProxyLuaTakesEveryPool(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 1))
	named := []struct {
		name  string
		table v1alpha1.SlotTable
	}{
		{"three Serving", table(1767225600, "S:10.244.1.7", "S:10.244.2.3", "S:10.244.3.9")},
		{"every state", table(7, "S:10.0.0.1", "N:10.0.0.2", "L:10.0.0.3", "E", "S:10.0.0.5")},
		{"IPv6", table(8, "S:fd00::7", "S:fd00:0:0:0:0:0:0:8", "S:::ffff:10.0.0.3", "S:2001:db8:ffff:ffff:ffff:ffff:ffff:ffff")},
		{"every slot down", table(9, "N:10.0.0.1", "E", "L:10.0.0.3")},
		{"no slot", table(10)},
		{"no status yet", v1alpha1.SlotTable{}},
		{"the largest version", table(1<<63-1, "S:10.0.0.1")},
		{"a Serving slot without an ip", table(11, "S:10.0.0.1", "S:")},
		{"1,000 slots", randomTable(r, 1000)},
		{"1,000 slots, all down", table(12, make([]string, 1000)...)},
	}
	for i := range 200 {
		named = append(named, struct {
			name  string
			table v1alpha1.SlotTable
		}{fmt.Sprintf("random %d", i), randomTable(r, r.IntN(40))})
	}

	dir := t.TempDir()
	var files []string
	for i, n := range named {
		p, err := contract.RenderPool(n.table)
		if err != nil {
			t.Fatalf("%s: RenderPool() = %v", n.name, err)
		}
		f := filepath.Join(dir, fmt.Sprintf("pool-%d", i))
		if err := os.WriteFile(f, p.Content, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	good, _ := contract.RenderPool(table(5, "S:10.0.0.1", "S:10.0.0.2"))
	broken := []struct {
		name    string
		content []byte
	}{
		{"truncated", good.Content[:len(good.Content)-len("end 2\n")]},
		{"a name, not an IP", []byte("version 5\ncache-0.example:11211\nend 1\n")},
	}
	for i, b := range broken {
		f := filepath.Join(dir, fmt.Sprintf("broken-%d", i))
		if err := os.WriteFile(f, b.content, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}

	got := runProxyLua(t, files)
	for i, n := range named {
		if want := wantBackends(n.table); got[i] != want {
			t.Errorf("%s: proxy.lua made of the pool\n%s\nwant\n%s", n.name, got[i], want)
		}
		content, _ := os.ReadFile(files[i])
		if g := parseAnswer(content); g != got[i] {
			t.Errorf("%s: ParsePool made of the pool\n%s\nproxy.lua\n%s", n.name, g, got[i])
		}
	}
	for i, b := range broken {
		if g := got[len(named)+i]; !strings.HasPrefix(g, "refused ") {
			t.Errorf("%s: proxy.lua did not refuse the pool: %s", b.name, g)
		}
		if _, err := contract.ParsePool(b.content); err == nil {
			t.Errorf("%s: ParsePool took the pool", b.name)
		}
	}
	t.Logf("proxy.lua took %d pools the writer rendered", len(named))
}

// parseAnswer is what ParsePool makes of a pool file, as parse.lua prints
// what proxy.lua makes of it: "ok" and the backends, or "refused" and why.
func parseAnswer(content []byte) string {
	p, err := contract.ParsePool(content)
	if err != nil {
		return "refused " + err.Error()
	}
	parts := make([]string, len(p.Backends))
	for i, b := range p.Backends {
		parts[i] = fmt.Sprintf("%s|%s|%s|%t", b.Host, b.Port, b.Label, b.Down)
	}
	return "ok " + strings.Join(parts, " ")
}

// TestParsePoolReadsAsProxyLua runs files that break each of proxy.lua's
// rules, and files at their edges, through proxy.lua under memcached's
// own Lua and through ParsePool: both take the same files, give routelib
// the same backends, and refuse the same files, for the reason proxy.lua
// logs.
func TestParsePoolReadsAsProxyLua(t *testing.T) {
	lines := func(n int, line func(i int) string) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(line(i) + "\n")
		}
		return b.String()
	}
	down := func(i int) string { return contract.PoolPlaceholder + " " + contract.DownLabel(i) }
	maxSlots := lines(contract.MaxSlots, down) + fmt.Sprintf("end %d\n", contract.MaxSlots)
	padded := func(size int) string {
		pool := "version 1\n10.0.0.1:11211\nend 1\n"
		return "#" + strings.Repeat("x", size-len(pool)-2) + "\n" + pool
	}
	tests := []struct {
		name    string
		content string
		wantOK  bool
	}{
		{name: "comments, blank lines and white space", content: "# pool\n\n \tversion\t 3 \r\n10.0.0.1:11211\r\n  [fd00::1]:11211   fd00-one\n\nend   2\n# done\n", wantOK: true},
		{name: "no version line", content: "10.0.0.1:11211\nend 1\n", wantOK: true},
		{name: "the end count with leading zeros", content: "10.0.0.1:11211\nend 001\n", wantOK: true},
		{name: "a port with leading zeros", content: "10.0.0.1:08080\nend 1\n", wantOK: true},
		{name: "the same address down twice", content: "127.0.0.1:1 _down_0\n127.0.0.1:1 _down_1\nend 2\n", wantOK: true},
		{name: "IPv6 with a dotted tail", content: "[::ffff:10.0.0.1]:11211\nend 1\n", wantOK: true},
		{name: "every label character", content: "10.0.0.1:11211 a-Z_0.9:x\nend 1\n", wantOK: true},
		{name: "a label of 64", content: "10.0.0.1:11211 " + strings.Repeat("l", 64) + "\nend 1\n", wantOK: true},
		{name: "MaxSlots slots", content: maxSlots, wantOK: true},
		{name: "MaxPoolBytes", content: padded(contract.MaxPoolBytes), wantOK: true},
		{name: "empty", content: ""},
		{name: "larger than MaxPoolBytes", content: padded(contract.MaxPoolBytes + 1)},
		{name: "no newline at the end", content: "10.0.0.1:11211\nend 1"},
		{name: "no end line", content: "10.0.0.1:11211\n"},
		{name: "text after the end line", content: "10.0.0.1:11211\nend 1\n10.0.0.2:11211\n"},
		{name: "two end lines", content: "10.0.0.1:11211\nend 1\nend 1\n"},
		{name: "the end count wrong", content: "10.0.0.1:11211\nend 2\n"},
		{name: "an end count past int64", content: "10.0.0.1:11211\nend 99999999999999999999999\n"},
		{name: "no backend", content: "version 1\nend 0\n"},
		{name: "version twice", content: "version 1\nversion 2\n10.0.0.1:11211\nend 1\n"},
		{name: "version after a slot", content: "10.0.0.1:11211\nversion 2\nend 1\n"},
		{name: "a version that is no number", content: "version x\n10.0.0.1:11211\nend 1\n"},
		{name: "more than MaxSlots slots", content: lines(contract.MaxSlots+1, down) + fmt.Sprintf("end %d\n", contract.MaxSlots+1)},
		{name: "three fields", content: "10.0.0.1:11211 a b\nend 1\n"},
		{name: "no port", content: "10.0.0.1\nend 1\n"},
		{name: "an octet with a leading zero", content: "10.0.0.010:11211\nend 1\n"},
		{name: "an octet past 255", content: "10.0.0.256:11211\nend 1\n"},
		{name: "three octets", content: "10.0.1:11211\nend 1\n"},
		{name: "IPv6 without brackets", content: "fd00::1:11211\nend 1\n"},
		{name: "IPv6 of other characters", content: "[fd00::g]:11211\nend 1\n"},
		{name: "IPv6 without a colon", content: "[fd00]:11211\nend 1\n"},
		{name: "IPv6 too long", content: "[" + strings.Repeat("0", 44) + "::]:11211\nend 1\n"},
		{name: "port 0", content: "10.0.0.1:0\nend 1\n"},
		{name: "port 65536", content: "10.0.0.1:65536\nend 1\n"},
		{name: "a port of six digits", content: "10.0.0.1:000001\nend 1\n"},
		{name: "a label of 65", content: "10.0.0.1:11211 " + strings.Repeat("l", 65) + "\nend 1\n"},
		{name: "a label of another character", content: "10.0.0.1:11211 a/b\nend 1\n"},
		{name: "a label listed twice", content: "10.0.0.1:11211 a\n10.0.0.2:11211 a\nend 2\n"},
		{name: "an address listed twice", content: "10.0.0.1:11211\n10.0.0.1:11211 b\nend 2\n"},
		{name: "an address listed down, then up", content: "127.0.0.1:1 _down_0\n127.0.0.1:1 up\nend 2\n"},
	}
	dir := t.TempDir()
	files := make([]string, len(tests))
	for i, tt := range tests {
		files[i] = filepath.Join(dir, fmt.Sprintf("pool-%d", i))
		if err := os.WriteFile(files[i], []byte(tt.content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := runProxyLua(t, files)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := parseAnswer([]byte(tt.content))
			switch {
			case strings.HasPrefix(got[i], "ok ") != tt.wantOK:
				t.Errorf("proxy.lua made of the pool %s, want it taken = %t", got[i], tt.wantOK)
			case tt.wantOK && g != got[i]:
				t.Errorf("ParsePool made of the pool\n%s\nproxy.lua\n%s", g, got[i])
			case !tt.wantOK && !strings.HasPrefix(g, "refused "):
				t.Errorf("ParsePool took the pool: %s; proxy.lua %s", g, got[i])
			case !tt.wantOK && !strings.Contains(got[i], strings.TrimPrefix(g, "refused ")):
				t.Errorf("ParsePool refused the pool with %q; proxy.lua with %q", g, got[i])
			}
		})
	}
}

// TestMaxSlotsIsProxyLuas holds proxy.lua's MAX_SLOTS and MAX_BYTES to
// contract.MaxSlots and MaxPoolBytes, also where no Lua runs. (They are
// literals in proxy.lua: rendering them into it would change its bytes,
// and so every proxy's ConfigMap.)
func TestMaxSlotsIsProxyLuas(t *testing.T) {
	for _, c := range []struct {
		pattern string
		want    string
	}{
		{`local MAX_SLOTS <const> = (\S+)`, strconv.Itoa(contract.MaxSlots)},
		{`local MAX_BYTES <const> = 256 \* (\S+)`, strconv.Itoa(contract.MaxPoolBytes / 256)},
	} {
		m := regexp.MustCompile(c.pattern).FindStringSubmatch(memcached.ProxyConfig)
		if m == nil || m[1] != c.want {
			t.Errorf("proxy.lua: %s gives %q, want %s", c.pattern, m, c.want)
		}
	}
}

// wantZoneBackends is what routelib must be given for a set of zones,
// worked out from the zones' tables (not from RenderZonePool): a pool a
// zone, as wantBackends has it but for the placeholders' labels,
// _down_<zone>_<slot>; the zones in the order of their names, as
// parse.lua prints routelib's pool set (a Lua table has no order).
func wantZoneBackends(zones []v1alpha1.ZoneStatus) string {
	zones = slices.Clone(zones)
	slices.SortFunc(zones, func(a, b v1alpha1.ZoneStatus) int { return strings.Compare(a.Name, b.Name) })
	var parts []string
	for _, z := range zones {
		parts = append(parts, "["+z.Name+"]")
		want := strings.Fields(strings.TrimPrefix(wantBackends(z.SlotTable), "ok "))
		for _, b := range want {
			if rest, ok := strings.CutPrefix(b, "127.0.0.1|1|_down_"); ok {
				b = "127.0.0.1|1|_down_" + z.Name + "_" + rest
			}
			parts = append(parts, b)
		}
	}
	return "ok " + strings.Join(parts, " ")
}

// parseZoneAnswer is what ParseZonePool makes of a pool file, as
// parse.lua prints what the zoned configuration makes of it.
func parseZoneAnswer(content []byte) string {
	p, err := contract.ParseZonePool(content)
	if err != nil {
		return "refused " + err.Error()
	}
	zones := slices.Clone(p.Zones)
	slices.SortFunc(zones, func(a, b contract.ParsedZone) int { return strings.Compare(a.Name, b.Name) })
	var parts []string
	for _, z := range zones {
		parts = append(parts, "["+z.Name+"]")
		for _, b := range z.Backends {
			parts = append(parts, fmt.Sprintf("%s|%s|%s|%t", b.Host, b.Port, b.Label, b.Down))
		}
	}
	return "ok " + strings.Join(parts, " ")
}

// randomZones is nz zones of random names, each a table of up to n
// slots (randomTable's), no address Serving in two zones.
func randomZones(r *rand.Rand, nz, n int) []v1alpha1.ZoneStatus {
	const chars = "abcdefghijklmnopqrstuvwxyz0123456789-"
	names := map[string]bool{}
	served := map[netip.Addr]bool{}
	var zones []v1alpha1.ZoneStatus
	for len(zones) < nz {
		b := make([]byte, 1+r.IntN(v1alpha1.MaxZoneNameLen))
		for i := range b {
			b[i] = chars[r.IntN(len(chars))]
		}
		b[0], b[len(b)-1] = chars[r.IntN(26)], chars[r.IntN(36)]
		name := string(b)
		if names[name] {
			continue
		}
		tab := randomTable(r, r.IntN(n+1))
		clash := false
		for _, e := range tab.Slots {
			if a, err := netip.ParseAddr(e.IP); err == nil && e.State == v1alpha1.SlotServing && served[a] {
				clash = true
			}
		}
		if clash {
			continue
		}
		for _, e := range tab.Slots {
			if a, err := netip.ParseAddr(e.IP); err == nil && e.State == v1alpha1.SlotServing {
				served[a] = true
			}
		}
		names[name] = true
		zones = append(zones, v1alpha1.ZoneStatus{Name: name, SlotTable: tab})
	}
	return zones
}
