package dns

import "syscall"

// sysProcAttr makes the kernel kill CoreDNS when the test binary dies, so
// that a panicking or killed test leaves no server behind on its port.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
