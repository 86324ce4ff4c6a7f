package dataplane

import "syscall"

// sysProcAttr kills a child when the test binary dies, so that a panicking
// or killed test leaves no agent behind.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }

// terminate is what kubelet sends first.
const terminate = syscall.SIGTERM
