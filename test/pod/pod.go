//go:build linux

// Package pod runs, on this machine, the Pod the hook answers for a
// Memcached: each container's command and args exactly as the Deployment's
// Pod template gives them, with the real programs (memcached 1.6.45 built
// from source, memcached_exporter, busybox for what the Alpine image's
// shell offers), as the template's user, in network, PID and mount
// namespaces of the Pod's own, with its volumes mapped to temporary
// directories (Secrets laid out the way kubelet writes them). Several
// Pods run at once, as a Deployment's replicas do.
//
// Each Pod has an address, as a Pod IP (IP, Addr): a veth pair, its eth0
// in the Pod, its host end on this machine, on a /30 of the Pod range
// (10.244.0.0/16 unless the machine routes it; network.go says how the
// range is chosen and how Pods, and test processes running at once, never
// take the same addresses). memcached listening on its port with no -l
// answers the test process at Addr(11211), as it answers clients in a
// cluster; Dial still reaches 127.0.0.1 inside the Pod, as another
// container would. A Pod reaches the machine at HostIP and nothing else:
// not another Pod. Nothing of the network outlives the Pod: its veth pair
// goes with it, however the test process ends (a test, a panic, SIGKILL),
// and the harness fails the test if an interface or a route of the Pod
// is left.
//
// A Pod ends as kubelet ends it (terminate.go): Terminate runs each
// container's preStop (exec or sleep) within the Pod's
// terminationGracePeriodSeconds, sends SIGTERM, and SIGKILL once the rest
// of the grace period has passed, and reports how long each step took and
// whether the preStop ran out of time; Kill loses the Pod without grace,
// as a lost node does. The test's end kills whatever is left.
//
// It stands in for a node: not for the API server, the scheduler or the
// Deployment controller, which the integration and end-to-end suites run.
// What it proves is that what the hook writes into the template works
// against the real binaries: memcached starts with exactly the settings
// the spec asks for, probes see what they should, sidecars do their job,
// a preStop keeps memcached serving as long as it should. Unlike a node's,
// every container of a Pod shares one PID namespace (whose PID 1 is the
// sandbox's shell), as with shareProcessNamespace. Once a Pod has ended,
// its address is unreachable, as a gone Pod's is in a cluster: connecting
// fails at once with no route to host (network.go).
//
// It needs root (namespaces, another user, veth pairs), util-linux's
// nsenter and setpriv, iproute2's ip and busybox, and finds memcached and
// the exporter through MEMCACHED_BIN and MEMCACHED_EXPORTER_BIN (make
// test sets them; make test-tools builds them). Without them a test skips,
// naming what is missing, unless CI is set, in which case it fails.
package pod

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/example/memcached-operator/test/testutil"
)

// Environment variables naming the programs.
const (
	EnvMemcached = "MEMCACHED_BIN"
	EnvExporter  = "MEMCACHED_EXPORTER_BIN"
)

// Image says how to run a container of one image here: the programs its
// filesystem offers on PATH, and its entrypoint.
type Image struct {
	// Programs maps a name on the image's PATH to a program on this
	// machine.
	Programs map[string]string
	// Entrypoint is the image's; a container without a command runs it
	// with its args.
	Entrypoint func(args []string) []string
}

// Pod is a running Pod.
type Pod struct {
	t       testing.TB
	dir     string
	sandbox *process
	// sandboxStdin holds the sandbox open: closing it ends the Pod.
	sandboxStdin io.Closer
	spec         corev1.PodSpec
	volumes      map[string]string // volume name to its directory here
	images       map[string]Image
	busybox      string
	initFailure  *InitFailure
	net          *network
	endOnce      sync.Once

	mu         sync.Mutex
	containers map[string]*Container
	ended      bool
}

// Container is a running container: one process in the Pod's namespaces.
type Container struct {
	Name string
	proc *process
	log  *bytes.Buffer
	mu   *sync.Mutex
}

// Options are what the Pod needs besides its template.
type Options struct {
	// Secrets maps a Secret's name to its files, for the template's secret
	// volumes. A volume of a Secret not listed is left empty, as kubelet
	// leaves an optional volume of a missing Secret.
	Secrets map[string]map[string][]byte
	// Skip names containers not to start (they can be started later with
	// Start).
	Skip []string
	// InitMayFail lets an init container exit non-zero: the Pod then
	// starts no container, and InitFailure tells what happened, as
	// kubelet's status would. Without it such a Pod fails the test.
	InitMayFail bool
}

// InitFailure is an init container that exited non-zero: its name, exit
// code and output (what kubelet's FallbackToLogsOnError termination
// message holds).
type InitFailure struct {
	Container string
	ExitCode  int
	Output    string
}

// Run starts the Pod of template: its sandbox, then its init containers one
// after another (each must exit 0), then its containers. It stops
// everything when the test ends, and logs the containers' output if the
// test failed.
func Run(t testing.TB, template corev1.PodTemplateSpec, opts Options) *Pod {
	t.Helper()
	bins := lookup(t)
	closeInheritedFiles.Do(func() {
		// A container starts with standard input, output and error only.
		// The test process may hold descriptors its own parent left open
		// (a shell's job control, say), which every child would inherit
		// and memcached would count against -c.
		entries, _ := os.ReadDir("/proc/self/fd")
		for _, e := range entries {
			if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
				syscall.CloseOnExec(fd)
			}
		}
	})
	dir, err := os.MkdirTemp("", "pod-")
	if err != nil {
		t.Fatal(err)
	}
	// The Pod's user must reach its volumes and programs.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := &Pod{t: t, dir: dir, spec: template.Spec, volumes: map[string]string{}, containers: map[string]*Container{}, busybox: bins.busybox}
	t.Cleanup(func() {
		p.end()
		if t.Failed() {
			p.logOutput()
		}
		os.RemoveAll(dir)
	})
	p.images = p.installImages(bins)
	for _, v := range template.Spec.Volumes {
		vdir := filepath.Join(dir, "volumes", v.Name)
		if err := os.MkdirAll(vdir, 0o755); err != nil {
			t.Fatal(err)
		}
		p.volumes[v.Name] = vdir
		if v.EmptyDir != nil {
			// kubelet makes an emptyDir writable by every user.
			if err := os.Chmod(vdir, 0o777); err != nil {
				t.Fatal(err)
			}
		}
		if v.Secret != nil {
			if files, ok := opts.Secrets[v.Secret.SecretName]; ok {
				p.writeSecret(v, files)
			} else if v.Secret.Optional == nil || !*v.Secret.Optional {
				t.Fatalf("pod: volume %s needs Secret %s, which the test does not give: kubelet would not start the Pod", v.Name, v.Secret.SecretName)
			}
		}
	}
	p.startSandbox()
	// kubelet sets up the sandbox's network before any container.
	n, err := startNetwork(bins.ip, p.sandbox.cmd.Process.Pid)
	p.net = n // what there is of it, for end to remove
	if errors.Is(err, errNoVeth) {
		testutil.Unavailable(t, "pod: cannot run Pods here: "+err.Error())
	}
	if err != nil {
		t.Fatalf("pod: the Pod's network: %v", err)
	}
	for _, c := range template.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			p.Start(c.Name) // a native sidecar
			continue
		}
		code, out := p.exec(c, p.commandOf(c), 2*time.Minute)
		if code != 0 {
			if !opts.InitMayFail {
				t.Fatalf("pod: init container %s exited %d:\n%s", c.Name, code, out)
			}
			p.initFailure = &InitFailure{Container: c.Name, ExitCode: code, Output: out}
			return p
		}
	}
	for _, c := range template.Spec.Containers {
		if !contains(opts.Skip, c.Name) {
			p.Start(c.Name)
		}
	}
	return p
}

// InitFailure is the init container that failed, if one did (see
// Options.InitMayFail).
func (p *Pod) InitFailure() (InitFailure, bool) {
	if p.initFailure == nil {
		return InitFailure{}, false
	}
	return *p.initFailure, true
}

// closeInheritedFiles marks the test process's inherited descriptors
// close-on-exec, once.
var closeInheritedFiles sync.Once

// binaries are the programs a Pod needs.
type binaries struct{ memcached, exporter, busybox, nsenter, setpriv, ip string }

func lookup(t testing.TB) binaries {
	t.Helper()
	var missing []string
	b := binaries{memcached: os.Getenv(EnvMemcached), exporter: os.Getenv(EnvExporter)}
	for _, v := range []struct{ env, path string }{{EnvMemcached, b.memcached}, {EnvExporter, b.exporter}} {
		if v.path == "" {
			missing = append(missing, v.env+" is not set")
		} else if _, err := os.Stat(v.path); err != nil {
			missing = append(missing, v.env+": "+err.Error())
		}
	}
	for _, prog := range []struct {
		name string
		dst  *string
	}{{"busybox", &b.busybox}, {"nsenter", &b.nsenter}, {"setpriv", &b.setpriv}, {"ip", &b.ip}} {
		path, err := exec.LookPath(prog.name)
		if err != nil {
			missing = append(missing, prog.name+" is not installed")
		}
		*prog.dst = path
	}
	if os.Geteuid() != 0 {
		missing = append(missing, "root (namespaces and the Pod's user)")
	}
	if len(missing) > 0 {
		testutil.Unavailable(t, "pod: cannot run Pods here: "+strings.Join(missing, "; ")+" (make test builds and installs them, as root)")
	}
	return b
}

// installImages lays out, for each image the Pod knows, a directory of the
// programs on its PATH.
func (p *Pod) installImages(b binaries) map[string]Image {
	bb := filepath.Join(p.dir, "busybox")
	if err := os.MkdirAll(bb, 0o755); err != nil {
		p.t.Fatal(err)
	}
	if out, err := exec.Command(b.busybox, "--install", "-s", bb).CombinedOutput(); err != nil {
		p.t.Fatalf("pod: busybox --install: %v\n%s", err, out)
	}
	return map[string]Image{
		// The official memcached images: docker-entrypoint.sh runs
		// memcached with args that start with a dash.
		"memcached": {
			Programs: map[string]string{"memcached": b.memcached},
			Entrypoint: func(args []string) []string {
				if len(args) == 0 || strings.HasPrefix(args[0], "-") {
					return append([]string{"memcached"}, args...)
				}
				return args
			},
		},
		"quay.io/prometheus/memcached-exporter": {
			Programs:   map[string]string{"memcached_exporter": b.exporter},
			Entrypoint: func(args []string) []string { return append([]string{"memcached_exporter"}, args...) },
		},
	}
}

// imageOf finds how to run an image by its repository.
func (p *Pod) imageOf(c corev1.Container) Image {
	repo := c.Image
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	repo = strings.TrimPrefix(strings.TrimPrefix(repo, "docker.io/"), "library/")
	img, ok := p.images[repo]
	if !ok {
		p.t.Fatalf("pod: container %s: no way to run image %s here", c.Name, c.Image)
	}
	return img
}

// commandOf is what a container runs: its command and args, or the image's
// entrypoint with its args.
func (p *Pod) commandOf(c corev1.Container) []string {
	if len(c.Command) > 0 {
		return append(append([]string{}, c.Command...), c.Args...)
	}
	return p.imageOf(c).Entrypoint(c.Args)
}

// pathOf makes the directory that is an image's PATH: its programs, and
// busybox's applets (the official Alpine images' /bin and /usr/bin).
func (p *Pod) pathOf(c corev1.Container) string {
	img := p.imageOf(c)
	dir := filepath.Join(p.dir, "path", c.Name)
	if _, err := os.Stat(dir); err == nil {
		return dir
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(p.dir, "busybox"))
	if err != nil {
		p.t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.Symlink(p.busybox, filepath.Join(dir, e.Name())); err != nil {
			p.t.Fatal(err)
		}
	}
	for name, prog := range img.Programs {
		os.Remove(filepath.Join(dir, name))
		if err := os.Symlink(prog, filepath.Join(dir, name)); err != nil {
			p.t.Fatal(err)
		}
	}
	return dir
}

// startSandbox starts the process that holds the Pod's namespaces: a shell,
// as PID 1 of the new PID namespace, that mounts the Pod's volumes where
// its containers expect them (on a tmpfs over /run, or over the mount
// path's parent), brings up loopback, and then waits.
func (p *Pod) startSandbox() {
	var script strings.Builder
	script.WriteString("set -e\nmount --make-rprivate /\nmount -t proc proc /proc\nmount -t tmpfs -o mode=0755 tmpfs /run\n")
	seen := map[string]bool{}
	for _, c := range append(append([]corev1.Container{}, p.spec.InitContainers...), p.spec.Containers...) {
		for _, m := range c.VolumeMounts {
			src, ok := p.volumes[m.Name]
			if !ok {
				p.t.Fatalf("pod: container %s mounts volume %s, which the Pod does not have", c.Name, m.Name)
			}
			if !strings.HasPrefix(m.MountPath, "/run/") {
				p.t.Fatalf("pod: container %s mounts %s outside /run, where this harness cannot map it without touching the machine", c.Name, m.MountPath)
			}
			if seen[m.MountPath] {
				continue
			}
			seen[m.MountPath] = true
			fmt.Fprintf(&script, "mkdir -p %[2]s\nmount --bind %[1]s %[2]s\n", shellQuote(src), shellQuote(m.MountPath))
			if m.ReadOnly {
				fmt.Fprintf(&script, "mount -o remount,bind,ro %s\n", shellQuote(m.MountPath))
			}
		}
	}
	// The shell then waits for its standard input to end, which happens
	// when the test process ends, however it ends: as PID 1 of the Pod's
	// namespace, its exit kills every process of the Pod, and the network
	// namespace goes, with the Pod's veth pair (network.go).
	script.WriteString("ip link set lo up\necho ready\nread -r _\n")
	cmd := exec.Command("/bin/sh", "-c", script.String())
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID,
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	p.sandboxStdin = stdin
	ready := make(chan struct{})
	out := &signalWriter{word: "ready", signal: ready}
	// One writer for both streams: os/exec then never calls it from two
	// goroutines at once, and its lock covers the reads below.
	cmd.Stdout, cmd.Stderr = out, out
	sandbox, err := start(cmd)
	if err != nil {
		p.t.Fatalf("pod: starting the sandbox: %v", err)
	}
	p.sandbox = sandbox
	select {
	case <-ready:
	case <-sandbox.done:
		p.t.Fatalf("pod: the sandbox exited (%v):\n%s", sandbox.err, out.String())
	case <-time.After(30 * time.Second):
		p.t.Fatalf("pod: the sandbox did not start within 30s:\n%s", out.String())
	}
}

// nsenter returns the command that runs argv in the Pod's namespaces as
// the container's user, with the container's environment and its image's
// PATH.
func (p *Pod) nsenter(c corev1.Container, argv []string) *exec.Cmd {
	uid, gid := p.user(c)
	// setpriv, not nsenter's --setuid, for the supplementary groups
	// kubelet gives: fsGroup and supplementalGroups.
	groups := []string{strconv.FormatInt(gid, 10)}
	if sc := p.spec.SecurityContext; sc != nil {
		if sc.FSGroup != nil {
			groups = append(groups, strconv.FormatInt(*sc.FSGroup, 10))
		}
		for _, g := range sc.SupplementalGroups {
			groups = append(groups, strconv.FormatInt(g, 10))
		}
	}
	args := []string{"--target", strconv.Itoa(p.sandbox.cmd.Process.Pid), "--net", "--pid", "--mount", "--",
		"setpriv", "--reuid", strconv.FormatInt(uid, 10), "--regid", strconv.FormatInt(gid, 10), "--groups", strings.Join(groups, ","), "--",
		"env", "-i", "PATH=" + p.pathOf(c), "HOME=/"}
	for _, e := range c.Env {
		args = append(args, e.Name+"="+e.Value)
	}
	// env runs the program found on the image's PATH, not the machine's.
	prog := argv[0]
	if !strings.Contains(prog, "/") {
		prog = filepath.Join(p.pathOf(c), prog)
	}
	args = append(args, prog)
	args = append(args, argv[1:]...)
	cmd := exec.Command("nsenter", args...)
	// Its own process group, for signals to reach the program nsenter
	// runs. No Pdeathsig: the kernel sends it when the thread that started
	// the process ends, not the test; the sandbox's end kills the Pod.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// user is the container's user and group, the container's own security
// context over the Pod's.
func (p *Pod) user(c corev1.Container) (uid, gid int64) {
	if sc := p.spec.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = *sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = *sc.RunAsGroup
		}
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = *sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = *sc.RunAsGroup
		}
	}
	if uid == 0 {
		p.t.Fatalf("pod: container %s would run as root; the template must name its user", c.Name)
	}
	return uid, gid
}

// Start starts a container of the template by name (one Run skipped, or
// one that exited).
func (p *Pod) Start(name string) *Container {
	p.t.Helper()
	c, ok := p.find(name)
	if !ok {
		p.t.Fatalf("pod: no container %s", name)
	}
	p.mu.Lock()
	ended := p.ended
	p.mu.Unlock()
	if ended {
		p.t.Fatalf("pod: container %s: the Pod has ended", name)
	}
	cmd := p.nsenter(c, p.commandOf(c))
	ctr := &Container{Name: name, log: new(bytes.Buffer), mu: new(sync.Mutex)}
	cmd.Stdout = lockedWriter{ctr.mu, ctr.log}
	cmd.Stderr = lockedWriter{ctr.mu, ctr.log}
	proc, err := start(cmd)
	if err != nil {
		p.t.Fatalf("pod: starting container %s: %v", name, err)
	}
	ctr.proc = proc
	p.mu.Lock()
	if old := p.containers[name]; old != nil {
		old.kill()
	}
	p.containers[name] = ctr
	p.mu.Unlock()
	return ctr
}

// find returns the template's container (or init container) by name.
func (p *Pod) find(name string) (corev1.Container, bool) {
	for _, c := range append(append([]corev1.Container{}, p.spec.InitContainers...), p.spec.Containers...) {
		if c.Name == name {
			return c, true
		}
	}
	return corev1.Container{}, false
}

// Container returns a started container.
func (p *Pod) Container(name string) *Container {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.containers[name]
	if c == nil {
		p.t.Fatalf("pod: container %s is not running", name)
	}
	return c
}

// Exec runs argv in a container's namespaces, as its user, as kubelet runs
// an exec probe, and returns its exit code (-1 when it timed out) and
// output.
func (p *Pod) Exec(container string, argv []string, timeout time.Duration) (int, string) {
	p.t.Helper()
	c, ok := p.find(container)
	if !ok {
		p.t.Fatalf("pod: no container %s", container)
	}
	return p.exec(c, argv, timeout)
}

func (p *Pod) exec(c corev1.Container, argv []string, timeout time.Duration) (int, string) {
	code, out, err := p.run(c, argv, timeout)
	if err != nil {
		p.t.Fatalf("pod: exec in %s: %v", c.Name, err)
	}
	return code, out
}

// run is exec without the test: it can run on any goroutine.
func (p *Pod) run(c corev1.Container, argv []string, timeout time.Duration) (int, string, error) {
	cmd := p.nsenter(c, argv)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	proc, err := start(cmd)
	if err != nil {
		return 0, "", err
	}
	select {
	case <-proc.done:
		var exit *exec.ExitError
		switch {
		case proc.err == nil:
			return 0, out.String(), nil
		case errors.As(proc.err, &exit):
			return exit.ExitCode(), out.String(), nil
		default:
			return 0, out.String(), proc.err
		}
	case <-time.After(timeout):
		proc.kill()
		return -1, out.String(), nil
	}
}

// Probe runs a container's probe once, as kubelet would, and tells whether
// it passed.
func (p *Pod) Probe(container string, probe *corev1.Probe) bool {
	p.t.Helper()
	timeout := time.Duration(max(probe.TimeoutSeconds, 1)) * time.Second
	switch {
	case probe.Exec != nil:
		code, _ := p.Exec(container, probe.Exec.Command, timeout)
		return code == 0
	case probe.TCPSocket != nil:
		port := p.port(container, probe.TCPSocket.Port.String())
		conn, err := p.DialTimeout(port, timeout)
		if err == nil {
			conn.Close()
		}
		return err == nil
	}
	p.t.Fatalf("pod: container %s: a probe of a kind this harness does not run: %+v", container, probe)
	return false
}

// port resolves a named or numbered container port.
func (p *Pod) port(container, port string) int {
	if n, err := strconv.Atoi(port); err == nil {
		return n
	}
	c, _ := p.find(container)
	for _, cp := range c.Ports {
		if cp.Name == port {
			return int(cp.ContainerPort)
		}
	}
	p.t.Fatalf("pod: container %s has no port %s", container, port)
	return 0
}

// Dial connects to 127.0.0.1:port inside the Pod's network namespace, as
// another container of the Pod would.
func (p *Pod) Dial(port int) (net.Conn, error) { return p.DialTimeout(port, 5*time.Second) }

// DialTimeout is Dial with a timeout.
func (p *Pod) DialTimeout(port int, timeout time.Duration) (net.Conn, error) {
	var conn net.Conn
	err := p.inNetns(func() error {
		var err error
		conn, err = net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), timeout)
		return err
	})
	return conn, err
}

// DialN opens n connections to 127.0.0.1:port in the Pod's network
// namespace, stopping at the first that fails.
func (p *Pod) DialN(port, n int) ([]net.Conn, error) {
	var conns []net.Conn
	err := p.inNetns(func() error {
		for range n {
			c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 5*time.Second)
			if err != nil {
				return err
			}
			conns = append(conns, c)
		}
		return nil
	})
	return conns, err
}

// inNetns runs f on a thread that is in the Pod's network namespace; a
// socket made there stays in it. The thread goes back to the machine's
// namespace after, and to the runtime's pool: a thread that ended would
// send its Pdeathsig to every process it started (test/kube's
// control plane among them).
func (p *Pod) inNetns(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer home.Close()
		target, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", p.sandbox.cmd.Process.Pid))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns: %w", err)
			return
		}
		err = f()
		if unix.Setns(int(home.Fd()), unix.CLONE_NEWNET) == nil {
			// Back home: the thread may serve others. If it could not
			// go back, it stays locked and ends with this goroutine.
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// State describes the Pod for a failure message: its processes and the
// sockets they listen on.
func (p *Pod) State() string {
	pid := strconv.Itoa(p.sandbox.cmd.Process.Pid)
	out, err := exec.Command("nsenter", "--target", pid, "--net", "--pid", "--mount", "--", "sh", "-c",
		"ps -eo pid,user,stat,args 2>/dev/null || ps; ss -ltnp; ip -4 -br addr").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("(no state: %v) %s", err, out)
	}
	var b strings.Builder
	b.Write(out)
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, c := range p.containers {
		if done, err := c.Exited(); done {
			fmt.Fprintf(&b, "container %s exited: %v (%s)\n", name, err, c.proc.cmd.ProcessState)
		} else {
			fmt.Fprintf(&b, "container %s runs\n", name)
		}
	}
	return b.String()
}

// Volume is the directory here that holds a volume's files.
func (p *Pod) Volume(name string) string {
	dir, ok := p.volumes[name]
	if !ok {
		p.t.Fatalf("pod: no volume %s", name)
	}
	return dir
}

// UpdateSecret replaces the files of every volume of a Secret the way
// kubelet does: a new timestamped directory, then the ..data symlink
// switched to it in one rename, so that a reader sees the old files or the
// new ones, never a mix.
func (p *Pod) UpdateSecret(name string, files map[string][]byte) {
	p.t.Helper()
	n := 0
	for _, v := range p.spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == name {
			p.writeSecret(v, files)
			n++
		}
	}
	if n == 0 {
		p.t.Fatalf("pod: no volume of Secret %s", name)
	}
}

// writeSecret writes a Secret's files into a volume in kubelet's layout:
// ..<timestamp>/<key>, a ..data link to it, and a link per key.
func (p *Pod) writeSecret(v corev1.Volume, files map[string][]byte) {
	dir := p.volumes[v.Name]
	mode := os.FileMode(0o644)
	if v.Secret.DefaultMode != nil {
		mode = os.FileMode(*v.Secret.DefaultMode)
	}
	stamp := filepath.Join(dir, ".."+time.Now().Format("2006_01_02_15_04_05.000000000"))
	if err := os.Mkdir(stamp, 0o755); err != nil {
		p.t.Fatal(err)
	}
	keys := map[string]string{} // path in the volume to key
	if len(v.Secret.Items) > 0 {
		for _, it := range v.Secret.Items {
			keys[it.Path] = it.Key
		}
	} else {
		for k := range files {
			keys[k] = k
		}
	}
	for path, key := range keys {
		data, ok := files[key]
		if !ok {
			continue // kubelet fails the mount unless optional; tests give what they mean to
		}
		if err := os.WriteFile(filepath.Join(stamp, path), data, mode); err != nil {
			p.t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(stamp, path), mode); err != nil {
			p.t.Fatal(err)
		}
		// kubelet gives a Secret's files to the Pod's fsGroup.
		if sc := p.spec.SecurityContext; sc != nil && sc.FSGroup != nil {
			if err := os.Chown(filepath.Join(stamp, path), 0, int(*sc.FSGroup)); err != nil {
				p.t.Fatal(err)
			}
		}
	}
	tmp := filepath.Join(dir, "..data_tmp")
	os.Remove(tmp)
	if err := os.Symlink(filepath.Base(stamp), tmp); err != nil {
		p.t.Fatal(err)
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		p.t.Fatal(err)
	}
	for path := range keys {
		link := filepath.Join(dir, path)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", path), link); err != nil {
			p.t.Fatal(err)
		}
	}
	if old != "" {
		os.RemoveAll(filepath.Join(dir, old))
	}
}

// Signal sends a signal to every process of the container (SIGSTOP,
// SIGCONT).
func (c *Container) Signal(sig syscall.Signal) error {
	// nsenter forks the container's process: signal the whole group.
	return c.proc.signalGroup(sig)
}

// PID is the container's process as this machine numbers it, which stays
// the same for as long as the process lives.
func (c *Container) PID(t testing.TB) int {
	t.Helper()
	pid, err := childOf(c.proc.cmd.Process.Pid)
	if err != nil {
		t.Fatalf("pod: container %s has no process: %v", c.Name, err)
	}
	return pid
}

// Exited tells whether the container's process has ended, and how.
func (c *Container) Exited() (bool, error) {
	select {
	case <-c.proc.done:
		return true, c.proc.err
	default:
		return false, nil
	}
}

// Wait waits up to timeout for the container to end.
func (c *Container) Wait(timeout time.Duration) (bool, error) {
	select {
	case <-c.proc.done:
		return true, c.proc.err
	case <-time.After(timeout):
		return false, nil
	}
}

// Output is what the container wrote so far.
func (c *Container) Output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.log.String()
}

func (c *Container) kill() { c.proc.kill() }

// end removes the Pod, as kubelet removes a sandbox: every process of the
// Pod is killed, its veth pair deleted (while the sandbox still holds the
// namespace, so that the interface's name is still the Pod's), the
// sandbox ended; and it checks that nothing of the Pod's network is left
// on the machine. It runs once: from Terminate, Kill or the test's
// cleanup.
func (p *Pod) end() {
	p.endOnce.Do(func() {
		p.mu.Lock()
		p.ended = true
		containers := make([]*Container, 0, len(p.containers))
		for _, c := range p.containers {
			containers = append(containers, c)
		}
		p.mu.Unlock()
		for _, c := range containers {
			c.kill()
		}
		if p.net != nil {
			if err := p.net.remove(); err != nil {
				p.t.Errorf("pod: %v", err)
			}
		}
		if p.sandbox != nil {
			p.sandboxStdin.Close()
			p.sandbox.cmd.Process.Kill()
			<-p.sandbox.done
		}
		if p.net != nil {
			if left := p.net.leftovers(10 * time.Second); len(left) > 0 {
				p.t.Errorf("pod: the Pod left on the machine: %s", strings.Join(left, "; "))
			}
		}
	})
}

func (p *Pod) logOutput() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, c := range p.containers {
		p.t.Logf("pod: ---- container %s (%v) ----\n%s", name, c.proc.cmd.Args, c.Output())
	}
}

// signalWriter keeps what a process writes and closes signal when word
// has been written. It is safe for concurrent use, as the process goes on
// writing while the test reads.
type signalWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	word   string
	signal chan struct{}
	once   sync.Once
}

func (s *signalWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.buf.Write(b)
	if strings.Contains(s.buf.String(), s.word) {
		s.once.Do(func() { close(s.signal) })
	}
	return n, err
}

// String returns what has been written so far.
func (s *signalWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
