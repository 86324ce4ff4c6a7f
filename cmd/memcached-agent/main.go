// Command memcached-agent serves one Memcached's server list to memcached
// clients that speak ElastiCache Auto Discovery: it follows the
// Memcached's status.slotTable (through the API server, or from a file)
// and answers "config get cluster" and "get AmazonElastiCache:cluster" on
// memcached's port, speaking memcached's text protocol. The hook runs two
// of them per Memcached with spec.discovery; see README.md. With
// --pool-file it writes the slot table as the pool of memcached's proxy
// (internal/pool): the proxy tier runs it beside each proxy, with no
// endpoint (--listen=).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal, the next one kills at once.
	context.AfterFunc(ctx, stop)
	if err := run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "memcached-agent: %v\n", err)
		os.Exit(1)
	}
}
