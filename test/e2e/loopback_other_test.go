//go:build !linux

package e2e

import "testing"

// checkLoopbackOnly skips: only Linux's /proc tells which addresses a
// process uses.
func checkLoopbackOnly(t *testing.T, pids map[string]int) {
	t.Skip("checking the processes' addresses needs Linux's /proc")
}
