package testutil

import (
	"net/netip"
	"runtime"

	"github.com/example/memcached-operator/test/procnet"
)

// Listens tells whether process pid holds a TCP socket listening on addr
// (ip:port), from Linux's /proc. A test that waits for a server it started
// asks this, not only whether something answers at the address: a process
// that held the address already (a server another test left, another
// package's on the same address) answers too, while the one started exits
// unable to bind. Elsewhere than on Linux it cannot tell, and says yes.
func Listens(pid int, addr string) (bool, error) {
	if runtime.GOOS != "linux" {
		return true, nil
	}
	want, err := netip.ParseAddrPort(addr)
	if err != nil {
		return false, err
	}
	sockets, err := procnet.Listening(pid)
	if err != nil {
		return false, err
	}
	for _, s := range sockets {
		ip, ok := netip.AddrFromSlice(s.Local)
		if ok && ip.Unmap() == want.Addr() && s.LocalPort == int(want.Port()) {
			return true, nil
		}
	}
	return false, nil
}
