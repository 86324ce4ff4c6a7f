package contract

import (
	"reflect"
	"testing"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
)

func TestProxyReportKey(t *testing.T) {
	key := ProxyReportKey("cache-proxy-7d9f-x2k")
	got, ok := ParseProxyReportKey(key)
	if !ok || got != "cache-proxy-7d9f-x2k" {
		t.Errorf("ParseProxyReportKey(%q) = %q, %v; want the Pod back", key, got, ok)
	}
	if _, ok := ParseReportKey(key); ok {
		t.Errorf("ParseReportKey(%q) takes a proxy's key for a hand-off's", key)
	}
	for _, h := range []v1alpha1.Handoff{{Pod: "p"}, {Pod: "proxy"}} {
		if _, ok := ParseProxyReportKey(ReportKey(h)); ok {
			t.Errorf("ParseProxyReportKey takes hand-off key %q for a proxy's", ReportKey(h))
		}
	}
	if _, ok := ParseProxyReportKey(ProxyReportKey("")); ok {
		t.Errorf("a key with no Pod is taken")
	}
}

func TestProxyReport(t *testing.T) {
	tests := []struct {
		name, raw string
		want      ProxyReport
		wantErr   bool
	}{
		{name: "no zones", raw: `{"loaded":{"":1767225600123}}`, want: ProxyReport{Loaded: map[string]int64{"": 1767225600123}}},
		{name: "zones", raw: `{"loaded":{"a":5,"b":7}}`, want: ProxyReport{Loaded: map[string]int64{"a": 5, "b": 7}}},
		{name: "nothing loaded", raw: `{"loaded":{}}`, want: ProxyReport{Loaded: map[string]int64{}}},
		{name: "negative", raw: `{"loaded":{"":-1}}`, wantErr: true},
		{name: "not JSON", raw: `loaded`, wantErr: true},
		{name: "a version that is text", raw: `{"loaded":{"":"7"}}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeProxyReport(tt.raw)
			if (err != nil) != tt.wantErr {
				t.Fatalf("DecodeProxyReport(%s) error = %v, want error %v", tt.raw, err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("DecodeProxyReport(%s) = %+v, want %+v", tt.raw, got, tt.want)
			}
			if again := got.Encode(); again != tt.raw {
				t.Errorf("Encode() = %s, want %s back", again, tt.raw)
			}
		})
	}
}
