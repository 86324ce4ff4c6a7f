package monitoring

import "syscall"

// procAttr kills a program this package starts (memcached_exporter,
// Prometheus, the hook) when the test binary dies, as test/memcachedtest
// and test/dataplane do for memcached and the agent, so that a test killed
// by go test's -timeout or a ^C leaves none of them on its address. The
// kernel sends the signal when the thread that started the program ends:
// nothing here locks a goroutine to its thread, so Go's threads live as
// long as the binary. No credentials: unlike memcached, these run as root
// and write only into the test's own temporary directories.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
