package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/example/memcached-operator/cmd/memcached-agent/internal/follow"
	"github.com/example/memcached-operator/cmd/memcached-agent/internal/handoff"
	"github.com/example/memcached-operator/cmd/memcached-agent/internal/pool"
	"github.com/example/memcached-operator/cmd/memcached-agent/internal/protocol"
	"github.com/example/memcached-operator/cmd/memcached-agent/internal/report"
	"github.com/example/memcached-operator/cmd/memcached-agent/internal/serverlist"
	"github.com/example/memcached-operator/sync/api/v1alpha1"
)

// version and commit say what was built; the Makefile and the Dockerfile
// set them with -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "devel"
	commit  = "unknown"
)

// errVersion is --version: print the version instead of running.
var errVersion = errors.New("version asked for")

// serviceAccountNamespace is where a Pod finds its namespace.
var serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// config is everything the flags set.
type config struct {
	memcached        string
	namespace        string
	kubeconfig       string
	fromFile         string
	filePollInterval time.Duration
	listen           string
	adminListen      string
	tlsCertFile      string
	tlsKeyFile       string
	clientCAFile     string
	tlsMinVersion    string
	maxConnections   int
	idleTimeout      time.Duration
	shutdownDelay    time.Duration
	shutdownTimeout  time.Duration
	logLevel         slog.Level
	logFormat        string
	reportFile       string
	handoffLockTTL   time.Duration
	handoffSettle    time.Duration
	poolFile         string
}

// parseFlags reads the command line. Every flag can also come from the
// environment as MEMCACHED_AGENT_<FLAG> (upper case, dashes as
// underscores); a flag on the command line wins.
func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (*config, error) {
	cfg := &config{}
	if len(args) == 0 {
		args = []string{"memcached-agent"}
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	printVersion := fs.Bool("version", false, "print the version and the commit it was built from, and exit")
	fs.StringVar(&cfg.memcached, "memcached", "", "`name` of the Memcached whose servers to serve (required)")
	fs.StringVar(&cfg.namespace, "namespace", "", "`namespace` of the Memcached (default: $POD_NAMESPACE, else the Pod's service account namespace; with --from-file, else the file's)")
	fs.StringVar(&cfg.kubeconfig, "kubeconfig", "", "kubeconfig `file` to reach the API server with (default: the in-cluster service account)")
	fs.StringVar(&cfg.fromFile, "from-file", "", "follow the Memcached in this `file` (as kubectl get memcached NAME -o json or -o yaml prints it), re-read when it changes, instead of the API server")
	fs.DurationVar(&cfg.filePollInterval, "file-poll-interval", 250*time.Millisecond, "how often --from-file is checked for a change")
	fs.StringVar(&cfg.listen, "listen", ":11211", "`address` of the configuration endpoint (host:port; port 0 picks a free one); empty serves no endpoint (an agent that only hands items on, or writes the proxy's pool)")
	fs.StringVar(&cfg.adminListen, "admin-listen", "127.0.0.1:9091", "`address` of /healthz, /readyz and /metrics (HTTP)")
	fs.StringVar(&cfg.tlsCertFile, "tls-cert-file", "", "serve the endpoint over TLS with the PEM certificate (chain) in this `file`; reloaded when it changes")
	fs.StringVar(&cfg.tlsKeyFile, "tls-key-file", "", "the PEM private key of --tls-cert-file, in this `file`; reloaded when it changes")
	fs.StringVar(&cfg.clientCAFile, "client-ca-file", "", "require every client to present a certificate signed by a CA in this PEM `file` (needs --tls-cert-file), as memcached with required client certificates does; reloaded when it changes")
	fs.StringVar(&cfg.tlsMinVersion, "tls-min-version", "1.2", "lowest TLS `version` accepted: 1.2 or 1.3")
	fs.IntVar(&cfg.maxConnections, "max-connections", 1024, "client connections open at once; past it a new one is answered memcached's \"ERROR Too many open connections\" and closed")
	fs.DurationVar(&cfg.idleTimeout, "idle-timeout", 10*time.Minute, "close a client connection on which nothing came for this long (clients poll every minute or so); also bounds each write and TLS handshake")
	fs.DurationVar(&cfg.shutdownDelay, "shutdown-delay", 5*time.Second, "on SIGTERM, how long to keep serving with /readyz failing, so that the Service stops sending clients here first")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", 10*time.Second, "after the delay, how long answers in flight get to finish before every connection is closed")
	fs.StringVar(&cfg.reportFile, "report-file", "", "also write the hand-offs' progress into this `file` (a JSON object: report key, the source Pod's name or for Moved POD_SLOT, to its progress as JSON, what ConfigMap NAME-agent's data holds), replaced whole at each change; with --from-file, the only place it goes")
	fs.StringVar(&cfg.poolFile, "pool-file", "", "write the slot table as the pool of memcached's proxy into this `file` (replaced atomically, mode 0644, when it changes); /readyz fails until it is written")
	fs.DurationVar(&cfg.handoffSettle, "handoff-settle", 2*time.Second, "how long a copy waits after its hand-off appears in the status, for clients to move to the slot's new owner (the proxies switch within a second), so that no write the leaving Pod takes after the copy read its key is lost to the new owner")
	fs.DurationVar(&cfg.handoffLockTTL, "handoff-lock-ttl", 15*time.Second, "TTL of the lock a copying agent holds on the source (renewed every third of it): how long a copy waits for an agent that died before the other agent takes it over")
	fs.TextVar(&cfg.logLevel, "log-level", slog.LevelInfo, "least `level` logged: debug, info, warn or error")
	fs.StringVar(&cfg.logFormat, "log-format", "json", "log `format`: json or text")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s --memcached NAME [flags]\n\nServes a Memcached's server list to clients that speak ElastiCache Auto Discovery.\nEvery flag may also be set as MEMCACHED_AGENT_<NAME> in the environment.\n\nFlags:\n", fs.Name())
		fs.PrintDefaults()
	}

	if err := fs.Parse(args[1:]); err != nil {
		return nil, err
	}
	if *printVersion {
		return nil, errVersion
	}
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		name := "MEMCACHED_AGENT_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := getenv(name); v != "" && envErr == nil && !onCommandLine[f.Name] {
			if err := f.Value.Set(v); err != nil {
				envErr = fmt.Errorf("%s=%q: %w", name, v, err)
			}
		}
	})
	if envErr != nil {
		return nil, envErr
	}
	switch {
	case fs.NArg() > 0:
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	case cfg.memcached == "":
		return nil, errors.New("--memcached is required: the name of the Memcached to serve")
	case cfg.fromFile != "" && cfg.kubeconfig != "":
		return nil, errors.New("--from-file and --kubeconfig are mutually exclusive: the list comes from one or the other")
	case cfg.filePollInterval <= 0:
		return nil, fmt.Errorf("--file-poll-interval must be positive, got %s", cfg.filePollInterval)
	case (cfg.tlsCertFile == "") != (cfg.tlsKeyFile == ""):
		return nil, errors.New("--tls-cert-file and --tls-key-file go together")
	case cfg.clientCAFile != "" && cfg.tlsCertFile == "":
		return nil, errors.New("--client-ca-file needs --tls-cert-file and --tls-key-file: client certificates come with TLS")
	case cfg.tlsMinVersion != "1.2" && cfg.tlsMinVersion != "1.3":
		return nil, fmt.Errorf("--tls-min-version must be 1.2 or 1.3, got %q", cfg.tlsMinVersion)
	case cfg.maxConnections <= 0:
		return nil, fmt.Errorf("--max-connections must be positive, got %d", cfg.maxConnections)
	case cfg.idleTimeout <= 0:
		return nil, fmt.Errorf("--idle-timeout must be positive, got %s", cfg.idleTimeout)
	case cfg.handoffLockTTL < 3*time.Second:
		return nil, fmt.Errorf("--handoff-lock-ttl must be at least 3s (memcached counts TTLs in seconds), got %s", cfg.handoffLockTTL)
	case cfg.handoffSettle < 0 || cfg.handoffSettle > time.Minute:
		return nil, fmt.Errorf("--handoff-settle must be from 0s to 1m (it delays every copy within the leaving Pod's bound), got %s", cfg.handoffSettle)
	case cfg.shutdownDelay < 0 || cfg.shutdownTimeout < 0:
		return nil, errors.New("--shutdown-delay and --shutdown-timeout must not be negative")
	case cfg.logFormat != "json" && cfg.logFormat != "text":
		return nil, fmt.Errorf("--log-format must be json or text, got %q", cfg.logFormat)
	}
	if cfg.namespace == "" {
		cfg.namespace = getenv("POD_NAMESPACE")
	}
	if cfg.namespace == "" {
		if b, err := os.ReadFile(serviceAccountNamespace); err == nil {
			cfg.namespace = strings.TrimSpace(string(b))
		}
	}
	if cfg.namespace == "" && cfg.fromFile == "" {
		return nil, fmt.Errorf("no namespace: set --namespace or POD_NAMESPACE (outside a Pod, %s does not exist)", serviceAccountNamespace)
	}
	return cfg, nil
}

// run is the whole program: it parses the flags, listens, follows the
// Memcached and serves its list until ctx ends, then shuts down
// gracefully. It returns nil after a clean shutdown.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if errors.Is(err, errVersion) {
		fmt.Fprintf(stdout, "memcached-agent %s (commit %s, %s)\n", version, commit, runtime.Version())
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

	m := newMetrics()
	pub := serverlist.New(logger, m, time.Now)

	var tlsConfig *tls.Config
	if cfg.tlsCertFile != "" {
		minVersion := uint16(tls.VersionTLS12)
		if cfg.tlsMinVersion == "1.3" {
			minVersion = tls.VersionTLS13
		}
		if tlsConfig, err = newTLSConfig(logger, cfg.tlsCertFile, cfg.tlsKeyFile, cfg.clientCAFile, minVersion); err != nil {
			return err
		}
	}

	// The follower is set up before anything listens, so that a
	// configuration that cannot reach the API server fails at once.
	var restConfig *rest.Config
	if cfg.fromFile == "" {
		if cfg.kubeconfig != "" {
			restConfig, err = clientcmd.BuildConfigFromFlags("", cfg.kubeconfig)
		} else {
			restConfig, err = rest.InClusterConfig()
		}
		if err != nil {
			return fmt.Errorf("reaching the API server (--kubeconfig, or in a Pod its service account; --from-file needs neither): %w", err)
		}
		restConfig.UserAgent = "memcached-agent/" + version
		// client-go logs through klog: send it to the same log.
		klog.SetSlogLogger(logger)
	}

	// The hand-offs: the copies status.handoffs asks for, reported into
	// ConfigMap NAME-agent and Events (through the API server), or the
	// --report-file.
	self := getenv("POD_NAME")
	if self == "" {
		// In a Pod, the hostname is the Pod's name.
		self, _ = os.Hostname()
	}
	var reporters report.Both
	var kubeReporter *report.Kube
	if restConfig != nil {
		if kubeReporter, err = report.NewKube(restConfig, cfg.namespace, cfg.memcached, self); err != nil {
			return err
		}
		reporters = append(reporters, kubeReporter)
	}
	if cfg.reportFile != "" {
		reporters = append(reporters, report.NewFile(cfg.reportFile, logger))
	}
	if len(reporters) == 0 {
		// --from-file without --report-file: the log says it all.
		reporters = append(reporters, logReporter{logger})
	}
	handoffs := handoff.New(handoff.Options{Self: self, LockTTL: cfg.handoffLockTTL, Settle: cfg.handoffSettle}, reporters, m, logger.With("component", "handoff"))
	defer handoffs.Stop()
	var sink follow.Sink = &statusSink{pub: pub, handoffs: handoffs, kube: kubeReporter}
	// Beside a proxy: its pool, written from every status.
	var pw *pool.Writer
	if cfg.poolFile != "" {
		if fi, err := os.Stat(filepath.Dir(cfg.poolFile)); err != nil || !fi.IsDir() {
			return fmt.Errorf("--pool-file %s: its directory must exist (the volume the proxy reads)", cfg.poolFile)
		}
		pw = pool.New(cfg.poolFile, logger.With("component", "pool"), m, time.Now)
		sink = sinks{sink, pw}
	}

	// No --listen: the hook runs the agent only for hand-offs, and it
	// serves no endpoint at all.
	var ln net.Listener
	if cfg.listen != "" {
		if ln, err = net.Listen("tcp", cfg.listen); err != nil {
			return err
		}
	}
	adminLn, err := net.Listen("tcp", cfg.adminListen)
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		return err
	}

	var shuttingDown atomic.Bool
	endpoint := &protocol.Server{
		List: func() *protocol.Answers {
			if s := pub.Current(); s != nil {
				return s.Answers
			}
			return nil
		},
		MaxConnections: cfg.maxConnections,
		IdleTimeout:    cfg.idleTimeout,
		TLS:            tlsConfig,
		Logger:         logger,
		Observer:       m,
	}
	admin := &http.Server{
		Handler:           adminHandler(pub, ln != nil, pw, &shuttingDown, m),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(handler, slog.LevelWarn),
	}

	serveErr := make(chan error, 2)
	if ln != nil {
		go func() { serveErr <- endpoint.Serve(ln) }()
	}
	go func() { serveErr <- admin.Serve(adminLn) }()

	followCtx, stopFollowing := context.WithCancel(context.Background())
	var following sync.WaitGroup
	following.Add(1)
	go func() {
		defer following.Done()
		if cfg.fromFile != "" {
			follow.File(followCtx, cfg.fromFile, cfg.filePollInterval, cfg.memcached, cfg.namespace, sink, m.followError, logger)
			return
		}
		if err := follow.Kube(followCtx, restConfig, cfg.namespace, cfg.memcached, sink, m.followError, logger); err != nil {
			serveErr <- fmt.Errorf("following the Memcached: %w", err)
		}
	}()
	if pw != nil {
		following.Add(1)
		go func() { defer following.Done(); pw.Run(followCtx) }()
	}
	defer func() {
		stopFollowing()
		following.Wait()
	}()

	source := "watch"
	if cfg.fromFile != "" {
		source = "file " + cfg.fromFile
	}
	address := ""
	if ln != nil {
		address = ln.Addr().String()
	}
	logger.Info("listening", "address", address, "admin_address", adminLn.Addr().String(), "version", version, "commit", commit,
		"memcached", cfg.memcached, "namespace", cfg.namespace, "source", source, "tls", tlsConfig != nil, "client_certificates", cfg.clientCAFile != "",
		"max_connections", cfg.maxConnections, "idle_timeout", cfg.idleTimeout.String(), "agent", self, "pool_file", cfg.poolFile)

	select {
	case err := <-serveErr:
		if ln != nil {
			ln.Close()
		}
		adminLn.Close()
		return err
	case <-ctx.Done():
	}

	// From now on /readyz fails, so that the Service sends new clients to
	// another agent, while this one still answers. Copies stop at once,
	// releasing their locks, so that the other agent takes them over
	// without waiting for the locks to expire.
	shuttingDown.Store(true)
	handoffs.Stop()
	logger.Info("shutting down: /readyz fails from now on", "delay", cfg.shutdownDelay.String())
	select {
	case <-time.After(cfg.shutdownDelay):
	case err := <-serveErr:
		return err
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	var endpointErr error
	if ln != nil {
		endpointErr = endpoint.Shutdown(shutdownCtx)
	}
	adminErr := admin.Shutdown(shutdownCtx)
	if err := errors.Join(endpointErr, adminErr); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	logger.Info("stopped")
	return nil
}

// adminHandler serves /healthz (200 while the process runs), /readyz and
// /metrics. /readyz is 200 from when the agent has what it is for (with
// serving, an endpoint, a list to serve; with pw, a pool in the file;
// with neither, a good status to hand items on from) until shutdown
// begins.
func adminHandler(pub *serverlist.Publisher, serving bool, pw *pool.Writer, shuttingDown *atomic.Bool, m *metrics) http.Handler {
	mux := http.NewServeMux()
	text := func(w http.ResponseWriter, status int, msg string) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		io.WriteString(w, msg+"\n")
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { text(w, http.StatusOK, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		cur := pub.Current()
		var written *pool.Written
		if pw != nil {
			written = pw.Current()
		}
		switch {
		case shuttingDown.Load():
			text(w, http.StatusServiceUnavailable, "shutting down")
		case serving && cur == nil:
			text(w, http.StatusServiceUnavailable, "no server list yet")
		case pw != nil && written == nil:
			// The proxy beside it has no pool: it would fail every
			// request.
			text(w, http.StatusServiceUnavailable, "no pool written yet")
		case !serving && pw == nil && cur == nil:
			text(w, http.StatusServiceUnavailable, "no good status yet")
		default:
			var says []string
			switch {
			case cur != nil && serving:
				says = append(says, fmt.Sprintf("version %d, %d servers", cur.Version, len(cur.Nodes)))
			case cur != nil && pw == nil:
				says = append(says, fmt.Sprintf("following version %d, %d servers (no endpoint)", cur.Version, len(cur.Nodes)))
			}
			if written != nil {
				says = append(says, fmt.Sprintf("pool version %d, %d slots, %d down", written.Version, written.Slots, written.Down))
			}
			text(w, http.StatusOK, "ok: "+strings.Join(says, "; "))
		}
	})
	mux.Handle("GET /metrics", m.handler())
	return mux
}

// sinks hands what a follower sees to each of several sinks, in order.
type sinks []follow.Sink

func (s sinks) Offer(source string, m *v1alpha1.Memcached) {
	for _, k := range s {
		k.Offer(source, m)
	}
}

func (s sinks) Refuse(source string, err error) {
	for _, k := range s {
		k.Refuse(source, err)
	}
}

// statusSink hands every version of the Memcached the followers see to
// the list served, and its hand-offs to the copier.
type statusSink struct {
	pub      *serverlist.Publisher
	handoffs *handoff.Runner
	kube     *report.Kube
}

func (s *statusSink) Offer(source string, m *v1alpha1.Memcached) {
	s.pub.Offer(source, m)
	if s.kube != nil {
		s.kube.SetUID(m.UID)
	}
	s.handoffs.Update(m.Status.Handoffs, m.Status.SlotTable.Slots)
}

func (s *statusSink) Refuse(source string, err error) { s.pub.Refuse(source, err) }

// logReporter reports hand-offs into the log alone.
type logReporter struct{ logger *slog.Logger }

func (l logReporter) Report(_ context.Context, pod string, p v1alpha1.HandoffProgress) error {
	l.logger.Info("hand-off progress", "pod", pod, "state", p.State, "items", p.Items, "bytes", p.Bytes, "skipped", p.Skipped, "seconds", p.Seconds, "message", p.Message)
	return nil
}

func (l logReporter) Forget(context.Context, string) error { return nil }

func (l logReporter) Event(_ context.Context, warning bool, reason, message string) error {
	level := slog.LevelInfo
	if warning {
		level = slog.LevelWarn
	}
	l.logger.Log(context.Background(), level, "event", "reason", reason, "message", message)
	return nil
}
