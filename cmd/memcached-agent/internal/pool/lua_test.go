package pool

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/memcached"
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
	lua := os.Getenv(EnvLua)
	if _, err := os.Stat(lua); lua == "" || err != nil {
		msg := fmt.Sprintf("no memcached Lua interpreter (%s=%q): run make test, or make memcached-lua", EnvLua, lua)
		if os.Getenv("CI") != "" {
			t.Fatal(msg + " (CI is set, so this is an error)")
		}
		t.Skip(msg)
	}
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
// the table itself (not from Render): one backend a slot, in slot order, a
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
		p, err := Render(n.table)
		if err != nil {
			t.Fatalf("%s: Render() = %v", n.name, err)
		}
		f := filepath.Join(dir, fmt.Sprintf("pool-%d", i))
		if err := os.WriteFile(f, p.Content, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	good, _ := Render(table(5, "S:10.0.0.1", "S:10.0.0.2"))
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
	}
	for i, b := range broken {
		if g := got[len(named)+i]; !strings.HasPrefix(g, "refused ") {
			t.Errorf("%s: proxy.lua did not refuse the pool: %s", b.name, g)
		}
	}
	t.Logf("proxy.lua took %d pools the writer rendered", len(named))
}
