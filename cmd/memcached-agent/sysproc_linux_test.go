package main

import "syscall"

// sysProcAttr kills the agents a test starts as processes of their own when
// the test binary dies (a -timeout panic), so that none goes on copying
// into the next run's memcacheds (test/memcachedtest ties those to the test
// binary the same way).
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
