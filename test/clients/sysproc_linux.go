package clients

import "syscall"

// sysProcAttr kills a client when the test binary dies, so that a
// panicking or killed test leaves none behind.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
