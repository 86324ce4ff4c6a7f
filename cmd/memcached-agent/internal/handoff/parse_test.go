package handoff

import (
	"testing"
	"time"
)

// TestRemainingTTL turns mg's t into ms's T.
func TestRemainingTTL(t *testing.T) {
	now := time.Unix(1767225600, 0)
	tests := []struct {
		name     string
		t        string
		wantTTL  int64
		wantLive bool
	}{
		{name: "no expiry", t: "-1", wantTTL: 0, wantLive: true},
		{name: "a second left", t: "1", wantTTL: 1, wantLive: true},
		{name: "30 days, still relative", t: "2592000", wantTTL: 2592000, wantLive: true},
		{name: "over 30 days, a Unix time", t: "2592001", wantTTL: 1767225600 + 2592001, wantLive: true},
		{name: "nothing left", t: "0", wantLive: false},
		{name: "negative", t: "-5", wantLive: false},
		{name: "not a number", t: "x", wantLive: false},
		{name: "beyond 32 bits", t: "4294967295", wantLive: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ttl, live := remainingTTL([]byte(tt.t), now)
			if ttl != tt.wantTTL || live != tt.wantLive {
				t.Errorf("remainingTTL(%q) = %d, %v; want %d, %v", tt.t, ttl, live, tt.wantTTL, tt.wantLive)
			}
		})
	}
}

// TestParseDumpLine reads mgdump's lines and tells the operator's keys.
func TestParseDumpLine(t *testing.T) {
	tests := []struct {
		name         string
		line         string
		want         dumpKey
		wantErr      bool
		wantReserved bool
	}{
		{name: "text key", line: "mg foo", want: dumpKey{key: "foo"}},
		{name: "binary key", line: "mg AP8= b", want: dumpKey{key: "AP8=", binary: true}},
		{name: "reserved", line: "mg __memcached-operator/handoff/lock", want: dumpKey{key: "__memcached-operator/handoff/lock"}, wantReserved: true},
		{name: "reserved, binary", line: "mg X19tZW1jYWNoZWQtb3BlcmF0b3IveA== b", want: dumpKey{key: "X19tZW1jYWNoZWQtb3BlcmF0b3IveA==", binary: true}, wantReserved: true},
		{name: "the prefix, not at the start", line: "mg a__memcached-operator/x", want: dumpKey{key: "a__memcached-operator/x"}},
		{name: "no key", line: "mg ", wantErr: true},
		{name: "an unknown flag", line: "mg foo x", wantErr: true},
		{name: "two spaces", line: "mg foo  b", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseDumpLine([]byte(tt.line))
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("parseDumpLine(%q) = %+v, %v; want %+v, error %v", tt.line, got, err, tt.want, tt.wantErr)
			}
			if err == nil && got.reserved() != tt.wantReserved {
				t.Errorf("reserved() = %v, want %v", got.reserved(), tt.wantReserved)
			}
		})
	}
}

// TestTTLToken rounds a lock's TTL up to whole seconds, at least one.
func TestTTLToken(t *testing.T) {
	for d, want := range map[time.Duration]string{time.Millisecond: "T1", time.Second: "T1", 1500 * time.Millisecond: "T2", 15 * time.Second: "T15"} {
		if got := ttlToken(d); got != want {
			t.Errorf("ttlToken(%s) = %s, want %s", d, got, want)
		}
	}
}
