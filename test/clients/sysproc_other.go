//go:build !linux

package clients

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
