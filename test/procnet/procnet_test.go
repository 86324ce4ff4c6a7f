package procnet

import (
	"net"
	"os"
	"runtime"
	"slices"
	"testing"
)

// TestParseAddr checks the reading of /proc/net/tcp addresses the end-to-end
// suite and make down rely on.
func TestParseAddr(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		wantIP   net.IP
		wantPort int
	}{
		{"IPv4 loopback", "0100007F:1F90", net.IPv4(127, 0, 0, 1), 8080},
		{"IPv4 any", "00000000:0016", net.IPv4(0, 0, 0, 0), 22},
		{"IPv4-mapped IPv6", "0000000000000000FFFF00000100007F:2AF8", net.IPv4(127, 0, 0, 1), 11000},
		{"IPv6 loopback", "00000000000000000000000001000000:0050", net.IPv6loopback, 80},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ip, port, err := ParseAddr(tt.in)
			if err != nil || !ip.Equal(tt.wantIP) || port != tt.wantPort {
				t.Errorf("ParseAddr(%q) = %v, %d, %v; want %v, %d, nil", tt.in, ip, port, err, tt.wantIP, tt.wantPort)
			}
		})
	}
	if _, _, err := ParseAddr("nonsense"); err == nil {
		t.Error(`ParseAddr("nonsense") = nil error, want one`)
	}
}

// TestListeningAndOwners listens on loopback and finds that socket as this
// process's, and this process as its owner.
func TestListeningAndOwners(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs Linux's /proc")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	got, err := Listening(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(got, func(s Socket) bool { return s.LocalPort == port })
	if i < 0 {
		l.Close()
		t.Fatalf("Listening(self) = %v, want a socket on port %d", got, port)
	}
	if s := got[i]; !s.Local.Equal(net.IPv4(127, 0, 0, 1)) || !s.Listening() {
		t.Errorf("socket on port %d = %+v, want listening on 127.0.0.1", port, s)
	}
	owners, err := Owners([]string{got[i].Inode})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(owners[got[i].Inode], os.Getpid()) {
		t.Errorf("Owners(%s) = %v, want this process, %d", got[i].Inode, owners, os.Getpid())
	}
	l.Close()
	sockets, err := Sockets()
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := sockets[got[i].Inode]; ok && s.Listening() {
		t.Errorf("after Close the socket on port %d still listens", port)
	}
	if !Running(os.Getpid()) {
		t.Error("Running(self) = false")
	}
}
