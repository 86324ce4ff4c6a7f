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

// The route configurations of the operator before proxy.lua read zones
// from the pool file, kept as they were shipped: one for a Memcached
// without zones, one with zones (rendered from one template). A proxy
// Pod started by that operator runs one of them until it rolls, and
// loads proxy.lua at its next reload once the upgrade changes its
// ConfigMap.
var (
	previousPlainConfig = filepath.Join("testdata", "previous", "proxy.lua")
	previousZonesConfig = filepath.Join("testdata", "previous", "proxy-zones.lua")
)

// previousPoolsConfig is the route configuration before proxy.lua
// announced the pool it loaded (#40): one for both kinds of Memcached,
// which kept its state in the global proxy.lua keeps it in (__mcpools),
// so that proxy.lua, loaded in its VM, starts from a pool it left, with
// no tables known.
var previousPoolsConfig = filepath.Join("testdata", "previous", "proxy-pools.lua")

// luaAnswer is what a route configuration made of one pool file
// (testdata/parse.lua): the pool set routelib was given ("ok [zone]
// backends ...", the zone "" for the pool of a Memcached without zones),
// "refused ..." or "raised ..."; the routes it would route with; what it
// logged; what its cron announced, with PARSE_RUN_CRON ("-" without).
type luaAnswer struct {
	pool, routes, said, announced string
}

// proxyConfig writes the route configuration the hook ships
// (memcached.ProxyConfig) to a file, for runLua.
func proxyConfig(t *testing.T) string {
	t.Helper()
	config := filepath.Join(t.TempDir(), "config.lua")
	if err := os.WriteFile(config, []byte(memcached.ProxyConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	return config
}

// runLua runs testdata/parse.lua under memcached's own Lua with env added
// to the environment, on args: route configurations (names ending in
// .lua), each followed by the pool files it loads, as routelib would. It
// returns an answer a pool file.
func runLua(t *testing.T, env []string, args ...string) []luaAnswer {
	t.Helper()
	lua := testutil.Program(t, EnvLua, "memcached Lua interpreter (make memcached-lua builds it alone)")
	files := 0
	for _, a := range args {
		if !strings.HasSuffix(a, ".lua") {
			files++
		}
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(lua, append([]string{filepath.Join("testdata", "parse.lua")}, args...)...)
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
	if len(lines) != 4*files {
		t.Fatalf("lua answered %d lines for %d files, want 4 a file:\n%s\n%s", len(lines), files, stdout.String(), stderr.String())
	}
	out := make([]luaAnswer, files)
	for i := range out {
		out[i] = luaAnswer{pool: lines[4*i], routes: lines[4*i+1], said: lines[4*i+2], announced: strings.TrimPrefix(lines[4*i+3], "announced ")}
	}
	return out
}

// runProxyLua runs proxy.lua on each pool file, each from a fresh state.
func runProxyLua(t *testing.T, env []string, files []string) []luaAnswer {
	t.Helper()
	return runLua(t, env, append([]string{proxyConfig(t)}, files...)...)
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

// plain is the pool set of a Memcached without zones: the one zone "".
func plain(tab v1alpha1.SlotTable) []v1alpha1.ZoneStatus {
	return []v1alpha1.ZoneStatus{{SlotTable: tab}}
}

// wantPool is what routelib must be given for a pool set, worked out
// from the zones' tables (not from RenderPool): a pool a zone, in the
// order of their names, as parse.lua prints them (a Lua table has no
// order); in each, one backend a slot, in slot order, a Serving slot its
// address with the address as label, any other a placeholder labelled
// _down_<zone>_<slot> (_down_<slot> in the zone ""), marked down; one
// placeholder for a table with no slot.
func wantPool(zones []v1alpha1.ZoneStatus) string {
	zones = slices.Clone(zones)
	slices.SortFunc(zones, func(a, b v1alpha1.ZoneStatus) int { return strings.Compare(a.Name, b.Name) })
	var parts []string
	for _, z := range zones {
		parts = append(parts, "["+z.Name+"]")
		down := func(i int) string {
			if z.Name == "" {
				return fmt.Sprintf("127.0.0.1|1|_down_%d|true", i)
			}
			return fmt.Sprintf("127.0.0.1|1|_down_%s_%d|true", z.Name, i)
		}
		for i, e := range z.SlotTable.Slots {
			if ip := e.ServedIP(); ip != "" {
				host := netip.MustParseAddr(ip).String()
				parts = append(parts, fmt.Sprintf("%s|11211|%s:11211|false", host, host))
			} else {
				parts = append(parts, down(i))
			}
		}
		if len(z.SlotTable.Slots) == 0 {
			parts = append(parts, down(0))
		}
	}
	return "ok " + strings.Join(parts, " ")
}

// parseAnswer is what ParsePool makes of a pool file, as parse.lua prints
// what proxy.lua makes of it: "ok" and the zones' backends, or "refused"
// and why.
func parseAnswer(content []byte) string {
	p, err := contract.ParsePool(content)
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

// randomTable is a table of n slots in random states at random addresses,
// IPv4 and IPv6 (some written long-hand), no two addresses alike (a
// Filling slot's From has one of its own).
func randomTable(r *rand.Rand, n int) v1alpha1.SlotTable {
	tab := v1alpha1.SlotTable{Version: r.Int64N(1 << 62), Slots: make([]v1alpha1.Slot, n)}
	states := []v1alpha1.SlotState{v1alpha1.SlotServing, v1alpha1.SlotServing, v1alpha1.SlotServing, v1alpha1.SlotFilling, v1alpha1.SlotNotReady, v1alpha1.SlotLeaving, v1alpha1.SlotEmpty}
	used := map[netip.Addr]bool{}
	for i := range tab.Slots {
		e := v1alpha1.Slot{Slot: int32(i), Pod: fmt.Sprintf("cache-%d", i), IP: randomAddr(r, used), State: states[r.IntN(len(states))]}
		if e.State == v1alpha1.SlotFilling {
			e.From, e.FromIP = fmt.Sprintf("cache-%d-old", i), randomAddr(r, used)
		}
		tab.Slots[i] = e
	}
	return tab
}

// randomAddr is an address not in used, which then holds it.
func randomAddr(r *rand.Rand, used map[netip.Addr]bool) string {
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
	return ip
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
			if a, err := netip.ParseAddr(e.ServedIP()); err == nil && served[a] {
				clash = true
			}
		}
		if clash {
			continue
		}
		for _, e := range tab.Slots {
			if a, err := netip.ParseAddr(e.ServedIP()); err == nil {
				served[a] = true
			}
		}
		names[name] = true
		zones = append(zones, v1alpha1.ZoneStatus{Name: name, SlotTable: tab})
	}
	return zones
}

// namedPool is a pool set a test renders.
type namedPool struct {
	name  string
	zones []v1alpha1.ZoneStatus
}

// everyPool is every kind of pool set the writer renders: named ones and
// random ones, without zones up to the 1,000 slots the proxy takes, and
// with zones up to eight.
func everyPool() []namedPool {
	r := rand.New(rand.NewPCG(19, 1))
	z := zone
	named := []namedPool{
		{"three Serving", plain(table(1767225600, "S:10.244.1.7", "S:10.244.2.3", "S:10.244.3.9"))},
		{"every state", plain(table(7, "S:10.0.0.1", "N:10.0.0.2", "L:10.0.0.3", "E", "S:10.0.0.5"))},
		{"IPv6", plain(table(8, "S:fd00::7", "S:fd00:0:0:0:0:0:0:8", "S:::ffff:10.0.0.3", "S:2001:db8:ffff:ffff:ffff:ffff:ffff:ffff"))},
		{"every slot down", plain(table(9, "N:10.0.0.1", "E", "L:10.0.0.3"))},
		{"no slot", plain(table(10))},
		{"no status yet", plain(v1alpha1.SlotTable{})},
		{"the largest version", plain(table(1<<63-1, "S:10.0.0.1"))},
		{"a Serving slot without an ip", plain(table(11, "S:10.0.0.1", "S:"))},
		{"1,000 slots", plain(randomTable(r, 1000))},
		{"1,000 slots, all down", plain(table(12, make([]string, 1000)...))},
		{"three zones of two", []v1alpha1.ZoneStatus{
			z("a", table(1767225600, "S:10.244.1.7", "S:10.244.1.8")),
			z("b", table(1767225601, "S:10.244.2.7", "S:10.244.2.8")),
			z("c", table(1767225602, "S:10.244.3.7", "S:10.244.3.8")),
		}},
		{"zones in every state", []v1alpha1.ZoneStatus{
			z("a", table(7, "S:10.0.0.1", "N:10.0.0.2", "L:10.0.0.3", "E", "S:10.0.0.5")),
			z("b", table(7, "E", "S:10.0.1.2", "S:")),
		}},
		{"zones of IPv6", []v1alpha1.ZoneStatus{z("a", table(8, "S:fd00::7", "S:::ffff:10.0.0.3")), z("b", table(8, "S:fd00:0:0:0:0:0:0:8"))}},
		{"a zone with no slot", []v1alpha1.ZoneStatus{z("a", table(9, "S:10.0.0.1")), z("b", v1alpha1.SlotTable{})}},
		{"every zone with no slot", []v1alpha1.ZoneStatus{z("a", v1alpha1.SlotTable{}), z("b", v1alpha1.SlotTable{})}},
		{"one zone", []v1alpha1.ZoneStatus{z("europe-west1-b", table(10, "S:10.0.0.1"))}},
		{"the longest zone name", []v1alpha1.ZoneStatus{z(strings.Repeat("z", v1alpha1.MaxZoneNameLen), table(11, make([]string, 3)...))}},
		{"zones named as the pools", []v1alpha1.ZoneStatus{z("nocas", table(12, "S:10.0.0.1")), z("nopool", table(12, "E")), z("main", table(12, "E"))}},
	}
	largest := namedPool{name: "the largest file: eight zones of the longest names, of 1,000 placeholders"}
	for i := range v1alpha1.MaxZones {
		name := fmt.Sprintf("%d%s", i, strings.Repeat("z", v1alpha1.MaxZoneNameLen-1))
		largest.zones = append(largest.zones, z(name, table(13, make([]string, contract.MaxSlots)...)))
	}
	named = append(named, largest)
	for i := range 200 {
		named = append(named, namedPool{fmt.Sprintf("random %d", i), plain(randomTable(r, r.IntN(40)))})
	}
	for i := range 100 {
		named = append(named, namedPool{fmt.Sprintf("random zones %d", i), randomZones(r, 1+r.IntN(v1alpha1.MaxZones), r.IntN(30))})
	}
	return named
}

// TestProxyLuaTakesEveryPool renders every kind of pool set (everyPool),
// and runs each through proxy.lua under memcached's own Lua: each is
// taken, never refused and never raising, gives routelib exactly the
// backends its tables say, a pool a zone (without zones, the one pool
// main), in slot order, and ParsePool reads it alike. Broken pools are
// refused by both, so that the harness is seen to tell.
func TestProxyLuaTakesEveryPool(t *testing.T) {
	named := everyPool()
	var contents [][]byte
	for _, n := range named {
		p, err := contract.RenderPool(n.zones)
		if err != nil {
			t.Fatalf("%s: RenderPool() = %v", n.name, err)
		}
		contents = append(contents, p.Content)
	}
	good, _ := contract.RenderPool(plain(table(5, "S:10.0.0.1", "S:10.0.0.2")))
	zoned, _ := contract.RenderPool([]v1alpha1.ZoneStatus{zone("a", table(5, "S:10.0.0.1")), zone("b", table(5, "S:10.0.0.2"))})
	broken := []struct {
		name    string
		content []byte
	}{
		{"truncated", good.Content[:len(good.Content)-len("end 2\n")]},
		{"truncated, with zones", zoned.Content[:len(zoned.Content)-len("end 2\n")]},
		{"cut after a zone line", zoned.Content[:len("version 5\nzone a\n")]},
		{"a name, not an IP", []byte("version 5\ncache-0.example:11211\nend 1\n")},
		{"a name, not an IP, in a zone", []byte("version 5\nzone a\ncache-0.example:11211\nend 1\n")},
		{"slot lines of no zone, then a zone's", []byte("version 5\n10.0.0.1:11211\nzone b\n10.0.0.2:11211\nend 2\n")},
	}
	for _, b := range broken {
		contents = append(contents, b.content)
	}
	got := runProxyLua(t, []string{"MEMCACHED_PROXY_LOCAL_ZONE=a"}, writeFiles(t, contents))
	for i, n := range named {
		if want := wantPool(n.zones); got[i].pool != want {
			t.Errorf("%s: proxy.lua made of the pool\n%s\nwant\n%s", n.name, got[i].pool, want)
		}
		if g := parseAnswer(contents[i]); g != got[i].pool {
			t.Errorf("%s: ParsePool made of the pool\n%s\nproxy.lua\n%s", n.name, g, got[i].pool)
		}
	}
	for i, b := range broken {
		if g := got[len(named)+i]; !strings.HasPrefix(g.pool, "refused ") {
			t.Errorf("%s: proxy.lua did not refuse the pool: %s", b.name, g.pool)
		}
		if _, err := contract.ParsePool(b.content); err == nil {
			t.Errorf("%s: ParsePool took the pool", b.name)
		}
	}
	t.Logf("proxy.lua took %d pools the writer rendered", len(named))
}

// TestParsePoolReadsAsProxyLua runs files that break each of proxy.lua's
// rules, with zones and without, and files at their edges, through
// proxy.lua under memcached's own Lua and through ParsePool: both take the
// same files, give routelib the same backends, and refuse the same files,
// for the reason proxy.lua logs.
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
	zoneOf := func(name string, n int) string {
		return "zone " + name + "\n" + lines(n, func(i int) string { return contract.PoolPlaceholder + " " + contract.ZoneDownLabel(name, i) })
	}
	zonePadded := func(size int) string {
		pool := "version 1\nzone a\n10.0.0.1:11211\nend 1\n"
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

		{name: "comments, blank lines and white space around zones", content: "# pool\n\nversion 3\n \tzone\t a \r\n10.0.0.1:11211\n\n# b\nzone b\n[fd00::1]:11211 one\nend 2\n", wantOK: true},
		{name: "no version line before a zone", content: "zone a\n10.0.0.1:11211\nend 1\n", wantOK: true},
		{name: "a zone of digits", content: "zone 1\n10.0.0.1:11211\nend 1\n", wantOK: true},
		{name: "a zone with dashes", content: "zone us-east-1a\n10.0.0.1:11211\nend 1\n", wantOK: true},
		{name: "a zone name of 40", content: "zone " + strings.Repeat("a", 40) + "\n10.0.0.1:11211\nend 1\n", wantOK: true},
		{name: "a placeholder's address in two zones", content: "zone a\n127.0.0.1:1 _down_a_0\nzone b\n127.0.0.1:1 _down_b_0\nend 2\n", wantOK: true},
		{name: "MaxSlots in each of two zones", content: zoneOf("a", contract.MaxSlots) + zoneOf("b", contract.MaxSlots) + fmt.Sprintf("end %d\n", 2*contract.MaxSlots), wantOK: true},
		{name: "a zone named zone", content: "zone zone\n10.0.0.1:11211\nend 1\n", wantOK: true},
		{name: "slot lines of no zone, then a zone", content: "10.0.0.1:11211\nzone a\n10.0.0.2:11211\nend 2\n"},
		{name: "slot lines of no zone, then a zone with no slot", content: "10.0.0.1:11211\nzone a\nend 1\n"},
		{name: "slot lines of no zone, then a bad zone name", content: "10.0.0.1:11211\nzone A\nend 1\n"},
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
		{name: "MaxPoolBytes with zones", content: zonePadded(contract.MaxPoolBytes), wantOK: true},
		{name: "larger than MaxPoolBytes with zones", content: zonePadded(contract.MaxPoolBytes + 1)},
	}
	contents := make([][]byte, len(tests))
	for i, tt := range tests {
		contents[i] = []byte(tt.content)
	}
	got := runProxyLua(t, nil, writeFiles(t, contents))
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, lua := parseAnswer([]byte(tt.content)), got[i].pool
			switch {
			case strings.HasPrefix(lua, "ok ") != tt.wantOK:
				t.Errorf("proxy.lua made of the pool %s, want it taken = %t", lua, tt.wantOK)
			case tt.wantOK && g != lua:
				t.Errorf("ParsePool made of the pool\n%s\nproxy.lua\n%s", g, lua)
			case !tt.wantOK && !strings.HasPrefix(g, "refused "):
				t.Errorf("ParsePool took the pool: %s; proxy.lua %s", g, lua)
			case !tt.wantOK && !strings.Contains(lua, strings.TrimPrefix(g, "refused ")):
				t.Errorf("ParsePool refused the pool with %q; proxy.lua with %q", g, lua)
			}
		})
	}
}

// TestMaxSlotsIsProxyLuas holds proxy.lua's MAX_SLOTS, MAX_BYTES,
// longest zone name and MAX_ANNOUNCE to contract.MaxSlots, MaxPoolBytes,
// v1alpha1.MaxZoneNameLen and MaxLoadedBytes, also where no Lua runs. (They are literals in
// proxy.lua: rendering them into it would change its bytes, and so every
// proxy's ConfigMap.)
func TestMaxSlotsIsProxyLuas(t *testing.T) {
	for _, c := range []struct {
		pattern string
		want    string
	}{
		{`local MAX_SLOTS <const> = (\S+)`, strconv.Itoa(contract.MaxSlots)},
		{`local MAX_BYTES <const> = 1024 \* (\S+)`, strconv.Itoa(contract.MaxPoolBytes / 1024)},
		{`#z <= (\d+) and`, strconv.Itoa(v1alpha1.MaxZoneNameLen)},
		{`local MAX_ANNOUNCE <const> = (\S+)`, strconv.Itoa(contract.MaxLoadedBytes)},
	} {
		m := regexp.MustCompile(c.pattern).FindStringSubmatch(memcached.ProxyConfig)
		if m == nil || m[1] != c.want {
			t.Errorf("proxy.lua: %s gives %q, want %s", c.pattern, m, c.want)
		}
	}
}

// TestProxyLuaRoutes records the routes proxy.lua gives routelib, by the
// pool file it reads, each file loaded twice as reloads of one proxy.
// Without zones (the zone ""), every command goes to the one pool main,
// whatever zone the proxy is told. With zones, reads fail over from the
// local zone (local_zone on the route itself, miss unset), or in no set
// order without a local zone the pool has, which it says once; gat and
// gats go to every zone and answer a hit of any; cas goes to a pool that
// is down; everything else to every zone, answering the first that is not
// an error. Before any pool, every command goes to one placeholder.
func TestProxyLuaRoutes(t *testing.T) {
	const (
		reads      = "get=failover(set_main%[1]s) gets=failover(set_main%[1]s) mg=failover(set_main%[1]s)"
		zoneRoutes = "routes cas=direct(nocas) gat=allfastest(set_main,miss=true) gats=allfastest(set_main,miss=true) " +
			reads + " default=allfastest(set_main) pool nocas=127.0.0.1|1|_down_nocas|true"
		plainRoutes = "routes default=direct(main) pool main=10.0.0.1|11211|10.0.0.1:11211|false 127.0.0.1|1|_down_1|true"
		noPool      = "routes default=direct(main) pool main=127.0.0.1|1|_down_nopool|true"
		warning     = "reads fail over in no set order"
	)
	zoned, _ := contract.RenderPool([]v1alpha1.ZoneStatus{zone("a", table(1, "S:10.0.0.1")), zone("b", table(1, "S:10.0.0.2"))})
	oneZone, _ := contract.RenderPool([]v1alpha1.ZoneStatus{zone("a", table(1, "S:10.0.0.1"))})
	unzoned, _ := contract.RenderPool(plain(table(1, "S:10.0.0.1", "N:10.0.0.2")))
	tests := []struct {
		name       string
		env        []string
		content    []byte
		wantRoutes string
		wantSaid   string // in what the first load logged, and not the second
	}{
		{name: "the local zone a", env: []string{"MEMCACHED_PROXY_LOCAL_ZONE=a"}, content: zoned.Content, wantRoutes: fmt.Sprintf(zoneRoutes, ",local_zone=a")},
		{name: "the local zone b", env: []string{"MEMCACHED_PROXY_LOCAL_ZONE=b"}, content: zoned.Content, wantRoutes: fmt.Sprintf(zoneRoutes, ",local_zone=b")},
		{name: "no local zone", env: []string{"MEMCACHED_PROXY_LOCAL_ZONE="}, content: zoned.Content, wantRoutes: fmt.Sprintf(zoneRoutes, ""), wantSaid: "MEMCACHED_PROXY_LOCAL_ZONE is not set (zones a, b): " + warning},
		{name: "a local zone the pool does not have", env: []string{"MEMCACHED_PROXY_LOCAL_ZONE=c"}, content: zoned.Content, wantRoutes: fmt.Sprintf(zoneRoutes, ""), wantSaid: "MEMCACHED_PROXY_LOCAL_ZONE=c is no zone of the pool (zones a, b): " + warning},
		{name: "one zone is still zones", env: []string{"MEMCACHED_PROXY_LOCAL_ZONE=a"}, content: oneZone.Content, wantRoutes: fmt.Sprintf(zoneRoutes, ",local_zone=a")},
		{name: "no zones", env: []string{"MEMCACHED_PROXY_LOCAL_ZONE="}, content: unzoned.Content, wantRoutes: plainRoutes, wantSaid: "pool version 1: 2 slots, 1 down"},
		{name: "no zones, in a zone's proxy", env: []string{"MEMCACHED_PROXY_LOCAL_ZONE=a"}, content: unzoned.Content, wantRoutes: plainRoutes},
		{name: "no pool yet", env: []string{"MEMCACHED_PROXY_LOCAL_ZONE=a"}, content: []byte("broken\n"), wantRoutes: noPool, wantSaid: "no pool yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := writeFiles(t, [][]byte{tt.content})
			got := runLua(t, append(tt.env, "PARSE_KEEP_STATE=1"), proxyConfig(t), files[0], files[0])
			for i, g := range got {
				if g.routes != tt.wantRoutes {
					t.Errorf("load %d: proxy.lua routes\n%s\nwant\n%s", i+1, g.routes, tt.wantRoutes)
				}
			}
			if strings.Contains(got[0].said, warning) && !strings.Contains(tt.wantSaid, warning) {
				t.Errorf("proxy.lua said %q", got[0].said)
			}
			if tt.wantSaid == "" {
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

// TestProxyLuaRoutesFollowThePoolFile reloads one proxy over the pool
// files of a Memcached that turns zones on and off: the routes follow the
// file, and a bad file keeps the routes and the pool of the last good one.
func TestProxyLuaRoutesFollowThePoolFile(t *testing.T) {
	unzoned, _ := contract.RenderPool(plain(table(1, "S:10.0.0.1", "S:10.0.0.2")))
	zoned, _ := contract.RenderPool([]v1alpha1.ZoneStatus{zone("a", table(2, "S:10.0.1.1")), zone("b", table(2, "S:10.0.2.1"))})
	steps := []struct {
		name     string
		content  []byte
		wantPool string // "" for refused
		wantZone bool   // routes over the zones' pool set
	}{
		{name: "without zones", content: unzoned.Content, wantPool: "ok [] 10.0.0.1|11211|10.0.0.1:11211|false 10.0.0.2|11211|10.0.0.2:11211|false"},
		{name: "zones on", content: zoned.Content, wantPool: "ok [a] 10.0.1.1|11211|10.0.1.1:11211|false [b] 10.0.2.1|11211|10.0.2.1:11211|false", wantZone: true},
		{name: "a bad file", content: []byte("version 3\n10.0.0.1:11211\nzone a\n10.0.0.2:11211\nend 2\n"), wantZone: true},
		{name: "zones off", content: unzoned.Content, wantPool: "ok [] 10.0.0.1|11211|10.0.0.1:11211|false 10.0.0.2|11211|10.0.0.2:11211|false"},
		{name: "another bad file", content: []byte("version 4\nzone a\nend 0\n")},
	}
	contents := make([][]byte, len(steps))
	for i, s := range steps {
		contents[i] = s.content
	}
	got := runLua(t, []string{"MEMCACHED_PROXY_LOCAL_ZONE=a", "PARSE_KEEP_STATE=1"}, append([]string{proxyConfig(t)}, writeFiles(t, contents)...)...)
	for i, s := range steps {
		g := got[i]
		switch {
		case s.wantPool == "" && !strings.HasPrefix(g.pool, "refused "):
			t.Errorf("%s: proxy.lua took the pool: %s", s.name, g.pool)
		case s.wantPool != "" && g.pool != s.wantPool:
			t.Errorf("%s: proxy.lua made of the pool\n%s\nwant\n%s", s.name, g.pool, s.wantPool)
		}
		if zoneRoutes := strings.Contains(g.routes, "set_main"); zoneRoutes != s.wantZone {
			t.Errorf("%s: proxy.lua routes %s; want routes over the zones = %t", s.name, g.routes, s.wantZone)
		}
		if s.wantPool == "" && !strings.Contains(g.said, "keeping pool version") {
			t.Errorf("%s: proxy.lua said %q, want it to keep its pool", s.name, g.said)
		}
	}
}

// TestProxyLuaAfterAnUpgrade runs, in one proxy's VM, the configuration
// an earlier operator shipped (previousPlainConfig, previousZonesConfig)
// on pools RenderPool writes now, then proxy.lua on the same pools, as an
// operator upgrade does: the new ConfigMap reaches the running proxy's
// volume, and its next reload (the earlier configuration's poll, on a new
// pool) loads proxy.lua. The earlier configuration takes what the writer
// writes now; proxy.lua, in the VM the earlier one ran in, takes the same
// pools and gives routelib the same pools and routes. Back again (the
// operator rolled back), the earlier configuration takes them still.
//
// proxy.lua keeps its state apart from the earlier configurations', so
// it does not carry their pool over: its first load in their VM reads the
// file. That load comes from the earlier configuration's poll, on a valid
// pool the agent wrote (it never writes a bad one); were the file bad by
// then, proxy.lua must refuse it, not raise (memcached would exit), and
// take the next good one.
func TestProxyLuaAfterAnUpgrade(t *testing.T) {
	p1, _ := contract.RenderPool(plain(table(1, "S:10.0.0.1", "N:10.0.0.2")))
	p2, _ := contract.RenderPool(plain(table(2, "S:10.0.0.1", "S:10.0.0.2", "S:10.0.0.3")))
	z1, _ := contract.RenderPool([]v1alpha1.ZoneStatus{zone("a", table(1, "S:10.0.1.1")), zone("b", table(1, "E"))})
	z2, _ := contract.RenderPool([]v1alpha1.ZoneStatus{zone("a", table(2, "S:10.0.1.1", "S:10.0.1.2")), zone("b", table(2, "S:10.0.2.1", "S:10.0.2.2"))})
	for _, tt := range []struct {
		name     string
		previous string
		pools    [2]*contract.Pool
	}{
		{name: "without zones", previous: previousPlainConfig, pools: [2]*contract.Pool{p1, p2}},
		{name: "with zones", previous: previousZonesConfig, pools: [2]*contract.Pool{z1, z2}},
		{name: "without zones, from the pools' own state", previous: previousPoolsConfig, pools: [2]*contract.Pool{p1, p2}},
		{name: "with zones, from the pools' own state", previous: previousPoolsConfig, pools: [2]*contract.Pool{z1, z2}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			files := writeFiles(t, [][]byte{tt.pools[0].Content, tt.pools[1].Content})
			config := proxyConfig(t)
			// earlier: 1, 2; proxy.lua: 2, 1, 2; earlier again: 1.
			got := runLua(t, []string{"MEMCACHED_PROXY_LOCAL_ZONE=a", "PARSE_KEEP_STATE=1"},
				tt.previous, files[0], files[1], config, files[1], files[0], files[1], tt.previous, files[0])
			for i, g := range got {
				if !strings.HasPrefix(g.pool, "ok ") {
					t.Errorf("load %d: refused: %s", i+1, g.pool)
				}
			}
			same := [][2]int{{1, 2}, {0, 3}, {1, 4}, {0, 5}}
			for _, s := range same {
				a, b := got[s[0]], got[s[1]]
				if a.pool != b.pool || a.routes != b.routes {
					t.Errorf("load %d and load %d of the same pool differ:\n%s\n%s\n%s\n%s", s[0]+1, s[1]+1, a.pool, a.routes, b.pool, b.routes)
				}
			}

			bad := writeFiles(t, [][]byte{[]byte("version 3\n10.0.0.1:11211\nzone a\n10.0.0.2:11211\nend 2\n")})[0]
			got = runLua(t, []string{"MEMCACHED_PROXY_LOCAL_ZONE=a", "PARSE_KEEP_STATE=1"}, tt.previous, files[0], config, bad, files[1])
			if !strings.HasPrefix(got[1].pool, "refused ") || !strings.HasPrefix(got[2].pool, "ok ") {
				t.Errorf("proxy.lua, after the earlier configuration, on a bad file then a good one: %s, then %s; want it refused, then taken", got[1].pool, got[2].pool)
			}
		})
	}
}
