//go:build !linux

package memcachedtest

import (
	"os"
	"syscall"
)

// procAttr ties no child to its parent (only Linux can), and leaves
// memcached to change its own user when run as root.
func procAttr() (*syscall.SysProcAttr, []string, error) {
	if os.Geteuid() == 0 {
		return nil, []string{"-u", "nobody"}, nil
	}
	return nil, nil, nil
}

// freezeSignal and thawSignal are none here: Server.Freeze fails.
var freezeSignal, thawSignal os.Signal

// runnable is bin: memcached changes its user itself here.
func runnable(bin string, _ *syscall.SysProcAttr) (string, error) { return bin, nil }
