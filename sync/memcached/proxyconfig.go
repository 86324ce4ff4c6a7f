package memcached

import (
	_ "embed"
	"fmt"
	"strings"
)

// proxyTemplate is the source of both route configurations: proxy.lua
// (ProxyConfig, a Memcached without zones) and ProxyZonesConfig. They
// share their pool file reader, the part that must never raise, so it is
// written once. A line "--@@ zones" starts lines only ProxyZonesConfig
// has, "--@@ plain" lines only proxy.lua has, "--@@ end" ends either, and
// one of the two in the other's block ends it and starts its own (an
// else); every other line is in both, and the marker lines in neither.
//
// proxy.lua is the template rendered without zones, kept as a file so
// that proxy.go embeds it as it always has and a change to the template
// that changes it shows in review (TestProxyLuaIsTheTemplate holds the
// two equal; with -update it rewrites proxy.lua).
//
//go:embed proxy.lua.tmpl
var proxyTemplate string

// ProxyZonesConfig is the proxy's route configuration for a Memcached
// with zones (spec.zones), the config.lua of its proxies' ConfigMap: the
// same bytes for every zone's proxies, each told its zone by the
// environment (ProxyLocalZoneEnv). It reads the pool file of every
// zone's slot table (contract.RenderZonePool) as proxy.lua reads one
// table's, serves reads from the local zone, failing over to the others
// on an error only, and writes to every zone. Its header says what each
// command does, and why.
var ProxyZonesConfig = mustRenderProxyLua(proxyTemplate, true)

// ProxyLocalZoneEnv names, in the proxy container's environment, the zone
// the proxy runs in: its reads go there first.
const ProxyLocalZoneEnv = "MEMCACHED_PROXY_LOCAL_ZONE"

// The template's marker lines.
const (
	markZones = "--@@ zones"
	markPlain = "--@@ plain"
	markEnd   = "--@@ end"
)

// renderProxyLua renders the template with or without zones. It refuses a
// block's marker inside a block of its own kind, an end outside a block, a
// block left open and any other line starting "--@@".
func renderProxyLua(tmpl string, zones bool) (string, error) {
	var b strings.Builder
	b.Grow(len(tmpl))
	block := "" // the open block's marker
	lines := strings.SplitAfter(tmpl, "\n")
	for i, line := range lines {
		mark := strings.TrimRight(line, "\n")
		switch {
		case mark == markZones || mark == markPlain:
			if block == mark {
				return "", fmt.Errorf("line %d: %s inside %s", i+1, mark, block)
			}
			block = mark
		case mark == markEnd:
			if block == "" {
				return "", fmt.Errorf("line %d: %s outside a block", i+1, mark)
			}
			block = ""
		case strings.HasPrefix(mark, "--@@"):
			return "", fmt.Errorf("line %d: unknown marker %q", i+1, mark)
		case block == "" || (block == markZones) == zones:
			b.WriteString(line)
		}
	}
	if block != "" {
		return "", fmt.Errorf("%s never ends", block)
	}
	return b.String(), nil
}

func mustRenderProxyLua(tmpl string, zones bool) string {
	s, err := renderProxyLua(tmpl, zones)
	if err != nil {
		panic("memcached: proxy.lua.tmpl: " + err.Error())
	}
	return s
}
