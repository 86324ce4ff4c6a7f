// Package program is the skeleton memcached-hook and memcached-agent share:
// flags that the environment may set too, --help and --version, the log,
// a metrics registry of the program's own, the HTTP server limits, and the
// graceful stop on SIGINT or SIGTERM. Each binary keeps in its own run
// what only it does; both keep the shape main → run(ctx, args, getenv,
// stdout, stderr), so that tests run the whole program in process. The
// tools make runs (apigen, apiref, chartgen) keep that shape too, with Main,
// and share ToolFlags and the rewrite of a file in place (tool.go).
package program

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"
)

// Run is a program's whole life: it returns when ctx ends (after a
// graceful stop) or when it cannot go on.
type Run func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error

// Main runs run with the process's arguments, environment and output until
// SIGINT or SIGTERM, and exits 1 with what run returned if it failed. After
// the first signal, the next one kills at once.
func Main(name string, run Run) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	if err := run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// ErrVersion is --version: print the version instead of running.
var ErrVersion = errors.New("version asked for")

// Build says what was built: the program's name, and the version and
// commit the Makefile and the Dockerfile stamp into its main package with
// -ldflags "-X main.version=... -X main.commit=...".
type Build struct {
	Name, Version, Commit string
}

// Start is the beginning every program's run shares: it reads the flags
// with parse, ends there after --help, --version or a refused flag (see
// Exit), and otherwise makes the log the flags ask for, on stdout, and
// returns what serve returns.
func Start[C interface{ Logger(io.Writer) *slog.Logger }](ctx context.Context, b Build, args []string, getenv func(string) string, stdout, stderr io.Writer,
	parse func(args []string, getenv func(string) string, stderr io.Writer) (C, error),
	serve func(ctx context.Context, cfg C, logger *slog.Logger) error,
) error {
	cfg, err := parse(args, getenv, stderr)
	if err != nil {
		return b.Exit(err, stdout)
	}
	return serve(ctx, cfg, cfg.Logger(stdout))
}

// Exit is what run returns when reading its flags ended it before it
// started (err from Flags.Parse, never nil): nil after --help, which the
// flag set printed; nil after --version, printed on stdout; err itself
// otherwise.
func (b Build) Exit(err error, stdout io.Writer) error {
	switch {
	case errors.Is(err, flag.ErrHelp):
		return nil
	case errors.Is(err, ErrVersion):
		fmt.Fprintf(stdout, "%s %s (commit %s, %s)\n", b.Name, b.Version, b.Commit, runtime.Version())
		return nil
	}
	return err
}
