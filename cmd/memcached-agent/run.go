package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/example/memcached-operator/cmd/internal/program"
	"github.com/example/memcached-operator/cmd/memcached-agent/internal/confirm"
	"github.com/example/memcached-operator/cmd/memcached-agent/internal/follow"
	"github.com/example/memcached-operator/cmd/memcached-agent/internal/pool"
	"github.com/example/memcached-operator/cmd/memcached-agent/internal/serverlist"
	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
)

// version and commit say what was built; the Makefile and the Dockerfile
// set them with -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "devel"
	commit  = "unknown"
)

// serviceAccountNamespace is where a Pod finds its namespace.
var serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// config is everything the flags set.
type config struct {
	*program.Flags
	memcached        string
	namespace        string
	kubeconfig       string
	fromFile         string
	filePollInterval time.Duration
	listen           string
	adminListen      string
	tlsMinVersion    string
	maxConnections   int
	idleTimeout      time.Duration
	reportFile       string
	handoffLockTTL   time.Duration
	clientMove       time.Duration
	poolFile         string
	proxyAddr        string
	// self is this agent's name in the hand-offs' locks and reports:
	// $POD_NAME, else the hostname, which in a Pod is the Pod's name.
	self string
}

// parseFlags reads the command line. Every flag can also come from the
// environment as MEMCACHED_AGENT_<FLAG> (upper case, dashes as
// underscores); a flag on the command line wins.
func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (*config, error) {
	fs := program.NewFlags("memcached-agent", args, "--memcached NAME [flags]", "Follows a Memcached's status: serves its server list to clients that speak ElastiCache Auto Discovery (--listen),\nwrites the pool of memcached's proxy (--pool-file), and hands on the items status.handoffs asks for (of Pods that leave, move, or lose keys to added slots).\n", stderr)
	cfg := &config{Flags: fs}
	fs.StringVar(&cfg.memcached, "memcached", "", "`name` of the Memcached whose servers to serve (required)")
	fs.StringVar(&cfg.namespace, "namespace", "", "`namespace` of the Memcached (default: $POD_NAMESPACE, else the Pod's service account namespace; with --from-file, else the file's)")
	fs.StringVar(&cfg.kubeconfig, "kubeconfig", "", "kubeconfig `file` to reach the API server with (default: the in-cluster service account)")
	fs.StringVar(&cfg.fromFile, "from-file", "", "follow the Memcached in this `file` (as kubectl get memcached NAME -o json or -o yaml prints it), re-read when it changes, instead of the API server")
	fs.DurationVar(&cfg.filePollInterval, "file-poll-interval", 250*time.Millisecond, "how often --from-file is checked for a change")
	fs.StringVar(&cfg.listen, "listen", ":11211", "`address` of the configuration endpoint (host:port; port 0 picks a free one); empty serves no endpoint (an agent that only hands items on, or writes the proxy's pool)")
	fs.StringVar(&cfg.adminListen, "admin-listen", "127.0.0.1:9091", "`address` of /healthz, /readyz and /metrics (HTTP)")
	fs.TLSFlags("serve the endpoint over TLS with the PEM certificate (chain) in this `file`; reloaded when it changes",
		"require every client to present a certificate signed by a CA in this PEM `file` (needs --tls-cert-file), as memcached with required client certificates does; reloaded when it changes")
	fs.StringVar(&cfg.tlsMinVersion, "tls-min-version", "1.2", "lowest TLS `version` accepted: 1.2 or 1.3")
	fs.IntVar(&cfg.maxConnections, "max-connections", 1024, "client connections open at once; past it a new one is answered memcached's \"ERROR Too many open connections\" and closed")
	fs.DurationVar(&cfg.idleTimeout, "idle-timeout", 10*time.Minute, "close a client connection on which nothing came for this long (clients poll every minute or so); also bounds each write and TLS handshake")
	fs.StopFlags(5*time.Second, "on SIGTERM, how long to keep serving with /readyz failing, so that the Service stops sending clients here first",
		10*time.Second, "after the delay, how long answers in flight get to finish before every connection is closed")
	fs.StringVar(&cfg.reportFile, "report-file", "", "also write the hand-offs' progress into this `file` (a JSON object: report key, the source Pod's name, for Moved POD_SLOT, for Grown POD_SLOT_TO, to its progress as JSON, what ConfigMap NAME-agent's data holds), replaced whole at each change; with --from-file, the only place it goes")
	fs.StringVar(&cfg.poolFile, "pool-file", "", "write the slot table as the pool of memcached's proxy into this `file` (replaced atomically, mode 0644, when it changes); /readyz fails until it is written, and with --proxy-addr until the proxy has loaded one")
	fs.StringVar(&cfg.proxyAddr, "proxy-addr", "127.0.0.1:11211", "with --pool-file, the `address` of the proxy beside the agent, whose user log (watch proxyuser) says which pool it routes by: /readyz fails until it has loaded one, and the agent reports it in ConfigMap NAME-agent (or --report-file); empty asks no proxy")
	fs.DurationVar(&cfg.clientMove, "handoff-settle", contract.ClientMove, "how long a copy waits after its hand-off appears in the status, for clients to move to the slot's new owner (the proxies switch within a second; clients that resolve the slots' names, within their lookup period and the DNS TTL: the hook sets it from spec.rollout.clientMoveSeconds), so that no write the leaving Pod takes after the copy read its key is lost to the new owner")
	fs.DurationVar(&cfg.handoffLockTTL, "handoff-lock-ttl", contract.LockTTL, "TTL of the lock a copying agent holds on the source (renewed every third of it): how long a copy waits for an agent that died before the other agent takes it over")

	if err := fs.Parse(args, getenv); err != nil {
		return nil, err
	}
	switch {
	case cfg.memcached == "":
		return nil, errors.New("--memcached is required: the name of the Memcached to serve")
	case cfg.fromFile != "" && cfg.kubeconfig != "":
		return nil, errors.New("--from-file and --kubeconfig are mutually exclusive: the list comes from one or the other")
	case cfg.filePollInterval <= 0:
		return nil, fmt.Errorf("--file-poll-interval must be positive, got %s", cfg.filePollInterval)
	case cfg.tlsMinVersion != "1.2" && cfg.tlsMinVersion != "1.3":
		return nil, fmt.Errorf("--tls-min-version must be 1.2 or 1.3, got %q", cfg.tlsMinVersion)
	case cfg.maxConnections <= 0:
		return nil, fmt.Errorf("--max-connections must be positive, got %d", cfg.maxConnections)
	case cfg.idleTimeout <= 0:
		return nil, fmt.Errorf("--idle-timeout must be positive, got %s", cfg.idleTimeout)
	case cfg.handoffLockTTL < 3*time.Second:
		return nil, fmt.Errorf("--handoff-lock-ttl must be at least 3s (memcached counts TTLs in seconds), got %s", cfg.handoffLockTTL)
	case cfg.poolFile != "" && cfg.proxyAddr != "" && !hostPort(cfg.proxyAddr):
		return nil, fmt.Errorf("--proxy-addr must be host:port, got %q", cfg.proxyAddr)
	case cfg.clientMove < 0 || cfg.clientMove > v1alpha1.MaxClientMoveSeconds*time.Second:
		return nil, fmt.Errorf("--handoff-settle must be from 0s to %s (it delays every copy within the leaving Pod's bound), got %s", v1alpha1.MaxClientMoveSeconds*time.Second, cfg.clientMove)
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
	if cfg.self = getenv("POD_NAME"); cfg.self == "" {
		cfg.self, _ = os.Hostname()
	}
	return cfg, nil
}

// hostPort tells whether addr is host:port with a port.
func hostPort(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	return err == nil && port != ""
}

// run is the whole program: it parses the flags, builds the roles they ask
// for, runs them until ctx ends, then shuts down gracefully. It returns nil
// after a clean shutdown.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return program.Start(ctx, program.Build{Name: "memcached-agent", Version: version, Commit: commit}, args, getenv, stdout, stderr, parseFlags, serve)
}

// serve builds the roles the flags ask for (the hand-offs always, the pool
// writer with --pool-file, the endpoint with --listen) and follows the
// Memcached into them until ctx ends.
func serve(ctx context.Context, cfg *config, logger *slog.Logger) error {
	m := newMetrics()
	pub := serverlist.New(logger, m, time.Now)
	tlsConfig, err := endpointTLS(cfg, logger)
	if err != nil {
		return err
	}
	// The follower is set up before anything listens, so that a
	// configuration that cannot reach the API server fails at once.
	restConfig, err := apiServer(cfg, logger)
	if err != nil {
		return err
	}

	handoffs, err := newHandoffSink(cfg, restConfig, logger, m)
	if err != nil {
		return err
	}
	defer handoffs.Stop()
	sink := sinks{pub, handoffs}
	var pw *poolWriter
	var pc *proxyConfirm
	if cfg.poolFile != "" {
		if pw, err = newPoolWriter(cfg, logger, m); err != nil {
			return err
		}
		sink = append(sink, pw)
		if cfg.proxyAddr != "" {
			pc = newProxyConfirm(cfg, handoffs.proxyStore(logger), logger, m)
		}
	}
	// No --listen: the hook runs the agent only for hand-offs, or beside a
	// proxy, and it serves no endpoint at all.
	var ep *endpoint
	if cfg.listen != "" {
		if ep, err = listenEndpoint(cfg, pub, tlsConfig, logger, m); err != nil {
			return err
		}
		defer ep.Close()
	}
	adminLn, err := net.Listen("tcp", cfg.adminListen)
	if err != nil {
		return err
	}
	defer adminLn.Close()
	admin := program.HTTPServer(adminHandler(pub, ep != nil, pw, pc, cfg.Stop.Stopping, m), logger)

	// Room for each that may fail: the endpoint, the admin server, the
	// watch.
	failed := make(chan error, 3)
	if ep != nil {
		go func() { failed <- ep.Serve() }()
	}
	go func() { failed <- admin.Serve(adminLn) }()
	stopFollowing := following(cfg, restConfig, sink, pw, m, logger, failed)
	defer stopFollowing()
	if pc != nil {
		pc.start()
		defer pc.stop()
	}

	address := ""
	if ep != nil {
		address = ep.Addr()
	}
	logger.Info("listening", "address", address, "admin_address", adminLn.Addr().String(), "version", version, "commit", commit,
		"memcached", cfg.memcached, "namespace", cfg.namespace, "source", source(cfg), "tls", tlsConfig != nil, "client_certificates", cfg.TLS.ClientCA != "",
		"max_connections", cfg.maxConnections, "idle_timeout", cfg.idleTimeout.String(), "agent", cfg.self, "pool_file", cfg.poolFile, "proxy_addr", pc.addr())

	// Once ctx ends /readyz fails, so that the Service sends new clients to
	// another agent, while this one still answers. Copies stop at once,
	// releasing their locks, so that the other agent takes them over
	// without waiting for the locks to expire. The proxy's report stays
	// until the end: the proxy serves through its own preStop.
	return cfg.Stop.Wait(ctx, logger, failed, handoffs.Stop, func(ctx context.Context) error {
		var endpointErr error
		if ep != nil {
			endpointErr = ep.Shutdown(ctx)
		}
		pc.stop()
		return errors.Join(endpointErr, admin.Shutdown(ctx))
	})
}

// apiServer is how to reach the API server: nil with --from-file, which
// needs none.
func apiServer(cfg *config, logger *slog.Logger) (*rest.Config, error) {
	if cfg.fromFile != "" {
		return nil, nil
	}
	var restConfig *rest.Config
	var err error
	if cfg.kubeconfig != "" {
		restConfig, err = clientcmd.BuildConfigFromFlags("", cfg.kubeconfig)
	} else {
		restConfig, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("reaching the API server (--kubeconfig, or in a Pod its service account; --from-file needs neither): %w", err)
	}
	restConfig.UserAgent = "memcached-agent/" + version
	// client-go logs through klog: send it to the same log.
	klog.SetSlogLogger(logger)
	return restConfig, nil
}

// source names where the Memcached comes from, for the log.
func source(cfg *config) string {
	if cfg.fromFile != "" {
		return "file " + cfg.fromFile
	}
	return "watch"
}

// following follows the Memcached (its --from-file, or the API server's
// watch) into sink, and with pw writes the pool, until the function it
// returns is called; that function waits for both to end. A watch that
// cannot go on sends why on failed.
func following(cfg *config, restConfig *rest.Config, sink follow.Sink, pw *poolWriter, m *metrics, logger *slog.Logger, failed chan<- error) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if cfg.fromFile != "" {
			follow.File(ctx, cfg.fromFile, cfg.filePollInterval, cfg.memcached, cfg.namespace, sink, m.followError, logger)
			return
		}
		if err := follow.Kube(ctx, restConfig, cfg.namespace, cfg.memcached, sink, m.followError, logger); err != nil {
			failed <- fmt.Errorf("following the Memcached: %w", err)
		}
	})
	if pw != nil {
		wg.Go(func() { pw.Run(ctx) })
	}
	return func() {
		cancel()
		wg.Wait()
	}
}

// adminHandler serves /healthz (200 while the process runs), /readyz and
// /metrics. /readyz is 200 from when the agent has what it is for (with
// serving, an endpoint, a list to serve; with pw, a pool in the file, and
// with pc the proxy's word that it routes by a pool; with neither, a good
// status to hand items on from) until shutdown begins.
func adminHandler(pub *serverlist.Publisher, serving bool, pw *poolWriter, pc *proxyConfirm, stopping func() bool, m *metrics) http.Handler {
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
		var loaded *confirm.Loaded
		if pc != nil {
			loaded = pc.Current()
		}
		switch {
		case stopping():
			text(w, http.StatusServiceUnavailable, "shutting down")
		case serving && cur == nil:
			text(w, http.StatusServiceUnavailable, "no server list yet")
		case pw != nil && written == nil:
			// The proxy beside it has no pool: it would fail every
			// request.
			text(w, http.StatusServiceUnavailable, "no pool written yet")
		case pc != nil && loaded == nil:
			// The proxy has not said it routes by a pool: it may fail
			// every request (or be down, or restarting).
			text(w, http.StatusServiceUnavailable, "the proxy has not said it loaded a pool")
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
			if loaded != nil {
				says = append(says, "the proxy loaded "+loaded.String())
			}
			text(w, http.StatusOK, "ok: "+strings.Join(says, "; "))
		}
	})
	mux.Handle("GET /metrics", m.registry.Handler())
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
