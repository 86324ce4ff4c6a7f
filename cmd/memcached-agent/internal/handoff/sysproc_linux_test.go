package handoff

import "syscall"

// sysProcAttr kills the processes a test starts when the test binary dies
// (a -timeout panic): a memcached left behind would hold its address for
// the next run.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
