// Package procnet reads which TCP sockets processes hold from Linux's
// /proc: the kernel's tables (/proc/net/tcp and tcp6) and each process's
// descriptors (/proc/PID/fd). The end-to-end suite checks with it that
// everything stays on 127.0.0.1, and make down and its test that nothing
// the playground started still listens. Elsewhere than on Linux its
// functions return errors.
package procnet

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Socket is one line of /proc/net/tcp or tcp6.
type Socket struct {
	Local, Remote         net.IP
	LocalPort, RemotePort int
	// State is the kernel's, in hex: 0A listening, 01 established.
	State string
	// Inode identifies the socket in /proc/PID/fd (socket:[INODE]).
	Inode string
}

// Listening tells whether the socket listens.
func (s Socket) Listening() bool { return s.State == "0A" }

// Established tells whether the socket is a connection.
func (s Socket) Established() bool { return s.State == "01" }

// Sockets returns every TCP socket of the machine's network namespace, IPv4
// and IPv6, by inode.
func Sockets() (map[string]Socket, error) {
	sockets := map[string]Socket{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if err := readTable(table, sockets); err != nil {
			return nil, err
		}
	}
	return sockets, nil
}

// readTable adds the sockets of a /proc/net/tcp* table, by inode.
func readTable(path string, into map[string]Socket) error {
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
		local, port, err := ParseAddr(fields[1])
		if err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		remote, remotePort, err := ParseAddr(fields[2])
		if err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		into[fields[9]] = Socket{Local: local, Remote: remote, LocalPort: port, RemotePort: remotePort, State: fields[3], Inode: fields[9]}
	}
	return sc.Err()
}

// ParseAddr parses an address of /proc/net/tcp*: the IP in hex, in 32-bit
// words of host (little-endian) order, a colon, the port in hex.
func ParseAddr(s string) (net.IP, int, error) {
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

// SocketInodes returns the inodes of the sockets among pid's open
// descriptors (of every kind: look them up in Sockets for TCP ones).
func SocketInodes(pid int) ([]string, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var inodes []string
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(dir, fd.Name()))
		if err != nil || !strings.HasPrefix(link, "socket:[") {
			continue // closed meanwhile, or not a socket
		}
		inodes = append(inodes, strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]"))
	}
	return inodes, nil
}

// Listening returns the TCP sockets pid listens on.
func Listening(pid int) ([]Socket, error) {
	sockets, err := Sockets()
	if err != nil {
		return nil, err
	}
	inodes, err := SocketInodes(pid)
	if err != nil {
		return nil, err
	}
	var out []Socket
	for _, ino := range inodes {
		if s, ok := sockets[ino]; ok && s.Listening() {
			out = append(out, s)
		}
	}
	return out, nil
}

// Owners returns the processes holding each of the sockets inodes name,
// by inode, read from every process's descriptors. A socket no process
// holds (closed, or held by a process this one may not read) is absent.
func Owners(inodes []string) (map[string][]int, error) {
	want := map[string]bool{}
	for _, ino := range inodes {
		want[ino] = true
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[string][]int{}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		held, err := SocketInodes(pid)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
				continue // gone meanwhile, or not ours to read
			}
			return nil, err
		}
		for _, ino := range held {
			if want[ino] {
				out[ino] = append(out[ino], pid)
			}
		}
	}
	return out, nil
}

// Running tells whether process pid exists and has not exited: a zombie
// (exited, its parent has not collected it yet) does not run.
func Running(pid int) bool {
	state, err := State(pid)
	return err == nil && state != "Z" && state != "X"
}

// State returns the one-letter state of process pid (R, S, D, Z...) from
// /proc/PID/stat.
func State(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	// pid (comm) state ...: comm may hold spaces and parentheses, so
	// look after the last ")".
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return "", fmt.Errorf("/proc/%d/stat: no ')' in %q", pid, b)
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) == 0 {
		return "", fmt.Errorf("/proc/%d/stat: no state in %q", pid, b)
	}
	return fields[0], nil
}
