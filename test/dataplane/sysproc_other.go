//go:build !linux

package dataplane

import (
	"os"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

var terminate = os.Interrupt
