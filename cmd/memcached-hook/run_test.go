package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/test/testutil"
)

// env returns a getenv that knows only vars.
func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// runningHook is run() serving in a goroutine.
type runningHook struct {
	// addr is the address run logged that it listens on.
	addr string
	// listening is the "listening" log line.
	listening map[string]any
	stdout    *testutil.LogSink
	stderr    *testutil.LockedBuffer
	cancel    context.CancelFunc
	// exited is closed once run has returned err.
	exited chan struct{}
	err    error
}

// startRun starts run with args after the program name and waits until it
// logs that it listens. The test fails if run ends first. When the test
// ends, run is stopped if it still runs.
func startRun(t *testing.T, args []string, vars map[string]string) *runningHook {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &runningHook{stdout: testutil.NewLogSink(), stderr: &testutil.LockedBuffer{}, cancel: cancel, exited: make(chan struct{})}
	go func() {
		defer close(h.exited)
		h.err = run(ctx, append([]string{"memcached-hook"}, args...), env(vars), h.stdout, h.stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-h.exited:
		case <-time.After(30 * time.Second):
			t.Errorf("run did not return after its context ended")
		}
	})
	h.listening = h.stdout.WaitFor(t, "listening", h.exited)
	h.addr, _ = h.listening["address"].(string)
	if h.addr == "" {
		t.Fatalf("listening log line has no address: %v", h.listening)
	}
	return h
}

// stop cancels run's context and returns what run returned.
func (h *runningHook) stop(t *testing.T) error {
	t.Helper()
	h.cancel()
	select {
	case <-h.exited:
		return h.err
	case <-time.After(30 * time.Second):
		t.Fatalf("run did not return after its context ended; it wrote:\n%s", h.stdout.String())
		return nil
	}
}

// TestRunHelp checks that asking for help prints every flag, starts no
// server and is not an error.
func TestRunHelp(t *testing.T) {
	flags := []string{"version", "listen-address", "max-request-bytes", "max-concurrent-calls", "max-queued-calls", "queue-timeout", "shutdown-delay", "shutdown-timeout", "log-level", "log-format",
		"tls-cert-file", "tls-key-file", "client-ca-file", "auth-token-file", "basic-auth-username-file", "basic-auth-password-file"}
	for _, arg := range []string{"--help", "-help", "-h"} {
		t.Run(arg, func(t *testing.T) {
			// A context already ended: a run that wrongly started a server
			// returns soon after.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var stdout, stderr bytes.Buffer
			if err := run(ctx, []string{"memcached-hook", arg}, env(nil), &stdout, &stderr); err != nil {
				t.Fatalf("run(%s) = %v, want nil", arg, err)
			}
			if stdout.Len() != 0 {
				t.Errorf("run(%s) wrote to stdout, want nothing there:\n%s", arg, stdout.String())
			}
			for _, f := range flags {
				if !strings.Contains(stderr.String(), "-"+f) {
					t.Errorf("help does not mention -%s:\n%s", f, stderr.String())
				}
			}
			if !strings.Contains(stderr.String(), "MEMCACHED_HOOK_") {
				t.Errorf("help does not say flags can come from the environment:\n%s", stderr.String())
			}
		})
	}
}

// TestRunVersion checks that --version prints the version and commit the
// build stamped in (what -ldflags -X sets), starts no server and is not an
// error.
func TestRunVersion(t *testing.T) {
	defer func(v, c string) { version, commit = v, c }(version, commit)
	version, commit = "v9.8.7", "0123456789abcdef"
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr bytes.Buffer
	if err := run(ctx, []string{"memcached-hook", "--version"}, env(nil), &stdout, &stderr); err != nil {
		t.Fatalf("run(--version) = %v, want nil", err)
	}
	if got, want := stdout.String(), "memcached-hook v9.8.7 (commit 0123456789abcdef, "+runtime.Version()+")\n"; got != want {
		t.Errorf("--version printed %q, want %q", got, want)
	}
	if stderr.Len() != 0 {
		t.Errorf("--version wrote to stderr: %s", stderr.String())
	}
}

// TestRunRejectsBadConfiguration checks that run refuses a command line or
// environment it cannot honour, with an error that names the problem, and
// never starts serving.
func TestRunRejectsBadConfiguration(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
	}{
		{name: "unknown flag", args: []string{"--nope"}, wantErr: "flag provided but not defined: -nope"},
		{name: "positional argument", args: []string{"serve"}, wantErr: `unexpected arguments: ["serve"]`},
		{name: "argument after the flags", args: []string{"--log-level=info", "extra"}, wantErr: `unexpected arguments: ["extra"]`},
		{name: "flag without its value", args: []string{"--listen-address"}, wantErr: "flag needs an argument: -listen-address"},
		{name: "max request bytes not a number", args: []string{"--max-request-bytes=lots"}, wantErr: "-max-request-bytes"},
		{name: "max request bytes zero", args: []string{"--max-request-bytes=0"}, wantErr: "--max-request-bytes must be positive, got 0"},
		{name: "max request bytes negative", args: []string{"--max-request-bytes=-1"}, wantErr: "--max-request-bytes must be positive, got -1"},
		{name: "shutdown delay not a duration", args: []string{"--shutdown-delay=soon"}, wantErr: "-shutdown-delay"},
		{name: "shutdown timeout without unit", args: []string{"--shutdown-timeout=20"}, wantErr: "-shutdown-timeout"},
		{name: "unknown log level", args: []string{"--log-level=loud"}, wantErr: "-log-level"},
		{name: "unknown log format", args: []string{"--log-format=xml"}, wantErr: `--log-format must be json or text, got "xml"`},
		{name: "port out of range", args: []string{"--listen-address=127.0.0.1:99999"}, wantErr: "99999"},
		{name: "bad value in the environment", env: map[string]string{"MEMCACHED_HOOK_MAX_REQUEST_BYTES": "lots"}, wantErr: "MEMCACHED_HOOK_MAX_REQUEST_BYTES"},
		{name: "max concurrent calls zero", args: []string{"--max-concurrent-calls=0"}, wantErr: "--max-concurrent-calls must be positive, got 0"},
		{name: "queue timeout negative", args: []string{"--queue-timeout=-1s"}, wantErr: "--queue-timeout must not be negative"},
		{name: "certificate without key", args: []string{"--tls-cert-file=/x/tls.crt"}, wantErr: "--tls-cert-file and --tls-key-file go together"},
		{name: "key without certificate", args: []string{"--tls-key-file=/x/tls.key"}, wantErr: "--tls-cert-file and --tls-key-file go together"},
		{name: "client CA without TLS", args: []string{"--client-ca-file=/x/ca.crt"}, wantErr: "--client-ca-file needs --tls-cert-file"},
		{name: "basic auth username alone", args: []string{"--basic-auth-username-file=/x/u"}, wantErr: "go together"},
		{name: "token and basic auth", args: []string{"--auth-token-file=/x/t", "--basic-auth-username-file=/x/u", "--basic-auth-password-file=/x/p"}, wantErr: "mutually exclusive"},
		{name: "token file missing", args: []string{"--auth-token-file=/nonexistent/token"}, wantErr: "--auth-token-file"},
		{name: "certificate files missing", args: []string{"--tls-cert-file=/nonexistent/tls.crt", "--tls-key-file=/nonexistent/tls.key"}, wantErr: "--tls-cert-file"},
		{name: "bad log format in the environment", env: map[string]string{"MEMCACHED_HOOK_LOG_FORMAT": "xml"}, wantErr: `--log-format must be json or text, got "xml"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A context already ended and no shutdown delay: a run that
			// wrongly accepted the configuration returns nil at once.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			args := append([]string{"memcached-hook", "--listen-address=127.0.0.1:0", "--shutdown-delay=0s"}, tt.args...)
			var stdout, stderr bytes.Buffer
			err := run(ctx, args, env(tt.env), &stdout, &stderr)
			if err == nil {
				t.Fatalf("run(%q) = nil, want an error containing %q", tt.args, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("run(%q) = %q, want an error containing %q", tt.args, err, tt.wantErr)
			}
			if strings.Contains(stdout.String(), `"listening"`) {
				t.Errorf("run(%q) started serving:\n%s", tt.args, stdout.String())
			}
		})
	}
}

// TestRunConfigFromEnvironment checks that MEMCACHED_HOOK_* variables set
// the flags and that the command line wins over them.
func TestRunConfigFromEnvironment(t *testing.T) {
	// A port already taken: a run that used it would fail to listen.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := strconv.Itoa(busy.Addr().(*net.TCPAddr).Port)

	tests := []struct {
		name         string
		env          map[string]string
		args         []string
		wantHost     string
		wantMaxBytes float64
	}{
		{
			name:         "address from the environment",
			env:          map[string]string{"MEMCACHED_HOOK_LISTEN_ADDRESS": "127.0.0.1:0"},
			wantHost:     "127.0.0.1",
			wantMaxBytes: 32 << 20,
		},
		{
			name:         "address flag wins over the environment",
			env:          map[string]string{"MEMCACHED_HOOK_LISTEN_ADDRESS": "127.0.0.1:" + busyPort},
			args:         []string{"--listen-address=127.0.0.1:0"},
			wantHost:     "127.0.0.1",
			wantMaxBytes: 32 << 20,
		},
		{
			name:         "request limit from the environment",
			env:          map[string]string{"MEMCACHED_HOOK_LISTEN_ADDRESS": "127.0.0.1:0", "MEMCACHED_HOOK_MAX_REQUEST_BYTES": "4096"},
			wantHost:     "127.0.0.1",
			wantMaxBytes: 4096,
		},
		{
			name:         "request limit flag wins over the environment",
			env:          map[string]string{"MEMCACHED_HOOK_LISTEN_ADDRESS": "127.0.0.1:0", "MEMCACHED_HOOK_MAX_REQUEST_BYTES": "4096"},
			args:         []string{"--max-request-bytes=8192"},
			wantHost:     "127.0.0.1",
			wantMaxBytes: 8192,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := startRun(t, append([]string{"--shutdown-delay=0s"}, tt.args...), tt.env)
			host, port, err := net.SplitHostPort(h.addr)
			if err != nil {
				t.Fatalf("logged address %q: %v", h.addr, err)
			}
			if host != tt.wantHost || port == "0" || port == busyPort {
				t.Errorf("listens on %s, want host %s and a free port other than %s", h.addr, tt.wantHost, busyPort)
			}
			if got := h.listening["max_request_bytes"]; got != tt.wantMaxBytes {
				t.Errorf("max_request_bytes = %v, want %v", got, tt.wantMaxBytes)
			}
			if err := h.stop(t); err != nil {
				t.Errorf("run = %v, want nil", err)
			}
		})
	}
}

// TestRunServesAndShutsDownGracefully runs the whole program: it serves a
// captured sync call, and once its context ends it fails /readyz while still
// answering hooks for the shutdown delay, then stops listening and returns
// nil. The 2 s delay leaves room for the three calls made in it on a loaded
// CI machine.
func TestRunServesAndShutsDownGracefully(t *testing.T) {
	body := testutil.LoadCapture(t, "v2/0005-sync.json").Request
	h := startRun(t, []string{"--listen-address=127.0.0.1:0", "--shutdown-delay=2s", "--shutdown-timeout=5s"}, nil)
	base := "http://" + h.addr
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	a := decodeSyncAnswer(t, post(t, client, base+"/sync", body))
	if n := len(childrenOfKind(t, a, "apps/v1", "Deployment")); n != 1 {
		t.Errorf("answer has %d Deployments, want 1", n)
	}
	if res := do(t, client, http.MethodGet, base+"/readyz", "", nil); res.status != http.StatusOK {
		t.Errorf("/readyz while serving: %d %s, want 200", res.status, res.body)
	}

	h.cancel()
	h.stdout.WaitFor(t, "shutting down", h.exited)
	if res := do(t, client, http.MethodGet, base+"/readyz", "", nil); res.status != http.StatusServiceUnavailable {
		t.Errorf("/readyz during the shutdown delay: %d %s, want 503", res.status, res.body)
	}
	decodeSyncAnswer(t, post(t, client, base+"/sync", body))
	if res := do(t, client, http.MethodGet, base+"/healthz", "", nil); res.status != http.StatusOK {
		t.Errorf("/healthz during the shutdown delay: %d %s, want 200", res.status, res.body)
	}

	if err := h.stop(t); err != nil {
		t.Errorf("run = %v, want nil", err)
	}
	h.stdout.WaitFor(t, "stopped", nil)
	if conn, err := net.Dial("tcp", h.addr); err == nil {
		conn.Close()
		t.Errorf("%s still accepts connections after run returned", h.addr)
	}
	for _, l := range h.stdout.Lines(t) {
		if l["level"] == "ERROR" || l["level"] == "WARN" {
			t.Errorf("unexpected log line: %v", l)
		}
	}
	if s := h.stderr.String(); s != "" {
		t.Errorf("run wrote to stderr:\n%s", s)
	}
}
