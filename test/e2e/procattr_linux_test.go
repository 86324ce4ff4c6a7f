package e2e

import "syscall"

// sysProcAttr makes the kernel kill the hook when the test binary dies, so
// that a panicking or killed test leaves no hook behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
