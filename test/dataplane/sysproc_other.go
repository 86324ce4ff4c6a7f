//go:build !linux

package dataplane

import (
	"os"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

var terminate = os.Interrupt

// freezeSignal and thawSignal are none here: Memcached.Freeze fails.
var freezeSignal, thawSignal os.Signal
