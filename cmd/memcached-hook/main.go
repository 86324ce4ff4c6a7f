// Command memcached-hook serves Metacontroller's CompositeController hooks
// for Memcached objects (cache.example.com/v1alpha1): given what
// Metacontroller observed, it answers the Deployment, Service and
// PodDisruptionBudget that should exist and the Memcached's status.
// Metacontroller applies the answer; the hook never calls the API server.
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
		fmt.Fprintf(os.Stderr, "memcached-hook: %v\n", err)
		os.Exit(1)
	}
}
