//go:build !linux

package monitoring

import "syscall"

// procAttr ties no child to its parent: only Linux can.
func procAttr() *syscall.SysProcAttr { return nil }
