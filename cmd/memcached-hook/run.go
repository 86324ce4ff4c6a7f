package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/example/memcached-operator/cmd/internal/program"
	"github.com/example/memcached-operator/sync/memcached"
)

// version and commit say what was built; the Makefile and the Dockerfile
// set them with -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "devel"
	commit  = "unknown"
)

// config is everything the flags set.
type config struct {
	*program.Flags
	listenAddress      string
	maxRequestBytes    int64
	maxConcurrentCalls int
	maxQueuedCalls     int
	queueTimeout       time.Duration
	authTokenFile      string
	basicAuthUserFile  string
	basicAuthPassFile  string
	agentImage         string
}

// parseFlags reads the command line. Every flag can also come from the
// environment as MEMCACHED_HOOK_<FLAG> (upper case, dashes as underscores);
// a flag on the command line wins.
func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (*config, error) {
	fs := program.NewFlags("memcached-hook", args, "[flags]", "Serves Metacontroller's customize, sync and finalize hooks for Memcached objects.\n", stderr)
	cfg := &config{Flags: fs}
	fs.StringVar(&cfg.listenAddress, "listen-address", "127.0.0.1:8080", "`address` to serve the hooks, /healthz and /readyz on (host:port; port 0 picks a free one; :8080 for every interface, as in a Pod)")
	fs.Int64Var(&cfg.maxRequestBytes, "max-request-bytes", 32<<20, "largest request body accepted, in `bytes`; larger ones get 413 (a 1,000-Pod sync request is 4 to 5 MB)")
	fs.IntVar(&cfg.maxConcurrentCalls, "max-concurrent-calls", 8, "hook calls worked on at once; more wait for a slot (each holds its request, up to 5 MB for 1,000 Pods, and several times that decoded)")
	fs.IntVar(&cfg.maxQueuedCalls, "max-queued-calls", 32, "hook calls that may wait for a slot at once; more get 429 at once")
	fs.DurationVar(&cfg.queueTimeout, "queue-timeout", 2*time.Second, "how long a call over --max-concurrent-calls waits for a slot before it gets 429 with Retry-After, which Metacontroller takes as \"requeue\"")
	fs.StopFlags(5*time.Second, "on SIGTERM, how long to keep serving with /readyz failing, so that Service endpoints drop the Pod before it stops accepting calls",
		20*time.Second, "after the delay, how long in-flight calls get to finish")
	fs.TLSFlags("serve HTTPS (TLS 1.2 or later) with the PEM certificate (chain) in this `file`; reloaded when it changes",
		"require hook calls to present a client certificate signed by a CA in this PEM `file` (needs --tls-cert-file; health checks and metrics stay open); reloaded when it changes")
	fs.StringVar(&cfg.authTokenFile, "auth-token-file", "", "require hook calls to send \"Authorization: Bearer <token>\" with the token in this `file` (white space trimmed); reloaded when it changes")
	fs.StringVar(&cfg.basicAuthUserFile, "basic-auth-username-file", "", "require hook calls to use Basic authentication with the username in this `file`; reloaded when it changes")
	fs.StringVar(&cfg.basicAuthPassFile, "basic-auth-password-file", "", "the Basic authentication password, in this `file`; reloaded when it changes")
	fs.StringVar(&cfg.agentImage, "agent-image", "", "`image` of memcached-agent, which Memcacheds with spec.discovery, spec.proxy or spec.rollout.keepWarm run: the hook's own image, which holds both (the manifests set it)")

	if err := fs.Parse(args, getenv); err != nil {
		return nil, err
	}
	if cfg.maxRequestBytes <= 0 {
		return nil, fmt.Errorf("--max-request-bytes must be positive, got %d", cfg.maxRequestBytes)
	}
	if cfg.maxConcurrentCalls <= 0 {
		return nil, fmt.Errorf("--max-concurrent-calls must be positive, got %d", cfg.maxConcurrentCalls)
	}
	if cfg.maxQueuedCalls < 0 {
		return nil, fmt.Errorf("--max-queued-calls must not be negative, got %d", cfg.maxQueuedCalls)
	}
	if cfg.queueTimeout < 0 {
		return nil, fmt.Errorf("--queue-timeout must not be negative")
	}
	if (cfg.basicAuthUserFile == "") != (cfg.basicAuthPassFile == "") {
		return nil, fmt.Errorf("--basic-auth-username-file and --basic-auth-password-file go together")
	}
	if cfg.authTokenFile != "" && cfg.basicAuthUserFile != "" {
		// As in Metacontroller, where authorization and basicAuth are
		// mutually exclusive.
		return nil, fmt.Errorf("--auth-token-file and --basic-auth-username-file are mutually exclusive")
	}
	return cfg, nil
}

// run is the whole program: it parses the flags, listens, serves until ctx
// ends, then shuts down gracefully. It returns nil after a clean shutdown.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return program.Start(ctx, program.Build{Name: "memcached-hook", Version: version, Commit: commit}, args, getenv, stdout, stderr, parseFlags, serve)
}

// serve listens, serves until ctx ends, then shuts down gracefully.
func serve(ctx context.Context, cfg *config, logger *slog.Logger) error {
	m := newMetrics()
	auth, err := newAuthenticator(authConfig{
		tokenFile:        cfg.authTokenFile,
		basicUserFile:    cfg.basicAuthUserFile,
		basicPassFile:    cfg.basicAuthPassFile,
		clientCertNeeded: cfg.TLS.ClientCA != "",
	}, logger, m)
	if err != nil {
		return err
	}
	var tlsConfig *tls.Config
	if cfg.TLS.Cert != "" {
		if tlsConfig, err = newTLSConfig(logger, cfg.TLS.Cert, cfg.TLS.Key, cfg.TLS.ClientCA); err != nil {
			return err
		}
	}

	ln, err := net.Listen("tcp", cfg.listenAddress)
	if err != nil {
		return err
	}
	srv := program.HTTPServer(newServer(logger, serverOptions{
		maxRequestBytes:    cfg.maxRequestBytes,
		now:                time.Now,
		ready:              func() bool { return !cfg.Stop.Stopping() },
		maxConcurrentCalls: cfg.maxConcurrentCalls,
		maxQueuedCalls:     cfg.maxQueuedCalls,
		queueTimeout:       cfg.queueTimeout,
		metrics:            m,
		auth:               auth,
		logic:              memcached.Options{AgentImage: cfg.agentImage},
	}), logger)
	srv.MaxHeaderBytes = 64 << 10
	srv.TLSConfig = tlsConfig
	// HTTP/1.1 only: Metacontroller's client uses it, and shutdown relies
	// on "Connection: close" to move callers off this Pod.
	srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}

	serveErr := make(chan error, 1)
	go func() {
		if tlsConfig != nil {
			serveErr <- srv.ServeTLS(ln, "", "")
			return
		}
		serveErr <- srv.Serve(ln)
	}()
	logger.Info("listening", "address", ln.Addr().String(), "version", version, "commit", commit, "tls", tlsConfig != nil, "client_certificates", cfg.TLS.ClientCA != "",
		"auth", authMode(cfg), "max_request_bytes", cfg.maxRequestBytes, "max_concurrent_calls", cfg.maxConcurrentCalls)

	// Once ctx ends /readyz fails and every answer closes its connection
	// (see closeWhenNotReady), sending callers that reuse a connection
	// back through the Service, to a Pod that is not going away.
	return cfg.Stop.Wait(ctx, logger, serveErr, nil, srv.Shutdown)
}

// authMode names the credentials hook calls need, for the log.
func authMode(cfg *config) string {
	switch {
	case cfg.authTokenFile != "":
		return "bearer"
	case cfg.basicAuthUserFile != "":
		return "basic"
	}
	return "none"
}
