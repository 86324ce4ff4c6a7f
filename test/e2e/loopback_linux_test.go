package e2e

import (
	"net"
	"strconv"
	"testing"

	"github.com/example/memcached-operator/test/procnet"
)

// checkLoopbackOnly fails t unless every TCP socket of the processes (by
// name) listens on 127.0.0.1 and every connection is to 127.0.0.1. It reads
// /proc: the sockets of each process's descriptors, looked up in the
// kernel's TCP tables.
func checkLoopbackOnly(t *testing.T, pids map[string]int) {
	t.Helper()
	sockets, err := procnet.Sockets()
	if err != nil {
		t.Fatal(err)
	}
	for name, pid := range pids {
		inodes, err := procnet.SocketInodes(pid)
		if err != nil {
			t.Errorf("%s (pid %d): %v", name, pid, err)
			continue
		}
		var listening []string
		connections := 0
		for _, ino := range inodes {
			s, ok := sockets[ino]
			if !ok {
				continue // not TCP
			}
			switch {
			case s.Listening():
				listening = append(listening, net.JoinHostPort(s.Local.String(), strconv.Itoa(s.LocalPort)))
				if !s.Local.Equal(net.IPv4(127, 0, 0, 1)) {
					t.Errorf("%s listens on %s, want 127.0.0.1 only", name, s.Local)
				}
			case s.Established():
				connections++
				if !s.Remote.Equal(net.IPv4(127, 0, 0, 1)) {
					t.Errorf("%s has a connection to %s, want 127.0.0.1 only", name, s.Remote)
				}
			}
		}
		t.Logf("%s: listens on %v; %d connections, all checked", name, listening, connections)
	}
}
