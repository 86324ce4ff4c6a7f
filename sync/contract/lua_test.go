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
// contract.MaxSlots and MaxPoolBytes, and the zoned configuration's to
// MaxSlots, MaxZonePoolBytes and v1alpha1.MaxZoneNameLen, also where no
// Lua runs. (They are
// literals in proxy.lua: rendering them into it would change its bytes,
// and so every proxy's ConfigMap.)
func TestMaxSlotsIsProxyLuas(t *testing.T) {
	for _, c := range []struct {
		config, name string
		pattern      string
		want         string
	}{
		{memcached.ProxyConfig, "proxy.lua", `local MAX_SLOTS <const> = (\S+)`, strconv.Itoa(contract.MaxSlots)},
		{memcached.ProxyConfig, "proxy.lua", `local MAX_BYTES <const> = 256 \* (\S+)`, strconv.Itoa(contract.MaxPoolBytes / 256)},
		{memcached.ProxyZonesConfig, "ProxyZonesConfig", `local MAX_SLOTS <const> = (\S+)`, strconv.Itoa(contract.MaxSlots)},
		{memcached.ProxyZonesConfig, "ProxyZonesConfig", `local MAX_BYTES <const> = 1024 \* (\S+)`, strconv.Itoa(contract.MaxZonePoolBytes / 1024)},
		{memcached.ProxyZonesConfig, "ProxyZonesConfig", `#z <= (\d+) and`, strconv.Itoa(v1alpha1.MaxZoneNameLen)},
	} {
		m := regexp.MustCompile(c.pattern).FindStringSubmatch(c.config)
		if m == nil || m[1] != c.want {
			t.Errorf("%s: %s gives %q, want %s", c.name, c.pattern, m, c.want)
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

// zoneAnswer is what the zoned configuration made of one pool file
// (testdata/parse_zones.lua): the pool set routelib was given ("ok
// [zone] backends ..."), "refused ..." or "raised ..."; the routes it
// would route with; what it logged.
type zoneAnswer struct {
	pool, routes, said string
}

// runProxyZonesLua runs the zoned route configuration, the bytes the hook
// ships (memcached.ProxyZonesConfig), on each pool file as routelib would
// load it, with env added to the environment.
func runProxyZonesLua(t *testing.T, env []string, files []string) []zoneAnswer {
	t.Helper()
	lua := testutil.Program(t, EnvLua, "memcached Lua interpreter (make memcached-lua builds it alone)")
	config := filepath.Join(t.TempDir(), "config.lua")
	if err := os.WriteFile(config, []byte(memcached.ProxyZonesConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(lua, append([]string{filepath.Join("testdata", "parse_zones.lua"), config}, files...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("lua: %v\n%s", err, stderr.String())
	}
	var lines []string
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) != 3*len(files) {
		t.Fatalf("lua answered %d lines for %d files, want 3 a file:\n%s\n%s", len(lines), len(files), stdout.String(), stderr.String())
	}
	out := make([]zoneAnswer, len(files))
	for i := range out {
		out[i] = zoneAnswer{pool: lines[3*i], routes: lines[3*i+1], said: lines[3*i+2]}
	}
	return out
}

// writeFiles writes each content to a file of its own in a temporary
// directory, and returns their paths.
func writeFiles(t *testing.T, contents [][]byte) []string {
	t.Helper()
	dir := t.TempDir()
	files := make([]string, len(contents))
	for i, c := range contents {
		files[i] = filepath.Join(dir, fmt.Sprintf("pool-%d", i))
		if err := os.WriteFile(files[i], c, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// TestProxyZonesLuaTakesEveryPool renders every kind of zoned pool, named
// ones and random ones up to eight zones, and runs each through the zoned
// configuration under memcached's own Lua: each is taken, never refused
// and never raising, gives routelib a pool a zone with exactly the
// backends its table says, in slot order, and ParseZonePool reads it
// alike. Broken pools are refused by both, so that the harness is seen to
// tell; and proxy.lua, the configuration without zones, refuses a zoned
// pool (a proxy whose ConfigMap lags its agent keeps its pool).
func TestProxyZonesLuaTakesEveryPool(t *testing.T) {
	r := rand.New(rand.NewPCG(34, 2))
	z := zone
	named := []struct {
		name  string
		zones []v1alpha1.ZoneStatus
	}{
		{"three zones of two", []v1alpha1.ZoneStatus{
			z("a", table(1767225600, "S:10.244.1.7", "S:10.244.1.8")),
			z("b", table(1767225601, "S:10.244.2.7", "S:10.244.2.8")),
			z("c", table(1767225602, "S:10.244.3.7", "S:10.244.3.8")),
		}},
		{"every state", []v1alpha1.ZoneStatus{
			z("a", table(7, "S:10.0.0.1", "N:10.0.0.2", "L:10.0.0.3", "E", "S:10.0.0.5")),
			z("b", table(7, "E", "S:10.0.1.2", "S:")),
		}},
		{"IPv6", []v1alpha1.ZoneStatus{z("a", table(8, "S:fd00::7", "S:::ffff:10.0.0.3")), z("b", table(8, "S:fd00:0:0:0:0:0:0:8"))}},
		{"a zone with no slot", []v1alpha1.ZoneStatus{z("a", table(9, "S:10.0.0.1")), z("b", v1alpha1.SlotTable{})}},
		{"every zone with no slot", []v1alpha1.ZoneStatus{z("a", v1alpha1.SlotTable{}), z("b", v1alpha1.SlotTable{})}},
		{"one zone", []v1alpha1.ZoneStatus{z("europe-west1-b", table(10, "S:10.0.0.1"))}},
		{"the longest zone name", []v1alpha1.ZoneStatus{z(strings.Repeat("z", v1alpha1.MaxZoneNameLen), table(11, make([]string, 3)...))}},
		{"the largest file: eight zones of the longest names, of 1,000 placeholders", nil},
		{"zones named as the pools", []v1alpha1.ZoneStatus{z("nocas", table(12, "S:10.0.0.1")), z("nopool", table(12, "E")), z("main", table(12, "E"))}},
	}
	for i := range v1alpha1.MaxZones {
		name := fmt.Sprintf("%d%s", i, strings.Repeat("z", v1alpha1.MaxZoneNameLen-1))
		named[7].zones = append(named[7].zones, z(name, table(13, make([]string, contract.MaxSlots)...)))
	}
	for i := range 100 {
		named = append(named, struct {
			name  string
			zones []v1alpha1.ZoneStatus
		}{fmt.Sprintf("random %d", i), randomZones(r, 1+r.IntN(v1alpha1.MaxZones), r.IntN(30))})
	}
	var contents [][]byte
	for _, n := range named {
		p, err := contract.RenderZonePool(n.zones)
		if err != nil {
			t.Fatalf("%s: RenderZonePool() = %v", n.name, err)
		}
		contents = append(contents, p.Content)
	}
	good, _ := contract.RenderZonePool([]v1alpha1.ZoneStatus{z("a", table(5, "S:10.0.0.1")), z("b", table(5, "S:10.0.0.2"))})
	plain, _ := contract.RenderPool(table(5, "S:10.0.0.1", "S:10.0.0.2"))
	broken := []struct {
		name    string
		content []byte
	}{
		{"truncated", good.Content[:len(good.Content)-len("end 2\n")]},
		{"cut after a zone line", good.Content[:len("version 5\nzone a\n")]},
		{"a pool without zones", plain.Content},
		{"a name, not an IP", []byte("version 5\nzone a\ncache-0.example:11211\nend 1\n")},
	}
	for _, b := range broken {
		contents = append(contents, b.content)
	}
	files := writeFiles(t, contents)

	got := runProxyZonesLua(t, []string{"MEMCACHED_PROXY_LOCAL_ZONE=a"}, files)
	for i, n := range named {
		if want := wantZoneBackends(n.zones); got[i].pool != want {
			t.Errorf("%s: the zoned configuration made of the pool\n%s\nwant\n%s", n.name, got[i].pool, want)
		}
		if g := parseZoneAnswer(contents[i]); g != got[i].pool {
			t.Errorf("%s: ParseZonePool made of the pool\n%s\nthe zoned configuration\n%s", n.name, g, got[i].pool)
		}
	}
	for i, b := range broken {
		if g := got[len(named)+i]; !strings.HasPrefix(g.pool, "refused ") {
			t.Errorf("%s: the zoned configuration did not refuse the pool: %s", b.name, g.pool)
		}
		if _, err := contract.ParseZonePool(b.content); err == nil {
			t.Errorf("%s: ParseZonePool took the pool", b.name)
		}
	}
	if g := runProxyLua(t, files[:1]); !strings.HasPrefix(g[0], "refused ") {
		t.Errorf("proxy.lua took a pool with zones: %s", g[0])
	}
	t.Logf("the zoned configuration took %d pools the writer rendered", len(named))
}

// TestParseZonePoolReadsAsProxyZonesLua runs files that break each of the
// zoned configuration's rules of its own, and files at their edges,
// through it under memcached's own Lua and through ParseZonePool: both
// take the same files, give routelib the same pools, and refuse the same
// files, for the reason the configuration logs. (The rules it shares with
// proxy.lua, the slot lines', are TestParsePoolReadsAsProxyLua's.)
func TestParseZonePoolReadsAsProxyZonesLua(t *testing.T) {
	zoneOf := func(name string, n int) string {
		var b strings.Builder
		b.WriteString("zone " + name + "\n")
		for i := range n {
			b.WriteString(contract.PoolPlaceholder + " " + contract.ZoneDownLabel(name, i) + "\n")
		}
		return b.String()
	}
	padded := func(size int) string {
		pool := "version 1\nzone a\n10.0.0.1:11211\nend 1\n"
		return "#" + strings.Repeat("x", size-len(pool)-2) + "\n" + pool
	}
	tests := []struct {
		name    string
		content string
		wantOK  bool
	}{
		{name: "comments, blank lines and white space", content: "# pool\n\nversion 3\n \tzone\t a \r\n10.0.0.1:11211\n\n# b\nzone b\n[fd00::1]:11211 one\nend 2\n", wantOK: true},
		{name: "no version line", content: "zone a\n10.0.0.1:11211\nend 1\n", wantOK: true},
		{name: "a zone of digits", content: "zone 1\n10.0.0.1:11211\nend 1\n", wantOK: true},
		{name: "a zone with dashes", content: "zone us-east-1a\n10.0.0.1:11211\nend 1\n", wantOK: true},
		{name: "a zone name of 40", content: "zone " + strings.Repeat("a", 40) + "\n10.0.0.1:11211\nend 1\n", wantOK: true},
		{name: "a placeholder's address in two zones", content: "zone a\n127.0.0.1:1 _down_a_0\nzone b\n127.0.0.1:1 _down_b_0\nend 2\n", wantOK: true},
		{name: "MaxSlots in each of two zones", content: zoneOf("a", contract.MaxSlots) + zoneOf("b", contract.MaxSlots) + fmt.Sprintf("end %d\n", 2*contract.MaxSlots), wantOK: true},
		{name: "a zone named zone", content: "zone zone\n10.0.0.1:11211\nend 1\n", wantOK: true},
		{name: "no zone", content: "version 1\n10.0.0.1:11211\nend 1\n"},
		{name: "no zone, no slot", content: "version 1\nend 0\n"},
		{name: "a slot before the first zone", content: "10.0.0.1:11211\nzone a\n10.0.0.2:11211\nend 2\n"},
		{name: "a zone with no slot", content: "zone a\n10.0.0.1:11211\nzone b\nend 1\n"},
		{name: "a zone with no slot, first", content: "zone a\nzone b\n10.0.0.1:11211\nend 1\n"},
		{name: "a zone listed twice", content: "zone a\n10.0.0.1:11211\nzone a\n10.0.0.2:11211\nend 2\n"},
		{name: "a zone in upper case", content: "zone A\n10.0.0.1:11211\nend 1\n"},
		{name: "a zone starting with a dash", content: "zone -a\n10.0.0.1:11211\nend 1\n"},
		{name: "a zone ending with a dash", content: "zone a-\n10.0.0.1:11211\nend 1\n"},
		{name: "a zone with a dot", content: "zone a.b\n10.0.0.1:11211\nend 1\n"},
		{name: "a zone name of 41", content: "zone " + strings.Repeat("a", 41) + "\n10.0.0.1:11211\nend 1\n"},
		{name: "a zone line of three fields", content: "zone a b\n10.0.0.1:11211\nend 1\n"},
		{name: "a zone line with no name", content: "zone\n10.0.0.1:11211\nend 1\n"},
		{name: "version after a zone line", content: "zone a\nversion 1\n10.0.0.1:11211\nend 1\n"},
		{name: "an address in two zones", content: "zone a\n10.0.0.1:11211\nzone b\n10.0.0.1:11211\nend 2\n"},
		{name: "a label in two zones", content: "zone a\n127.0.0.1:1 _down_0\nzone b\n127.0.0.1:1 _down_0\nend 2\n"},
		{name: "the end count one zone's", content: "zone a\n10.0.0.1:11211\nzone b\n10.0.0.2:11211\nend 1\n"},
		{name: "more than MaxSlots in a zone", content: zoneOf("a", contract.MaxSlots+1) + fmt.Sprintf("end %d\n", contract.MaxSlots+1)},
		{name: "a zone after the end line", content: "zone a\n10.0.0.1:11211\nend 1\nzone b\n"},
		{name: "MaxZonePoolBytes", content: padded(contract.MaxZonePoolBytes), wantOK: true},
		{name: "larger than MaxZonePoolBytes", content: padded(contract.MaxZonePoolBytes + 1)},
	}
	contents := make([][]byte, len(tests))
	for i, tt := range tests {
		contents[i] = []byte(tt.content)
	}
	got := runProxyZonesLua(t, nil, writeFiles(t, contents))
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, lua := parseZoneAnswer([]byte(tt.content)), got[i].pool
			switch {
			case strings.HasPrefix(lua, "ok ") != tt.wantOK:
				t.Errorf("the zoned configuration made of the pool %s, want it taken = %t", lua, tt.wantOK)
			case tt.wantOK && g != lua:
				t.Errorf("ParseZonePool made of the pool\n%s\nthe zoned configuration\n%s", g, lua)
			case !tt.wantOK && !strings.HasPrefix(g, "refused "):
				t.Errorf("ParseZonePool took the pool: %s; the zoned configuration %s", g, lua)
			case !tt.wantOK && !strings.Contains(lua, strings.TrimPrefix(g, "refused ")):
				t.Errorf("ParseZonePool refused the pool with %q; the zoned configuration with %q", g, lua)
			}
		})
	}
}

// TestProxyZonesLuaRoutes records the routes the zoned configuration
// gives routelib: reads fail over from the local zone (local_zone on the
// route itself, miss unset), or in no set order without a local zone the
// pool has, which it says once; gat and gats go to every zone and answer a
// hit of any; cas goes to a pool that is down; everything else to every
// zone, answering the first that is not an error.
func TestProxyZonesLuaRoutes(t *testing.T) {
	const (
		reads  = "get=failover(set_main%[1]s) gets=failover(set_main%[1]s) mg=failover(set_main%[1]s)"
		routes = "routes cas=direct(nocas) gat=allfastest(set_main,miss=true) gats=allfastest(set_main,miss=true) " +
			reads + " default=allfastest(set_main) pool nocas=127.0.0.1|1|_down_nocas|true"
		warning = "reads fail over in no set order"
	)
	pool, _ := contract.RenderZonePool([]v1alpha1.ZoneStatus{zone("a", table(1, "S:10.0.0.1")), zone("b", table(1, "S:10.0.0.2"))})
	tests := []struct {
		name       string
		env        []string
		content    []byte
		wantRoutes string
		wantSaid   string // in what the first load logged, and not the second
	}{
		{name: "the local zone a", env: []string{"MEMCACHED_PROXY_LOCAL_ZONE=a"}, content: pool.Content, wantRoutes: fmt.Sprintf(routes, ",local_zone=a")},
		{name: "the local zone b", env: []string{"MEMCACHED_PROXY_LOCAL_ZONE=b"}, content: pool.Content, wantRoutes: fmt.Sprintf(routes, ",local_zone=b")},
		{name: "no local zone", env: []string{"MEMCACHED_PROXY_LOCAL_ZONE="}, content: pool.Content, wantRoutes: fmt.Sprintf(routes, ""), wantSaid: "MEMCACHED_PROXY_LOCAL_ZONE is not set (zones a, b): " + warning},
		{name: "a local zone the pool does not have", env: []string{"MEMCACHED_PROXY_LOCAL_ZONE=c"}, content: pool.Content, wantRoutes: fmt.Sprintf(routes, ""), wantSaid: "MEMCACHED_PROXY_LOCAL_ZONE=c is no zone of the pool (zones a, b): " + warning},
		{name: "no pool yet", env: []string{"MEMCACHED_PROXY_LOCAL_ZONE=a"}, content: []byte("broken\n"), wantRoutes: fmt.Sprintf(routes, ""), wantSaid: "no pool yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := writeFiles(t, [][]byte{tt.content})
			got := runProxyZonesLua(t, append(tt.env, "PARSE_KEEP_STATE=1"), []string{files[0], files[0]})
			for i, g := range got {
				if g.routes != tt.wantRoutes {
					t.Errorf("load %d: the zoned configuration routes\n%s\nwant\n%s", i+1, g.routes, tt.wantRoutes)
				}
			}
			if tt.wantSaid == "" {
				if strings.Contains(got[0].said, warning) {
					t.Errorf("the zoned configuration said %q", got[0].said)
				}
				return
			}
			if !strings.Contains(got[0].said, tt.wantSaid) {
				t.Errorf("the first load said %q, want %q in it", got[0].said, tt.wantSaid)
			}
			if strings.Contains(got[1].said, tt.wantSaid) {
				t.Errorf("the reload said %q again", got[1].said)
			}
		})
	}
}
