package kube

import "syscall"

// sysProcAttr makes the kernel kill a child process when the test binary
// dies, so that a panicking or killed test leaves no etcd or kube-apiserver
// behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
