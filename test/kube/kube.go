// Package kube runs a real, throw-away Kubernetes control plane (etcd and
// kube-apiserver, no controller manager, scheduler or kubelet) for
// integration tests, and drives it with kubectl. With Options, Start and
// Shared also run kube-controller-manager, kube-scheduler, fake Nodes
// (kwok) and Metacontroller, for end-to-end tests (see Options).
//
// The binaries are built from source by `make test` (see
// test/tools/Makefile.inc) and found through the environment variables
// KUBE_APISERVER_BIN, ETCD_BIN and KUBECTL_BIN. When KUBE_APISERVER_BIN is
// unset the tests that need a cluster are skipped, unless CI is set, in which
// case they fail.
//
// A test gets its own cluster from Start. Tests of one package can share a
// single cluster, which saves the start-up time of each, with Shared; such a
// package must stop it from its TestMain by calling Main:
//
//	func TestMain(m *testing.M) { kube.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		c := kube.Shared(t, kube.Options{})
//		out, _, err := c.Kubectl("get", "namespaces")
//		...
//	}
//
// Start and Shared are thin wrappers for tests around
// Launch, which needs no testing.TB: the local playground (make up, see
// test/playground) starts its cluster with it, so that it runs what the
// tests run.
//
// Everything listens on 127.0.0.1 only. Unless Options.Controllers asks for
// them, no controllers run: namespaces other than default, kube-system,
// kube-public and kube-node-lease must be created explicitly, no
// ServiceAccount objects or tokens are created, the ServiceAccount admission
// plugin is disabled (so Pods can be created without one), and nothing is
// ever scheduled or garbage-collected.
package kube

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/example/memcached-operator/test/pki"
	"github.com/example/memcached-operator/test/testutil"
)

// Environment variables read by Start and Shared.
const (
	// EnvKubeAPIServer names the variable holding the kube-apiserver binary.
	EnvKubeAPIServer = "KUBE_APISERVER_BIN"
	// EnvEtcd names the variable holding the etcd binary.
	EnvEtcd = "ETCD_BIN"
	// EnvKubectl names the variable holding the kubectl binary.
	EnvKubectl = "KUBECTL_BIN"
)

const (
	// readyTimeout bounds the wait for /readyz after the processes start.
	readyTimeout = 90 * time.Second
	// stopTimeout is how long a process gets after SIGTERM before SIGKILL.
	stopTimeout = 10 * time.Second
	// kubectlTimeout bounds a single kubectl invocation.
	kubectlTimeout = 2 * time.Minute
	// serviceCIDR is the (small, never routed) Service IP range.
	serviceCIDR = "10.0.0.0/24"
	// startAttempts is how often start is retried when a picked port was
	// taken by someone else between picking and binding it.
	startAttempts = 3
	// maxLogOutput bounds how much of one process's output a failed test
	// prints.
	maxLogOutput = 64 << 10
)

// Cluster is a running etcd and kube-apiserver pair (and what Options
// added) with an admin kubeconfig. Its methods are safe for concurrent use.
type Cluster struct {
	dir        string
	kubeconfig string
	kubectl    string
	server     string
	token      string
	caPEM      []byte

	etcd      *process
	apiserver *process
	// clients are the processes that talk to the API server (controller
	// manager, scheduler, kwok, Metacontroller), stopped before it.
	clients []*process

	metacontrollerMetrics string

	stopOnce sync.Once
}

// Start starts a new cluster for t, running what opts ask for beside the
// API server, and returns once all of it is ready. It registers a cleanup
// with t that stops the processes, and prints their output with t.Log if t
// failed. It skips t (fails it when CI is set) when a program it needs is
// missing.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	progs := lookupPrograms(t, opts)
	dir := t.TempDir()
	began := time.Now()
	c, err := Launch(context.Background(), Config{Dir: dir, Programs: progs, Options: opts, Logf: t.Logf})
	// Cleanups run last-in first-out, so this runs before t.TempDir's
	// removal: the processes are gone and the logs still there.
	t.Cleanup(func() {
		if c == nil {
			return
		}
		c.Stop()
		if t.Failed() {
			c.logOutput(t, nil)
		}
	})
	if err != nil {
		t.Fatalf("kube: starting cluster: %v", err)
	}
	t.Logf("kube: cluster ready at %s in %s (kubeconfig %s)", c.server, time.Since(began).Round(time.Millisecond), c.kubeconfig)
	return c
}

// shared is the package-wide cluster handed out by Shared.
var shared struct {
	mu      sync.Mutex
	started bool
	cluster *Cluster
	err     error
	dir     string
}

// Shared returns the cluster shared by all tests of the test binary,
// starting it on first use with opts (later calls' opts are ignored, so a
// package passes the same every time). It skips or fails t like Start. If
// starting failed once, every later call fails too, with the same error.
// When t fails, Shared prints the processes' output written since the
// call.
//
// The package's TestMain must call Main, which stops the cluster after all
// tests ran. (On Linux the processes are also killed if the test binary
// dies, for instance on a -timeout panic.)
func Shared(t testing.TB, opts Options) *Cluster {
	t.Helper()
	progs := lookupPrograms(t, opts)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.started {
		shared.started = true
		began := time.Now()
		dir, err := os.MkdirTemp("", "kube-shared-")
		if err != nil {
			shared.err = err
		} else {
			shared.dir = dir
			shared.cluster, shared.err = Launch(context.Background(), Config{Dir: dir, Programs: progs, Options: opts, Logf: t.Logf})
		}
		if shared.err != nil {
			if shared.cluster != nil {
				shared.cluster.Stop()
				shared.cluster.logOutput(t, nil)
			}
			t.Fatalf("kube: starting shared cluster: %v", shared.err)
		}
		t.Logf("kube: shared cluster ready at %s in %s (kubeconfig %s)", shared.cluster.server, time.Since(began).Round(time.Millisecond), shared.cluster.kubeconfig)
	}
	if shared.err != nil {
		t.Fatalf("kube: shared cluster failed to start earlier: %v", shared.err)
	}
	c := shared.cluster
	offsets := c.logOffsets()
	t.Cleanup(func() {
		if t.Failed() {
			c.logOutput(t, offsets)
		}
	})
	return c
}

// Main runs the tests of m, stops the cluster started by Shared (if any) and
// exits with the tests' result. Call it from TestMain in packages that use
// Shared. The cluster's directory is removed unless a test failed, in which
// case its path is printed.
func Main(m *testing.M) {
	os.Exit(RunMain(m))
}

// RunMain is Main without the exit: it runs the tests of m, stops the shared
// cluster and returns the exit code, for a TestMain with more to do after
// the cluster is gone.
func RunMain(m *testing.M) int {
	code := m.Run()
	shared.mu.Lock()
	c, dir := shared.cluster, shared.dir
	shared.mu.Unlock()
	if c != nil {
		c.Stop()
	}
	if dir != "" {
		if code == 0 {
			os.RemoveAll(dir)
		} else {
			fmt.Fprintf(os.Stderr, "kube: shared cluster files kept in %s\n", dir)
		}
	}
	return code
}

// Programs are the paths of the programs a cluster runs. Those its Options
// do not ask for may be empty.
type Programs struct {
	APIServer, Etcd, Kubectl string
	// ControllerManager and Scheduler, for Options.Controllers.
	ControllerManager, Scheduler string
	// Kwok, for Options.Nodes.
	Kwok string
	// Metacontroller, for Options.Metacontroller.
	Metacontroller string
}

// MissingError says that a program is not there: KUBE_APISERVER_BIN is
// unset (the tests were not run through make), or a program Options ask
// for beside the API server was not built. A test skips on it outside CI.
type MissingError struct{ msg string }

func (e *MissingError) Error() string { return e.msg }

// ProgramsFromEnv reads the paths of the programs opts need from the
// environment getenv reads (KUBE_APISERVER_BIN, ETCD_BIN, KUBECTL_BIN and
// those in controlplane.go), which `make test` and `make up` set, and
// checks the files exist. The error is a *MissingError when the harness is not
// configured at all or a program opts add is missing, and a plain error
// when KUBE_APISERVER_BIN is set but the rest of the basics are not.
func ProgramsFromEnv(getenv func(string) string, opts Options) (Programs, error) {
	p := Programs{
		APIServer: getenv(EnvKubeAPIServer),
		Etcd:      getenv(EnvEtcd),
		Kubectl:   getenv(EnvKubectl),
	}
	if p.APIServer == "" {
		return p, &MissingError{fmt.Sprintf("kube: %s is not set; run `make test` to build kube-apiserver, etcd and kubectl and run the integration tests", EnvKubeAPIServer)}
	}
	for _, v := range []struct{ env, path string }{
		{EnvKubeAPIServer, p.APIServer}, {EnvEtcd, p.Etcd}, {EnvKubectl, p.Kubectl},
	} {
		if v.path == "" {
			return p, fmt.Errorf("kube: %s is set but %s is not; run `make test`", EnvKubeAPIServer, v.env)
		}
		if _, err := os.Stat(v.path); err != nil {
			return p, fmt.Errorf("kube: %s: %v; run `make test` to build it", v.env, err)
		}
	}
	err := extraProgramsFromEnv(getenv, opts, &p)
	return p, err
}

// lookupPrograms is ProgramsFromEnv for a test: it skips t on a
// *MissingError (fails it when CI is set) and fails it on another error.
func lookupPrograms(t testing.TB, opts Options) Programs {
	t.Helper()
	p, err := ProgramsFromEnv(os.Getenv, opts)
	var missing *MissingError
	switch {
	case errors.As(err, &missing):
		testutil.Unavailable(t, err.Error())
	case err != nil:
		t.Fatal(err)
	}
	return p
}

// Config says what Launch starts and where.
type Config struct {
	// Dir holds the cluster's files: certificates, kubeconfig, etcd's
	// data, and each process's output in <name>.log, all in a
	// subdirectory per attempt (run1, run2, ...; see Cluster.Dir). It is
	// made if missing.
	Dir string
	// Programs are the programs to run; those Options need must be set.
	Programs Programs
	// Options say what runs beside etcd and kube-apiserver.
	Options Options
	// Logf, if set, is told of progress and of retries.
	Logf testutil.Logf
}

// Launch starts etcd and kube-apiserver (and what cfg.Options ask for) with
// files under cfg.Dir, all on 127.0.0.1, and returns once all of it is
// ready. It retries with new ports when a port it picked was taken. The
// processes run until Stop (on Linux they are also killed when this process
// dies). When ctx ends before they are ready, Launch stops them and returns
// ctx's error.
//
// On error Launch has stopped everything it started; the Cluster it
// returns then, if not nil, only tells where their output is (LogPath,
// Dir).
func Launch(ctx context.Context, cfg Config) (*Cluster, error) {
	if err := cfg.Options.check(); err != nil {
		return nil, err
	}
	if err := cfg.Programs.check(cfg.Options); err != nil {
		return nil, err
	}
	var (
		c   *Cluster
		err error
	)
	for attempt := 1; attempt <= startAttempts; attempt++ {
		c, err = launchOnce(ctx, cfg, filepath.Join(cfg.Dir, "run"+strconv.Itoa(attempt)))
		if err == nil || c == nil || !c.portConflict() || attempt == startAttempts {
			return c, err
		}
		cfg.Logf.Printf("kube: port conflict on attempt %d, retrying: %v", attempt, err)
	}
	return c, err
}

// check refuses programs that leave out one the options need.
func (p Programs) check(opts Options) error {
	need := map[string]string{"kube-apiserver": p.APIServer, "etcd": p.Etcd, "kubectl": p.Kubectl}
	if opts.Controllers {
		need["kube-controller-manager"], need["kube-scheduler"] = p.ControllerManager, p.Scheduler
	}
	if len(opts.Nodes) > 0 {
		need["kwok"] = p.Kwok
	}
	if opts.Metacontroller {
		need["Metacontroller"] = p.Metacontroller
	}
	for _, what := range slices.Sorted(maps.Keys(need)) {
		if need[what] == "" {
			return fmt.Errorf("kube: Config.Programs has no path for %s", what)
		}
	}
	return nil
}

// launchOnce makes one attempt of Launch. On error it has stopped what it
// started.
func launchOnce(ctx context.Context, cfg Config, dir string) (*Cluster, error) {
	opts, progs := cfg.Options, cfg.Programs
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ports, err := freePorts(3 + opts.portsNeeded())
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, apiPort := ports[0], ports[1], ports[2]

	files, err := writePKI(dir)
	if err != nil {
		return nil, err
	}
	token, err := randomHex(24)
	if err != nil {
		return nil, err
	}
	tokenFile := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(token+`,admin,admin-uid,"system:masters"`+"\n"), 0o600); err != nil {
		return nil, err
	}

	c := &Cluster{
		dir:        dir,
		kubeconfig: filepath.Join(dir, "kubeconfig"),
		kubectl:    progs.Kubectl,
		server:     "https://127.0.0.1:" + strconv.Itoa(apiPort),
		token:      token,
		caPEM:      files.caPEM,
	}
	if err := os.WriteFile(c.kubeconfig, c.kubeconfigYAML(), 0o600); err != nil {
		return nil, err
	}

	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdClient)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(etcdPeer)
	c.etcd, err = startProcess(dir, "etcd", progs.Etcd,
		"--name=test",
		"--data-dir="+filepath.Join(dir, "etcd-data"),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=test="+peerURL,
		"--initial-cluster-state=new",
		// Throw-away data: durability buys nothing and costs seconds.
		"--unsafe-no-fsync",
	)
	if err != nil {
		return nil, err
	}

	admission := "--disable-admission-plugins=ServiceAccount"
	if opts.Controllers {
		// The controller manager makes every namespace's ServiceAccount,
		// so the plugin can stay on, as in a real cluster.
		admission = "--enable-admission-plugins=ServiceAccount"
	}
	c.apiserver, err = startProcess(dir, "kube-apiserver", progs.APIServer,
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(apiPort),
		"--cert-dir="+filepath.Join(dir, "apiserver-certs"),
		"--tls-cert-file="+files.servingCert,
		"--tls-private-key-file="+files.servingKey,
		"--client-ca-file="+files.caCert,
		"--token-auth-file="+tokenFile,
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range="+serviceCIDR,
		"--service-account-issuer="+c.server,
		"--service-account-key-file="+files.saPublic,
		"--service-account-signing-key-file="+files.saPrivate,
		// The ServiceAccount plugin rejects Pods whose service account
		// does not exist, and without a controller manager none does.
		admission,
		"--allow-privileged=true",
		"--profiling=false",
		"--shutdown-delay-duration=0s",
		// The "kubernetes" Service's Endpoints cannot hold a loopback
		// address, so the default reconciler would log an error every 10s.
		"--endpoint-reconciler-type=none",
		// A Service's trafficDistribution (the zones' proxy Service asks
		// for PreferClose) is alpha in 1.30 (test/tools/go.mod) and off by
		// default: without the gate the API server drops the field on
		// write, as sync/api/v1alpha1/README.md (Zones) says of 1.30. It is
		// on by default from 1.31 and locked on from 1.33 (GA): drop this
		// flag when the tools move past 1.30, before a release removes the
		// gate and refuses it.
		"--feature-gates=ServiceTrafficDistribution=true",
	)
	if err != nil {
		c.Stop()
		return c, err
	}

	if err := c.waitReady(ctx, readyTimeout); err != nil {
		c.Stop()
		return c, err
	}
	cfg.Logf.Printf("kube: etcd and kube-apiserver ready at %s", c.server)
	if err := c.startMore(ctx, cfg, dir, files, ports[3:]); err != nil {
		c.Stop()
		return c, err
	}
	return c, nil
}

// Kubeconfig returns the path of an admin kubeconfig file for the cluster.
func (c *Cluster) Kubeconfig() string { return c.kubeconfig }

// Dir returns the directory holding the cluster's files and its processes'
// output (<name>.log; see LogPath).
func (c *Cluster) Dir() string { return c.dir }

// Server returns the API server's URL, https://127.0.0.1:PORT.
func (c *Cluster) Server() string { return c.server }

// Kubectl runs kubectl with args against the cluster and returns its
// standard output and error. err is non-nil when kubectl fails, including
// when it exits non-zero (an *exec.ExitError).
func (c *Cluster) Kubectl(args ...string) (stdout, stderr string, err error) {
	return c.KubectlStdin(nil, args...)
}

// KubectlStdin is like Kubectl but feeds stdin to kubectl's standard input,
// as for `kubectl apply -f -`.
func (c *Cluster) KubectlStdin(stdin []byte, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	cmd := c.KubectlCommand(ctx, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("kubectl %s: timed out after %s: %w", strings.Join(args, " "), kubectlTimeout, err)
	}
	return out.String(), errOut.String(), err
}

// KubectlCommand returns kubectl with args against the cluster, not started,
// for what Kubectl cannot do: run for long (`get --watch`) or stream its
// output. ctx ends it.
func (c *Cluster) KubectlCommand(ctx context.Context, args ...string) *exec.Cmd {
	full := append([]string{
		"--kubeconfig=" + c.kubeconfig,
		"--cache-dir=" + filepath.Join(c.dir, "kubectl-cache"),
	}, args...)
	cmd := exec.CommandContext(ctx, c.kubectl, full...)
	// KUBERC=off keeps a developer's ~/.kube/kuberc from changing
	// kubectl's defaults.
	cmd.Env = append(os.Environ(), "KUBERC=off", "KUBECONFIG="+c.kubeconfig)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// kubeconfigYAML renders the admin kubeconfig.
func (c *Cluster) kubeconfigYAML() []byte {
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: admin
  user:
    token: %s
contexts:
- name: test
  context:
    cluster: test
    user: admin
    namespace: default
current-context: test
`, c.server, base64.StdEncoding.EncodeToString(c.caPEM), c.token))
}

// waitReady polls /readyz until it answers 200, a process exits, ctx ends
// or timeout passes.
func (c *Cluster) waitReady(ctx context.Context, timeout time.Duration) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.caPEM)
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(timeout)
	last := "no answer yet"
	for {
		for _, p := range []*process{c.etcd, c.apiserver} {
			select {
			case <-p.done:
				return fmt.Errorf("%s exited before the API server was ready: %v (output in %s)", p.name, p.err, p.logPath)
			default:
			}
		}
		req, err := http.NewRequest(http.MethodGet, c.server+"/readyz", nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+c.token)
		var ok bool
		if ok, last = probe(client, req); ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("API server not ready after %s; last /readyz: %s (output in %s)", timeout, last, c.apiserver.logPath)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// sleep waits for d, or returns ctx's error if it ends first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("kube: start-up stopped: %w", context.Cause(ctx))
	case <-t.C:
		return nil
	}
}

// Stop stops the API server's clients, then the API server, then etcd (in
// this order, so that none logs the loss of another), each with SIGTERM and,
// after 10 s, SIGKILL, and returns once all have exited. It is idempotent.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		var wg sync.WaitGroup
		for _, p := range c.clients {
			wg.Go(p.stop)
		}
		wg.Wait()
		if c.apiserver != nil {
			c.apiserver.stop()
		}
		if c.etcd != nil {
			c.etcd.stop()
		}
	})
}

// processes returns every started process, in start order.
func (c *Cluster) processes() []*process {
	return append([]*process{c.etcd, c.apiserver}, c.clients...)
}

// portConflict reports whether a process failed because its port was taken.
func (c *Cluster) portConflict() bool {
	for _, p := range c.processes() {
		if p == nil {
			continue
		}
		if b, err := os.ReadFile(p.logPath); err == nil && bytes.Contains(b, []byte("address already in use")) {
			return true
		}
	}
	return false
}

// logOffsets returns the current sizes of the processes' log files.
func (c *Cluster) logOffsets() map[string]int64 {
	m := map[string]int64{}
	for _, p := range c.processes() {
		if p == nil {
			continue
		}
		if fi, err := os.Stat(p.logPath); err == nil {
			m[p.name] = fi.Size()
		}
	}
	return m
}

// logOutput prints the processes' output with t.Log, starting at the given
// offsets (nil: from the start), at most the last maxLogOutput bytes of
// each: the files hold the rest.
func (c *Cluster) logOutput(t testing.TB, offsets map[string]int64) {
	t.Helper()
	for _, p := range c.processes() {
		if p == nil {
			continue
		}
		b, err := os.ReadFile(p.logPath)
		if err != nil {
			t.Logf("kube: reading %s output: %v", p.name, err)
			continue
		}
		if off := offsets[p.name]; off > 0 && off <= int64(len(b)) {
			b = b[off:]
		}
		cut := ""
		if len(b) > maxLogOutput {
			cut = fmt.Sprintf(" (its last %d bytes; %d before them)", maxLogOutput, len(b)-maxLogOutput)
			b = b[len(b)-maxLogOutput:]
		}
		t.Logf("kube: ---- %s output (%s)%s ----\n%s\n---- end of %s output ----", p.name, p.logPath, cut, b, p.name)
	}
}

// process is a started child process whose output goes to a file.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited
	err     error         // Wait's result, valid after done is closed
}

// startProcess starts bin with args, writing its output to dir/name.log.
func startProcess(dir, name, bin string, args ...string) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child keeps its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = childEnv()
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// childEnv returns the environment for the processes: the test's own,
// less the ETCD_* and KWOK_* variables, which etcd and kwok would read as
// flags (ETCD_BIN and KWOK_BIN among them), and KUBECONFIG, so that a
// developer's never reaches them.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ETCD_") && !strings.HasPrefix(kv, "KWOK_") && !strings.HasPrefix(kv, "KUBECONFIG=") {
			env = append(env, kv)
		}
	}
	return env
}

// stop sends SIGTERM, waits up to stopTimeout, then kills the process.
func (p *process) stop() { testutil.Stop(p.cmd, p.done, syscall.SIGTERM, stopTimeout) }

// freePorts returns n distinct free TCP ports on 127.0.0.1. They are only
// reserved until it returns, so start retries on a conflict.
func freePorts(n int) ([]int, error) {
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// pkiFiles holds the paths written by writePKI.
type pkiFiles struct {
	caPEM                   []byte
	caCert                  string
	servingCert, servingKey string
	saPublic, saPrivate     string
}

// writePKI creates a CA, a serving certificate for the API server and a
// service-account signing key pair under dir.
func writePKI(dir string) (pkiFiles, error) {
	var files pkiFiles
	ca, err := pki.NewCA("kube-test-ca")
	if err != nil {
		return files, err
	}
	// 10.0.0.1 is the first address of serviceCIDR: the kubernetes
	// Service's ClusterIP.
	servingCert, servingKey, err := ca.Issue("kube-apiserver", "localhost", "kubernetes", "kubernetes.default",
		"kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "127.0.0.1", "10.0.0.1")
	if err != nil {
		return files, err
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return files, err
	}
	saKeyDER, err := x509.MarshalPKCS8PrivateKey(saKey)
	if err != nil {
		return files, err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return files, err
	}

	files.caPEM = ca.PEM
	files.caCert = filepath.Join(dir, "ca.crt")
	files.servingCert = filepath.Join(dir, "apiserver.crt")
	files.servingKey = filepath.Join(dir, "apiserver.key")
	files.saPublic = filepath.Join(dir, "sa.pub")
	files.saPrivate = filepath.Join(dir, "sa.key")
	for _, f := range []struct {
		path string
		data []byte
	}{
		{files.caCert, files.caPEM},
		{files.servingCert, servingCert},
		{files.servingKey, servingKey},
		{files.saPrivate, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: saKeyDER})},
		{files.saPublic, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER})},
	} {
		if err := os.WriteFile(f.path, f.data, 0o600); err != nil {
			return files, err
		}
	}
	return files, nil
}

// randomHex returns n random bytes, hex-encoded.
func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", errors.New("reading random bytes: " + err.Error())
	}
	return hex.EncodeToString(b), nil
}

// probe sends req once and tells whether it was answered 200 OK, and if
// not, what came back instead, for the error after the last try.
func probe(client *http.Client, req *http.Request) (bool, string) {
	resp, err := client.Do(req)
	if err != nil {
		return false, err.Error()
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return true, ""
	}
	return false, fmt.Sprintf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(body))
}
