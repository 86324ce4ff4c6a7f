package memcachedtest

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// procAttr kills memcached when the test binary dies, so that a panicking
// or killed test leaves no memcached behind on its address, and, run as
// root, starts it as nobody. Go sets the parent-death signal after the
// credentials, and memcached then keeps both: it changes its user only
// when run as root (memcached.c, "lose root privileges if we have them"),
// whereas its -u would change it after the signal is set, which clears it.
func procAttr() (*syscall.SysProcAttr, []string, error) {
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() != 0 {
		return attr, nil, nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, nil, fmt.Errorf("running memcached as nobody: %v", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, nil, fmt.Errorf("nobody's uid %q: %v", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, nil, fmt.Errorf("nobody's gid %q: %v", u.Gid, err)
	}
	attr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	return attr, nil, nil
}

// freezeSignal stops a process, thawSignal resumes it (Server.Freeze).
var freezeSignal, thawSignal os.Signal = syscall.SIGSTOP, syscall.SIGCONT
