package e2e

import (
	"net"
	"testing"
)

// TestParseProcAddr checks the reading of /proc/net/tcp addresses that
// TestLoopbackOnly relies on.
func TestParseProcAddr(t *testing.T) {
	tests := []struct {
		in       string
		wantIP   net.IP
		wantPort int
	}{
		{"0100007F:1F90", net.IPv4(127, 0, 0, 1), 8080},
		{"00000000:0016", net.IPv4(0, 0, 0, 0), 22},
		{"0000000000000000FFFF00000100007F:2AF8", net.IPv4(127, 0, 0, 1), 11000},
		{"00000000000000000000000001000000:0050", net.IPv6loopback, 80},
	}
	for _, tt := range tests {
		ip, port, err := parseProcAddr(tt.in)
		if err != nil || !ip.Equal(tt.wantIP) || port != tt.wantPort {
			t.Errorf("parseProcAddr(%q) = %v, %d, %v; want %v, %d, nil", tt.in, ip, port, err, tt.wantIP, tt.wantPort)
		}
	}
	if _, _, err := parseProcAddr("nonsense"); err == nil {
		t.Error(`parseProcAddr("nonsense") = nil error, want one`)
	}
}
