//go:build !linux

package handoff

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
