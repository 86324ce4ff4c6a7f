package playground

import "syscall"

// sysProcAttr makes the kernel kill the hook when the process that started
// it dies, so that a panicking or killed test, or a killed playground,
// leaves no hook behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
