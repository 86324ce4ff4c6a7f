package memcached

import (
	"flag"
	"os"
	"strings"
	"testing"
)

// TestProxyLuaIsTheTemplate holds proxy.lua, the configuration of every
// Memcached without zones, to the template rendered without zones, byte
// for byte: a proxy's ConfigMap, and the hash that rolls its Pods, change
// only when proxy.lua does. With -update it rewrites proxy.lua from the
// template.
func TestProxyLuaIsTheTemplate(t *testing.T) {
	got, err := renderProxyLua(proxyTemplate, false)
	if err != nil {
		t.Fatal(err)
	}
	if f := flag.Lookup("update"); f != nil && f.Value.String() == "true" {
		if err := os.WriteFile("proxy.lua", []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got != ProxyConfig {
		t.Errorf("proxy.lua.tmpl without zones renders %d bytes that are not proxy.lua's %d (go test -run TestProxyLuaIsTheTemplate -update rewrites proxy.lua)", len(got), len(ProxyConfig))
	}
	if strings.Contains(ProxyZonesConfig, "--@@") || strings.Contains(ProxyConfig, "--@@") {
		t.Errorf("a marker line is left in a rendering")
	}
}

// TestRenderProxyLua checks the template's markers on small templates.
func TestRenderProxyLua(t *testing.T) {
	tests := []struct {
		name      string
		tmpl      string
		wantPlain string
		wantZones string
		wantErr   string
	}{
		{name: "no marker", tmpl: "a\nb\n", wantPlain: "a\nb\n", wantZones: "a\nb\n"},
		{name: "a block inside one of its kind", tmpl: "a\n--@@ plain\np\n--@@ plain\n", wantErr: "inside"},
		{name: "a block and its else", tmpl: "a\n--@@ zones\nz\n--@@ plain\np\n--@@ end\nb\n", wantPlain: "a\np\nb\n", wantZones: "a\nz\nb\n"},
		{name: "a block of each", tmpl: "a\n--@@ plain\np\n--@@ end\n--@@ zones\nz1\nz2\n--@@ end\nb", wantPlain: "a\np\nb", wantZones: "a\nz1\nz2\nb"},
		{name: "an end outside a block", tmpl: "a\n--@@ end\n", wantErr: "outside"},
		{name: "a block never ended", tmpl: "--@@ zones\nz\n", wantErr: "never ends"},
		{name: "an unknown marker", tmpl: "--@@ zone\n", wantErr: "unknown marker"},
		{name: "a marker with text after it is unknown", tmpl: "--@@ zones x\n", wantErr: "unknown marker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plain, err := renderProxyLua(tt.tmpl, false)
			zones, zerr := renderProxyLua(tt.tmpl, true)
			if tt.wantErr != "" {
				if err == nil || zerr == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("renderProxyLua() = %v, %v; want an error naming %q", err, zerr, tt.wantErr)
				}
				return
			}
			if err != nil || zerr != nil {
				t.Fatalf("renderProxyLua() = %v, %v", err, zerr)
			}
			if plain != tt.wantPlain || zones != tt.wantZones {
				t.Errorf("renderProxyLua() = %q without zones, %q with; want %q, %q", plain, zones, tt.wantPlain, tt.wantZones)
			}
		})
	}
}
