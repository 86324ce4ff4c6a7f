package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/test/testutil"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// agent is run() serving in a goroutine.
type agent struct {
	addr, admin string
	stdout      *testutil.LogSink
	stderr      bytes.Buffer
	cancel      context.CancelFunc
	exited      chan struct{}
	err         error
}

// startAgent starts run with args and waits until it listens.
func startAgent(t *testing.T, args []string, vars map[string]string) *agent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a := &agent{stdout: testutil.NewLogSink(), cancel: cancel, exited: make(chan struct{})}
	base := []string{"memcached-agent", "--listen=127.0.0.1:0", "--admin-listen=127.0.0.1:0", "--shutdown-delay=0s"}
	go func() {
		defer close(a.exited)
		a.err = run(ctx, append(base, args...), env(vars), a.stdout, &a.stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-a.exited:
		case <-time.After(30 * time.Second):
			t.Errorf("run did not return after its context ended")
		}
	})
	l := a.stdout.WaitFor(t, "listening", a.exited)
	a.addr, _ = l["address"].(string)
	a.admin, _ = l["admin_address"].(string)
	return a
}

func (a *agent) stop(t *testing.T) error {
	t.Helper()
	a.cancel()
	select {
	case <-a.exited:
		return a.err
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return")
		return nil
	}
}

// httpGet returns the status and body of GET url.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// ask sends one command line on a new connection (TLS when cfg is set)
// and reads the answer: up to and including END, or one line.
func ask(t *testing.T, addr string, cfg *tls.Config, line string) (string, error) {
	t.Helper()
	var c net.Conn
	var err error
	if cfg != nil {
		c, err = tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	} else {
		c, err = net.DialTimeout("tcp", addr, 5*time.Second)
	}
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, line); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	var out strings.Builder
	for {
		l, err := r.ReadString('\n')
		out.WriteString(l)
		if err != nil {
			return out.String(), err
		}
		if !strings.HasPrefix(out.String(), "CONFIG ") && !strings.HasPrefix(out.String(), "VALUE ") || l == "END\r\n" {
			return out.String(), nil
		}
	}
}

// memcachedJSON is Memcached cache in namespace shop as kubectl prints it.
func memcachedJSON(version int64, ips ...string) []byte {
	var slots []string
	for i, ip := range ips {
		slots = append(slots, fmt.Sprintf(`{"slot":%d,"pod":"cache-%d","ip":%q,"state":"Serving"}`, i, i, ip))
	}
	return []byte(fmt.Sprintf(`{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":"cache","namespace":"shop"},"spec":{"size":%d},"status":{"slotTable":{"version":%d,"slots":[%s]}}}`,
		len(ips), version, strings.Join(slots, ",")))
}

// TestRunHelp checks that asking for help prints every flag, starts
// nothing and is not an error.
func TestRunHelp(t *testing.T) {
	flags := []string{"version", "memcached", "namespace", "kubeconfig", "from-file", "file-poll-interval", "listen", "admin-listen",
		"tls-cert-file", "tls-key-file", "client-ca-file", "tls-min-version", "max-connections", "idle-timeout", "shutdown-delay",
		"shutdown-timeout", "log-level", "log-format", "report-file", "pool-file", "proxy-addr", "handoff-settle", "handoff-lock-ttl"}
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"memcached-agent", "--help"}, env(nil), &stdout, &stderr); err != nil {
		t.Fatalf("run(--help) = %v", err)
	}
	for _, f := range flags {
		if !strings.Contains(stderr.String(), "-"+f+" ") && !strings.Contains(stderr.String(), "-"+f+"\n") {
			t.Errorf("help does not mention -%s:\n%s", f, stderr.String())
		}
	}
	if !strings.Contains(stderr.String(), "MEMCACHED_AGENT_") || stdout.Len() != 0 {
		t.Errorf("help: stdout %q, stderr:\n%s", stdout.String(), stderr.String())
	}
}

// TestRunVersion checks --version.
func TestRunVersion(t *testing.T) {
	defer func(v, c string) { version, commit = v, c }(version, commit)
	version, commit = "v1.2.3", "abc"
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"memcached-agent", "--version"}, env(nil), &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if got, want := stdout.String(), "memcached-agent v1.2.3 (commit abc, "+runtime.Version()+")\n"; got != want {
		t.Errorf("--version printed %q, want %q", got, want)
	}
}

// TestRunRejectsBadConfiguration checks that run refuses what it cannot
// honour, naming the problem, before it listens.
func TestRunRejectsBadConfiguration(t *testing.T) {
	defer func(p string) { serviceAccountNamespace = p }(serviceAccountNamespace)
	serviceAccountNamespace = "/nonexistent/namespace"
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\n"), 0o600)
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
	}{
		{name: "no memcached", args: []string{"--from-file=/x"}, wantErr: "--memcached is required"},
		{name: "unknown flag", args: []string{"--nope"}, wantErr: "flag provided but not defined: -nope"},
		{name: "positional argument", args: []string{"--memcached=a", "serve"}, wantErr: `unexpected arguments: ["serve"]`},
		{name: "no namespace for the watch", args: []string{"--memcached=a"}, wantErr: "no namespace"},
		{name: "file and kubeconfig", args: []string{"--memcached=a", "--from-file=/x", "--kubeconfig=/y"}, wantErr: "mutually exclusive"},
		{name: "certificate without key", args: []string{"--memcached=a", "--from-file=/x", "--tls-cert-file=/c"}, wantErr: "go together"},
		{name: "client CA without TLS", args: []string{"--memcached=a", "--from-file=/x", "--client-ca-file=/c"}, wantErr: "--client-ca-file needs --tls-cert-file"},
		{name: "TLS 1.1", args: []string{"--memcached=a", "--from-file=/x", "--tls-min-version=1.1"}, wantErr: "1.2 or 1.3"},
		{name: "certificate files missing", args: []string{"--memcached=a", "--from-file=/x", "--tls-cert-file=/nonexistent/c", "--tls-key-file=/nonexistent/k"}, wantErr: "--tls-cert-file"},
		{name: "no connections", args: []string{"--memcached=a", "--from-file=/x", "--max-connections=0"}, wantErr: "--max-connections must be positive"},
		{name: "no idle timeout", args: []string{"--memcached=a", "--from-file=/x", "--idle-timeout=0s"}, wantErr: "--idle-timeout must be positive"},
		{name: "bad poll interval", args: []string{"--memcached=a", "--from-file=/x", "--file-poll-interval=0s"}, wantErr: "--file-poll-interval"},
		{name: "log format", args: []string{"--memcached=a", "--from-file=/x", "--log-format=xml"}, wantErr: "json or text"},
		{name: "bad value in the environment", args: []string{"--from-file=/x"}, env: map[string]string{"MEMCACHED_AGENT_MEMCACHED": "a", "MEMCACHED_AGENT_IDLE_TIMEOUT": "soon"}, wantErr: "MEMCACHED_AGENT_IDLE_TIMEOUT"},
		{name: "no API server", args: []string{"--memcached=a", "--namespace=shop"}, wantErr: "reaching the API server"},
		{name: "a kubeconfig without a cluster", args: []string{"--memcached=a", "--namespace=shop", "--kubeconfig=" + kubeconfig}, wantErr: "reaching the API server"},
		{name: "lock TTL under 3s", args: []string{"--memcached=a", "--from-file=/x", "--handoff-lock-ttl=1s"}, wantErr: "--handoff-lock-ttl must be at least 3s"},
		{name: "port out of range", args: []string{"--memcached=a", "--from-file=/x", "--listen=127.0.0.1:99999"}, wantErr: "99999"},
		{name: "a proxy address without a port", args: []string{"--memcached=a", "--from-file=/x", "--pool-file=/x/pool", "--proxy-addr=localhost"}, wantErr: "--proxy-addr must be host:port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), append([]string{"memcached-agent", "--admin-listen=127.0.0.1:0"}, tt.args...), env(tt.env), &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("run(%q) = %v, want an error containing %q", tt.args, err, tt.wantErr)
			}
			if strings.Contains(stdout.String(), `"listening"`) {
				t.Errorf("run(%q) started serving", tt.args)
			}
		})
	}
}

// TestRunConfigFromEnvironment checks that MEMCACHED_AGENT_* variables
// set the flags, POD_NAMESPACE the namespace, and the command line wins.
func TestRunConfigFromEnvironment(t *testing.T) {
	a := startAgent(t, []string{"--namespace=flag-ns"}, map[string]string{
		"MEMCACHED_AGENT_MEMCACHED": "cache", "MEMCACHED_AGENT_FROM_FILE": "/nonexistent", "MEMCACHED_AGENT_NAMESPACE": "env-ns",
		"MEMCACHED_AGENT_MAX_CONNECTIONS": "7",
	})
	l := a.stdout.WaitFor(t, "listening", nil)
	if l["memcached"] != "cache" || l["namespace"] != "flag-ns" || l["max_connections"] != float64(7) || l["source"] != "file /nonexistent" {
		t.Errorf("listening with %v", l)
	}
	b := startAgent(t, []string{"--memcached=cache", "--from-file=/nonexistent"}, map[string]string{"POD_NAMESPACE": "pod-ns"})
	if l := b.stdout.WaitFor(t, "listening", nil); l["namespace"] != "pod-ns" {
		t.Errorf("namespace %v, want POD_NAMESPACE's", l["namespace"])
	}
}

// TestRunFromFile runs the whole program on a file: before the file holds
// a good list /readyz fails and the cluster commands answer SERVER_ERROR;
// then the list is served, follows a rewrite, shows in /metrics; on
// shutdown /readyz fails while the endpoint still answers for the delay,
// then the ports close and run returns nil.
func TestRunFromFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.json")
	a := startAgent(t, []string{"--memcached=cache", "--from-file=" + path, "--file-poll-interval=20ms", "--shutdown-delay=1s"}, nil)
	admin := "http://" + a.admin

	if code, body := httpGet(t, admin+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "no server list yet") {
		t.Errorf("/readyz before a list: %d %q", code, body)
	}
	if code, _ := httpGet(t, admin+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
	if got, _ := ask(t, a.addr, nil, "config get cluster\r\n"); got != "SERVER_ERROR no server list yet\r\n" {
		t.Errorf("config get cluster before a list: %q", got)
	}
	// The follower has found no file (counted once, below) before the test
	// writes it.
	waitForMetric(t, admin, `memcached_agent_follow_errors_total{source="file"} 1`)

	testutil.WriteFileAtomic(t, path, memcachedJSON(1767225600, "10.0.0.1", "10.0.0.2"))
	a.stdout.WaitFor(t, "serving a new server list", a.exited)
	want := "CONFIG cluster 0 89\r\n1767225600\n10-0-0-1.cache.shop.svc|10.0.0.1|11211 10-0-0-2.cache.shop.svc|10.0.0.2|11211\n\r\nEND\r\n"
	if got, err := ask(t, a.addr, nil, "config get cluster\r\n"); got != want {
		t.Errorf("config get cluster = %q, %v; want %q", got, err, want)
	}
	if code, body := httpGet(t, admin+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz with a list: %d %q", code, body)
	}

	changed := time.Now()
	testutil.WriteFileAtomic(t, path, memcachedJSON(1767225601, "10.0.0.1", "10.0.0.2", "10.0.0.3"))
	testutil.EventuallyEvery(t, 10*time.Second, 10*time.Millisecond, func() error {
		got, _ := ask(t, a.addr, nil, "get AmazonElastiCache:cluster\r\n")
		if !strings.Contains(got, "\n1767225601\n") {
			return fmt.Errorf("the rewrite was not served: %q", got)
		}
		if !strings.Contains(got, "|10.0.0.3|11211\n") {
			t.Errorf("new list %q", got)
		}
		return nil
	})
	testutil.Benchmark("BenchmarkRunFromFileServed", "%.1f ms/op", float64(time.Since(changed).Microseconds())/1000)

	// A status computed from an older copy landed last, with a lower
	// version: its list is served, under a version above the one served.
	testutil.WriteFileAtomic(t, path, memcachedJSON(5, "10.0.0.9"))
	testutil.EventuallyEvery(t, 10*time.Second, 10*time.Millisecond, func() error {
		got, _ := ask(t, a.addr, nil, "get AmazonElastiCache:cluster\r\n")
		if !strings.Contains(got, "\n1767225602\n") || !strings.Contains(got, "|10.0.0.9|11211\n") {
			return fmt.Errorf("a lower version's list was not served under version 1767225602: %q", got)
		}
		return nil
	})
	_, metricsText := httpGet(t, admin+"/metrics")
	for _, line := range []string{
		"memcached_agent_list_version 1.767225602e+09",
		"memcached_agent_list_servers 1",
		`memcached_agent_commands_total{kind="config_get_cluster"} 2`,
		`memcached_agent_lists_refused_total{reason="no_servers"} 0`,
		`memcached_agent_follow_errors_total{source="file"} 1`,
		"memcached_agent_list_published_timestamp_seconds 1.7",
	} {
		if !strings.Contains(metricsText, line) {
			t.Errorf("/metrics has no %q", line)
		}
	}

	a.cancel()
	a.stdout.WaitFor(t, "shutting down: /readyz fails from now on", nil)
	if code, body := httpGet(t, admin+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "shutting down") {
		t.Errorf("/readyz while shutting down: %d %q", code, body)
	}
	if got, _ := ask(t, a.addr, nil, "version\r\n"); got != "VERSION 1.6.45\r\n" {
		t.Errorf("version during the shutdown delay: %q", got)
	}
	if err := a.stop(t); err != nil {
		t.Errorf("run = %v, want nil", err)
	}
	for _, addr := range []string{a.addr, a.admin} {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after run returned", addr)
		}
	}
	if a.stderr.Len() > 0 {
		t.Errorf("stderr: %s", a.stderr.String())
	}
}

// secretDir lays out files as kubelet mounts a Secret: each name a
// symlink into ..data, itself a symlink to a timestamped directory that
// an update replaces whole.
type secretDir struct {
	t   *testing.T
	dir string
	gen int
}

func (s *secretDir) write(files map[string][]byte) {
	s.t.Helper()
	s.gen++
	ts := fmt.Sprintf("..2026_%d", s.gen)
	if err := os.Mkdir(filepath.Join(s.dir, ts), 0o755); err != nil {
		s.t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(s.dir, ts, name), b, 0o600); err != nil {
			s.t.Fatal(err)
		}
		link := filepath.Join(s.dir, name)
		if _, err := os.Lstat(link); err != nil {
			os.Symlink(filepath.Join("..data", name), link)
		}
	}
	tmp := filepath.Join(s.dir, "..data_tmp")
	os.Remove(tmp)
	if err := os.Symlink(ts, tmp); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, "..data")); err != nil {
		s.t.Fatal(err)
	}
}

// TestRunTLS serves the endpoint over TLS with required client
// certificates, from a Secret-like directory: a client with a certificate
// from the CA is answered, one without or from another CA is refused, a
// TLS 1.2 client is refused under --tls-min-version=1.3, and a rotated
// certificate (the ..data symlink swapped) is served at the next
// handshake with no restart.
func TestRunTLS(t *testing.T) {
	ca := testutil.NewCA(t, "memcached-ca")
	dir := &secretDir{t: t, dir: t.TempDir()}
	crt, key := ca.Issue(t, "cache", "127.0.0.1")
	dir.write(map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": ca.PEM})
	path := filepath.Join(t.TempDir(), "cache.json")
	testutil.WriteFileAtomic(t, path, memcachedJSON(1767225600, "10.0.0.1"))
	a := startAgent(t, []string{"--memcached=cache", "--from-file=" + path, "--tls-cert-file=" + filepath.Join(dir.dir, "tls.crt"),
		"--tls-key-file=" + filepath.Join(dir.dir, "tls.key"), "--client-ca-file=" + filepath.Join(dir.dir, "ca.crt"), "--tls-min-version=1.3"}, nil)
	a.stdout.WaitFor(t, "serving a new server list", a.exited)

	var served []string
	client := &tls.Config{
		RootCAs:      ca.Pool(),
		Certificates: []tls.Certificate{ca.ClientCert(t, "app")},
		VerifyConnection: func(cs tls.ConnectionState) error {
			served = append(served, cs.PeerCertificates[0].SerialNumber.String())
			return nil
		},
	}
	if got, err := ask(t, a.addr, client, "config get cluster\r\n"); err != nil || !strings.HasPrefix(got, "CONFIG cluster 0 ") {
		t.Fatalf("client with a certificate: %q, %v", got, err)
	}

	noCert := &tls.Config{RootCAs: ca.Pool()}
	if got, err := ask(t, a.addr, noCert, "version\r\n"); err == nil {
		t.Errorf("a client without a certificate was answered %q", got)
	}
	other := testutil.NewCA(t, "other-ca")
	wrongCA := &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{other.ClientCert(t, "app")}}
	if got, err := ask(t, a.addr, wrongCA, "version\r\n"); err == nil {
		t.Errorf("a client with another CA's certificate was answered %q", got)
	}
	old := client.Clone()
	old.MaxVersion = tls.VersionTLS12
	if got, err := ask(t, a.addr, old, "version\r\n"); err == nil {
		t.Errorf("a TLS 1.2 client was answered %q under --tls-min-version=1.3", got)
	}

	crt2, key2 := ca.Issue(t, "cache-rotated", "127.0.0.1")
	dir.write(map[string][]byte{"tls.crt": crt2, "tls.key": key2, "ca.crt": ca.PEM})
	before := len(served)
	if got, err := ask(t, a.addr, client, "version\r\n"); err != nil || got != "VERSION 1.6.45\r\n" {
		t.Fatalf("after the rotation: %q, %v", got, err)
	}
	if len(served) != before+1 || served[0] == served[len(served)-1] {
		t.Errorf("certificate serials served %v: the rotated one was not picked up", served)
	}
	a.stdout.WaitFor(t, "reloaded TLS certificate", nil)
}

// TestRunWithoutEndpoint runs the agent as the hook does for hand-offs
// alone (--listen= empty): it listens on nothing but the admin port, and
// /readyz says whether it follows the Memcached with a good status.
func TestRunWithoutEndpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.json")
	a := startAgent(t, []string{"--listen=", "--memcached=cache", "--from-file=" + path, "--file-poll-interval=20ms"}, nil)
	if a.addr != "" {
		t.Errorf("listening on %q with --listen=", a.addr)
	}
	admin := "http://" + a.admin
	if code, body := httpGet(t, admin+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "no good status yet") {
		t.Errorf("/readyz before a status: %d %q", code, body)
	}
	testutil.WriteFileAtomic(t, path, memcachedJSON(1767225600, "10.0.0.1", "10.0.0.2"))
	a.stdout.WaitFor(t, "serving a new server list", a.exited)
	if code, body := httpGet(t, admin+"/readyz"); code != http.StatusOK || !strings.Contains(body, "following version 1767225600") {
		t.Errorf("/readyz with a status: %d %q", code, body)
	}
	if err := a.stop(t); err != nil {
		t.Errorf("run = %v, want nil", err)
	}
}

// TestExposedNames runs the agent on a file holding a list and holds the
// names of the metrics its /metrics shows to
// test/monitoring/testdata/exposed/memcached-agent.txt (go test -update
// rewrites it), which the alerts and the dashboard are checked against.
// Every metric is registered at the start, in every mode (the
// configuration endpoint, the hand-offs, the proxy's pool), each label
// value shown from the start.
func TestExposedNames(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.json")
	testutil.WriteFileAtomic(t, path, memcachedJSON(1767225600, "10.0.0.1"))
	a := startAgent(t, []string{"--memcached=cache", "--from-file=" + path, "--file-poll-interval=20ms"}, nil)
	a.stdout.WaitFor(t, "serving a new server list", a.exited)
	code, text := httpGet(t, "http://"+a.admin+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, text)
	}
	testutil.CheckExposedNames(t, "memcached-agent", "memcached_agent_", []byte(text))
}
