package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// config is everything the flags set.
type config struct {
	listenAddress   string
	maxRequestBytes int64
	shutdownDelay   time.Duration
	shutdownTimeout time.Duration
	logLevel        slog.Level
	logFormat       string
}

// parseFlags reads the command line. Every flag can also come from the
// environment as MEMCACHED_HOOK_<FLAG> (upper case, dashes as underscores);
// a flag on the command line wins.
func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (*config, error) {
	cfg := &config{}
	if len(args) == 0 {
		args = []string{"memcached-hook"}
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.listenAddress, "listen-address", ":8080", "`address` to serve the hooks, /healthz and /readyz on (host:port; port 0 picks a free one)")
	fs.Int64Var(&cfg.maxRequestBytes, "max-request-bytes", 32<<20, "largest request body accepted, in `bytes`; larger ones get 413 (a 1,000-Pod sync request is 4 to 5 MB)")
	fs.DurationVar(&cfg.shutdownDelay, "shutdown-delay", 5*time.Second, "on SIGTERM, how long to keep serving with /readyz failing, so that Service endpoints drop the Pod before it stops accepting calls")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", 20*time.Second, "after the delay, how long in-flight calls get to finish")
	fs.TextVar(&cfg.logLevel, "log-level", slog.LevelInfo, "least `level` logged: debug, info, warn or error")
	fs.StringVar(&cfg.logFormat, "log-format", "json", "log `format`: json or text")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s [flags]\n\nServes Metacontroller's customize, sync and finalize hooks for Memcached objects.\nEvery flag may also be set as MEMCACHED_HOOK_<NAME> in the environment.\n\nFlags:\n", fs.Name())
		fs.PrintDefaults()
	}

	if err := fs.Parse(args[1:]); err != nil {
		return nil, err
	}
	// The environment fills in what the command line left unset.
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		name := "MEMCACHED_HOOK_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := getenv(name); v != "" && envErr == nil && !onCommandLine[f.Name] {
			if err := f.Value.Set(v); err != nil {
				envErr = fmt.Errorf("%s=%q: %w", name, v, err)
			}
		}
	})
	if envErr != nil {
		return nil, envErr
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if cfg.maxRequestBytes <= 0 {
		return nil, fmt.Errorf("--max-request-bytes must be positive, got %d", cfg.maxRequestBytes)
	}
	if cfg.shutdownDelay < 0 || cfg.shutdownTimeout < 0 {
		return nil, fmt.Errorf("--shutdown-delay and --shutdown-timeout must not be negative")
	}
	if cfg.logFormat != "json" && cfg.logFormat != "text" {
		return nil, fmt.Errorf("--log-format must be json or text, got %q", cfg.logFormat)
	}
	return cfg, nil
}

// run is the whole program: it parses the flags, listens, serves until ctx
// ends, then shuts down gracefully. It returns nil after a clean shutdown.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}

	opts := &slog.HandlerOptions{Level: cfg.logLevel}
	var handler slog.Handler = slog.NewJSONHandler(stdout, opts)
	if cfg.logFormat == "text" {
		handler = slog.NewTextHandler(stdout, opts)
	}
	logger := slog.New(handler)

	ln, err := net.Listen("tcp", cfg.listenAddress)
	if err != nil {
		return err
	}
	var shuttingDown atomic.Bool
	srv := &http.Server{
		Handler: newServer(logger, serverOptions{
			maxRequestBytes: cfg.maxRequestBytes,
			now:             time.Now,
			ready:           func() bool { return !shuttingDown.Load() },
		}),
		ReadHeaderTimeout: 10 * time.Second,
		// Metacontroller gives a call 10 s by default; a 1,000-Pod
		// request must still be read and answered well within that.
		ReadTimeout:  30 * time.Second,
		WriteTimeout: 30 * time.Second,
		IdleTimeout:  90 * time.Second,
		ErrorLog:     slog.NewLogLogger(handler, slog.LevelWarn),
	}

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	logger.Info("listening", "address", ln.Addr().String(), "max_request_bytes", cfg.maxRequestBytes)

	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}

	shuttingDown.Store(true)
	// Send callers that reuse a connection back through the Service, to a
	// Pod that is not going away.
	srv.SetKeepAlivesEnabled(false)
	logger.Info("shutting down: /readyz fails from now on", "delay", cfg.shutdownDelay.String())
	select {
	case <-time.After(cfg.shutdownDelay):
	case err := <-serveErr:
		return err
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	logger.Info("stopped")
	return nil
}
