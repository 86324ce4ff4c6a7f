package e2e

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// tcpSocket is one line of /proc/net/tcp or tcp6.
type tcpSocket struct {
	local, remote net.IP
	localPort     int
	state         string // 0A listening, 01 established
}

// checkLoopbackOnly fails t unless every TCP socket of the processes (by
// name) listens on 127.0.0.1 and every connection is to 127.0.0.1. It reads
// /proc: the sockets of each process's descriptors, looked up in the
// kernel's TCP tables.
func checkLoopbackOnly(t *testing.T, pids map[string]int) {
	t.Helper()
	sockets := map[string]tcpSocket{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if err := readTCPTable(table, sockets); err != nil {
			t.Fatal(err)
		}
	}
	for name, pid := range pids {
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			t.Errorf("%s (pid %d): %v", name, pid, err)
			continue
		}
		var listening []string
		connections := 0
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name()))
			if err != nil || !strings.HasPrefix(link, "socket:[") {
				continue
			}
			s, ok := sockets[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")]
			if !ok {
				continue // not TCP
			}
			switch s.state {
			case "0A":
				listening = append(listening, net.JoinHostPort(s.local.String(), strconv.Itoa(s.localPort)))
				if !s.local.Equal(net.IPv4(127, 0, 0, 1)) {
					t.Errorf("%s listens on %s, want 127.0.0.1 only", name, s.local)
				}
			case "01":
				connections++
				if !s.remote.Equal(net.IPv4(127, 0, 0, 1)) {
					t.Errorf("%s has a connection to %s, want 127.0.0.1 only", name, s.remote)
				}
			}
		}
		t.Logf("%s: listens on %v; %d connections, all checked", name, listening, connections)
	}
}

// readTCPTable adds the sockets of a /proc/net/tcp* table, by inode.
func readTCPTable(path string, into map[string]tcpSocket) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 {
			continue
		}
		local, port, err := parseProcAddr(fields[1])
		if err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		remote, _, err := parseProcAddr(fields[2])
		if err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		into[fields[9]] = tcpSocket{local: local, remote: remote, localPort: port, state: fields[3]}
	}
	return sc.Err()
}

// parseProcAddr parses an address of /proc/net/tcp*: the IP in hex, in
// 32-bit words of host (little-endian) order, a colon, the port in hex.
func parseProcAddr(s string) (net.IP, int, error) {
	ipHex, portHex, ok := strings.Cut(s, ":")
	if !ok {
		return nil, 0, fmt.Errorf("bad address %q", s)
	}
	b, err := hex.DecodeString(ipHex)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		return nil, 0, fmt.Errorf("bad address %q", s)
	}
	for i := 0; i < len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	port, err := strconv.ParseInt(portHex, 16, 32)
	if err != nil {
		return nil, 0, fmt.Errorf("bad port in %q", s)
	}
	return net.IP(b), int(port), nil
}
