package dataplane

import (
	"os"
	"syscall"
)

// sysProcAttr kills a child when the test binary dies, so that a panicking
// or killed test leaves no memcached or agent behind.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }

// terminate is what kubelet sends first.
const terminate = syscall.SIGTERM

// freezeSignal stops a process, thawSignal resumes it (Memcached.Freeze).
var freezeSignal, thawSignal os.Signal = syscall.SIGSTOP, syscall.SIGCONT
