package contract_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
)

// tablesOf is what a pool set's tables line says: each zone's version,
// in the order of zones, worked out from the zones (not from TablesLine).
func tablesOf(zones []v1alpha1.ZoneStatus) []contract.ZoneVersion {
	out := []contract.ZoneVersion{}
	for _, z := range zones {
		out = append(out, contract.ZoneVersion{Zone: z.Name, Version: z.SlotTable.Version})
	}
	return out
}

// loaded is what of a cron's mcp.log lines (luaAnswer.announced) are
// announcements of a loaded pool, joined by " | ": the cron also sends
// there what it logs on stderr.
func loaded(announced string) string {
	var out []string
	for _, l := range strings.Split(announced, " | ") {
		if strings.HasPrefix(l, contract.LoadedPrefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, " | ")
}

// longestNames is v1alpha1.MaxZones zones of the longest names, each of
// a table of version.
func longestNames(version int64) []contract.ZoneVersion {
	var out []contract.ZoneVersion
	for i := range v1alpha1.MaxZones {
		out = append(out, contract.ZoneVersion{Zone: fmt.Sprintf("%d%s", i, strings.Repeat("z", v1alpha1.MaxZoneNameLen-1)), Version: version})
	}
	return out
}

// TestLoadedMessage checks the announcement's bytes, that ParseLoaded
// reads back what LoadedMessage writes, and that no part of one cut
// short (as memcached cuts a user log line) is taken.
func TestLoadedMessage(t *testing.T) {
	tests := []struct {
		name   string
		tables []contract.ZoneVersion
		want   string // "" for not checked
	}{
		{name: "versions unknown", tables: []contract.ZoneVersion{}, want: "memcached-proxy-pool: loaded (0 tables)"},
		{name: "without zones", tables: []contract.ZoneVersion{{Version: 1767225600000}}, want: "memcached-proxy-pool: loaded =1767225600000 (1 tables)"},
		{name: "zones, in the pool's order", tables: []contract.ZoneVersion{{Zone: "b", Version: 7}, {Zone: "a", Version: 0}}, want: "memcached-proxy-pool: loaded b=7 a=0 (2 tables)"},
		{name: "the largest version", tables: []contract.ZoneVersion{{Version: 1<<63 - 1}}},
		{name: "eight zones of the longest names, versions of UnixMilli", tables: longestNames(1767225600000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := contract.LoadedMessage(tt.tables)
			if tt.want != "" && msg != tt.want {
				t.Errorf("LoadedMessage() = %q, want %q", msg, tt.want)
			}
			if len(msg) > contract.MaxLoadedBytes {
				t.Fatalf("LoadedMessage() is %d bytes, over %d", len(msg), contract.MaxLoadedBytes)
			}
			got, err := contract.ParseLoaded(msg)
			if err != nil || !reflect.DeepEqual(got, tt.tables) {
				t.Errorf("ParseLoaded(%q) = %v, %v; want %v", msg, got, err, tt.tables)
			}
			for i := range len(msg) {
				if got, err := contract.ParseLoaded(msg[:i]); err == nil {
					t.Errorf("ParseLoaded(%q), cut short, = %v", msg[:i], got)
				}
			}
		})
	}
}

// TestParseLoadedRefuses checks what ParseLoaded does not take: anything
// LoadedMessage does not write.
func TestParseLoadedRefuses(t *testing.T) {
	const p = "memcached-proxy-pool: loaded "
	for _, msg := range []string{
		"",
		"memcached-proxy-pool: pool version 5: 2 slots, 0 down",
		"memcached-proxy-pool: loaded",
		p + "(0 tables",
		p + "a=1 b=2",
		p + "a=1 b=2 (3 tables)",
		p + "a=1 b=2 (1 tables)",
		p + "a=1 b=2 (02 tables)",
		p + "a=1 a=2 (2 tables)",
		p + "a=01 (1 tables)",
		p + "a=-1 (1 tables)",
		p + "a=+1 (1 tables)",
		p + "a=9223372036854775808 (1 tables)",
		p + "A=1 (1 tables)",
		p + "a-=1 (1 tables)",
		p + strings.Repeat("a", v1alpha1.MaxZoneNameLen+1) + "=1 (1 tables)",
		p + "a=1  b=2 (2 tables)",
		p + "a=1 b=2 (2 tables) ",
		p + "a=1\tb=2 (2 tables)",
		p + "=1 a=2 (2 tables)",
		p + "a (1 tables)",
		p + "a=1=2 (1 tables)",
		"memcached-proxy-pool: loaded(0 tables)",
		"x" + p + "(0 tables)",
		contract.LoadedMessage(longestNames(1<<63 - 1)),
	} {
		if got, err := contract.ParseLoaded(msg); err == nil {
			t.Errorf("ParseLoaded(%q) = %v, want it refused", msg, got)
		}
	}
}

// TestProxyLuaAnnouncesWhatItLoaded runs every kind of pool the writer
// renders (everyPool) through proxy.lua under memcached's own Lua, its
// cron run once after the load: it announces each pool's tables as
// LoadedMessage writes them, which ParseLoaded reads back as the zones'
// versions, in the order of zones, and ParsePool reads the tables line
// alike; an announcement too long for a user log line is not sent, and
// said. Before any pool (a broken file, no file), nothing is announced.
func TestProxyLuaAnnouncesWhatItLoaded(t *testing.T) {
	named := everyPool()
	named = append(named, namedPool{name: "eight zones of the longest names and the largest versions"})
	for _, zv := range longestNames(1<<63 - 1) {
		named[len(named)-1].zones = append(named[len(named)-1].zones, zone(zv.Zone, table(zv.Version, "S:")))
	}
	var contents [][]byte
	for _, n := range named {
		p, err := contract.RenderPool(n.zones)
		if err != nil {
			t.Fatalf("%s: RenderPool() = %v", n.name, err)
		}
		contents = append(contents, p.Content)
	}
	contents = append(contents, []byte("version 5\n# tables =5\n10.0.0.1:11211\n"), nil)
	files := writeFiles(t, contents)
	files[len(files)-1] += ".missing"
	got := runProxyLua(t, []string{"MEMCACHED_PROXY_LOCAL_ZONE=a", "PARSE_RUN_CRON=1"}, files)
	tooLong := 0
	for i, n := range named {
		want := tablesOf(n.zones)
		msg := contract.LoadedMessage(want)
		if len(msg) > contract.MaxLoadedBytes {
			tooLong++
			if loaded(got[i].announced) != "" || !strings.Contains(got[i].announced, "memcached-proxy-pool: cannot announce the loaded pool") {
				t.Errorf("%s: proxy.lua announced %q, want it to say the announcement is too long", n.name, got[i].announced)
			}
			continue
		}
		if loaded(got[i].announced) != msg {
			t.Errorf("%s: proxy.lua announced\n%q\nwant\n%q", n.name, got[i].announced, msg)
		}
		if tables, err := contract.ParseLoaded(loaded(got[i].announced)); err != nil || !reflect.DeepEqual(tables, want) {
			t.Errorf("%s: ParseLoaded(proxy.lua's announcement) = %v, %v; want %v", n.name, tables, err, want)
		}
		if p, err := contract.ParsePool(contents[i]); err != nil || !reflect.DeepEqual(p.Tables, want) {
			t.Errorf("%s: ParsePool() reads the tables %v (%v), want %v", n.name, p.Tables, err, want)
		}
	}
	if tooLong == 0 {
		t.Errorf("no pool's announcement was too long, not even the one made so")
	}
	t.Logf("proxy.lua announced %d pools; %d announcements were too long", len(named)-tooLong, tooLong)
	for _, g := range got[len(named):] {
		if loaded(g.announced) != "" {
			t.Errorf("proxy.lua with no pool (%s) announced %q, want nothing", g.pool, g.announced)
		}
	}
}

// TestProxyLuaReadsTheTablesLine runs pool files with tables lines at
// and past the edges of proxy.lua's rules through proxy.lua (its cron
// run once after the load) and through ParsePool: a pool is taken
// whatever its tables line, proxy.lua announces the tables it takes, or
// "(0 tables)", and ParsePool reads the same tables, or none.
func TestProxyLuaReadsTheTablesLine(t *testing.T) {
	plainPool := func(tables string) string { return "version 5\n" + tables + "10.0.0.1:11211\nend 1\n" }
	zonedPool := func(tables string) string {
		return "version 5\n" + tables + "zone a\n10.0.0.1:11211\nzone b\n10.0.0.2:11211\nend 2\n"
	}
	v := func(zone string, version int64) contract.ZoneVersion {
		return contract.ZoneVersion{Zone: zone, Version: version}
	}
	tests := []struct {
		name    string
		content string
		want    []contract.ZoneVersion // nil: no tables
	}{
		{name: "no tables line", content: plainPool("")},
		{name: "without zones", content: plainPool("# tables =5\n"), want: []contract.ZoneVersion{v("", 5)}},
		{name: "no space after #", content: plainPool("#tables =5\n"), want: []contract.ZoneVersion{v("", 5)}},
		{name: "Lua's white space", content: plainPool("#\ttables \v =5 \r\n"), want: []contract.ZoneVersion{v("", 5)}},
		{name: "after the end line", content: plainPool("") + "# tables =5\n", want: []contract.ZoneVersion{v("", 5)}},
		{name: "version 0", content: plainPool("# tables =0\n"), want: []contract.ZoneVersion{v("", 0)}},
		{name: "the largest version", content: plainPool("# tables =9223372036854775807\n"), want: []contract.ZoneVersion{v("", 1<<63-1)}},
		{name: "a bare tables comment is no tables line", content: plainPool("# tables\n# tables =5\n"), want: []contract.ZoneVersion{v("", 5)}},
		{name: "two tables lines", content: plainPool("# tables =5\n# tables =5\n")},
		{name: "tables: is no tables line", content: plainPool("# tables: =5\n")},
		{name: "a leading zero", content: plainPool("# tables =05\n")},
		{name: "past int64", content: plainPool("# tables =9223372036854775808\n")},
		{name: "a sign", content: plainPool("# tables =+5\n")},
		{name: "a zone the pool does not have", content: plainPool("# tables a=5\n")},
		{name: "the zone twice", content: plainPool("# tables =5 =6\n")},
		{name: "a field that is no table", content: plainPool("# tables =5 x\n")},
		{name: "zones", content: zonedPool("# tables a=1 b=2\n"), want: []contract.ZoneVersion{v("a", 1), v("b", 2)}},
		{name: "zones in another order are read in the pool's", content: zonedPool("# tables b=2 a=1\n"), want: []contract.ZoneVersion{v("a", 1), v("b", 2)}},
		{name: "a zone missing", content: zonedPool("# tables a=1\n")},
		{name: "a zone too many", content: zonedPool("# tables a=1 b=2 c=3\n")},
		{name: "a zone twice", content: zonedPool("# tables a=1 b=2 a=3\n")},
		{name: "a zone in upper case", content: zonedPool("# tables a=1 B=2\n")},
		{name: "the zone \"\" in a pool of zones", content: zonedPool("# tables a=1 b=2 =3\n")},
	}
	var contents [][]byte
	for _, tt := range tests {
		contents = append(contents, []byte(tt.content))
	}
	got := runProxyLua(t, []string{"MEMCACHED_PROXY_LOCAL_ZONE=a", "PARSE_RUN_CRON=1"}, writeFiles(t, contents))
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.HasPrefix(got[i].pool, "ok ") {
				t.Fatalf("proxy.lua did not take the pool: %s", got[i].pool)
			}
			want := tt.want
			if want == nil {
				want = []contract.ZoneVersion{}
			}
			if msg := contract.LoadedMessage(want); loaded(got[i].announced) != msg {
				t.Errorf("proxy.lua announced %q, want %q", got[i].announced, msg)
			}
			p, err := contract.ParsePool([]byte(tt.content))
			if err != nil || !reflect.DeepEqual(p.Tables, tt.want) {
				t.Errorf("ParsePool() reads the tables %#v (%v), want %#v", p.Tables, err, tt.want)
			}
		})
	}
}

// TestProxyLuaAnnouncesAfterAnUpgrade loads proxy.lua where an earlier
// configuration ran, as an operator upgrade does (TestProxyLuaAfterAnUpgrade),
// on a bad file then a good one. After the configuration before #40,
// whose pool it inherits (the same global), it announces that pool as one
// whose versions it does not know, then the good pool's; after the ones
// before it, whose state it does not read, it has no pool to announce
// until the good one. The earlier configurations announce nothing.
func TestProxyLuaAnnouncesAfterAnUpgrade(t *testing.T) {
	p1, _ := contract.RenderPool(plain(table(1, "S:10.0.0.1")))
	p2, _ := contract.RenderPool(plain(table(2, "S:10.0.0.1", "S:10.0.0.2")))
	files := writeFiles(t, [][]byte{p1.Content, []byte("version 3\nbroken\nend 1\n"), p2.Content})
	p2Loaded := contract.LoadedMessage([]contract.ZoneVersion{{Version: 2}})
	for _, tt := range []struct {
		name     string
		previous string
		wantBad  string // what proxy.lua announces on the bad file
	}{
		{name: "before #40", previous: previousPoolsConfig, wantBad: contract.LoadedMessage([]contract.ZoneVersion{})},
		{name: "before zones were read from the file", previous: previousPlainConfig, wantBad: ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := runLua(t, []string{"MEMCACHED_PROXY_LOCAL_ZONE=a", "PARSE_KEEP_STATE=1", "PARSE_RUN_CRON=1"},
				tt.previous, files[0], proxyConfig(t), files[1], files[2])
			if loaded(got[0].announced) != "" {
				t.Errorf("the earlier configuration announced %q", got[0].announced)
			}
			if loaded(got[1].announced) != tt.wantBad {
				t.Errorf("proxy.lua on a bad file announced %q, want %q", got[1].announced, tt.wantBad)
			}
			if loaded(got[2].announced) != p2Loaded {
				t.Errorf("proxy.lua on the next good file announced %q, want %q", got[2].announced, p2Loaded)
			}
		})
	}
}
