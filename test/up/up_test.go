package up

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/slots"
	"github.com/example/memcached-operator/test/dataplane"
	"github.com/example/memcached-operator/test/kube"
	"github.com/example/memcached-operator/test/playground"
	"github.com/example/memcached-operator/test/procnet"
	"github.com/example/memcached-operator/test/testutil"
)

// Bounds on each step: generous, for a loaded CI machine. Only a broken
// playground needs them.
const (
	// upTimeout bounds make up: the tools are built (make test builds them
	// first), but it builds the hook and its own command.
	upTimeout = 10 * time.Minute
	// lineTimeout bounds any other command of the block.
	lineTimeout = 2 * time.Minute
	// convergeTimeout bounds the wait for a Memcached to converge.
	convergeTimeout = 2 * time.Minute
)

// timings are the figures the test prints (seconds), from TestMain.
var timings []string

func TestMain(m *testing.M) {
	code := m.Run()
	if len(timings) > 0 {
		fmt.Println("make up timings (seconds on this machine; figures, not assertions):")
		for _, line := range timings {
			testutil.PrintBenchmarkLine(line)
		}
	}
	os.Exit(code)
}

// record logs a figure and keeps it for TestMain, as a line benchstat
// reads.
func record(t *testing.T, name string, d time.Duration) {
	t.Helper()
	line := testutil.BenchmarkLine("BenchmarkUp/"+name, "%.2f s", d.Seconds())
	t.Log(line)
	timings = append(timings, line)
}

// TestTryIt runs the README's "Try it" commands in order, each in bash
// from the repository's root with a bounded time, make up with a state
// directory of the test's own, and checks what a newcomer would look at:
// make up prints the export line in the README's form; the sample
// Memcached converges to its size (the watch line shows it) and to the
// size kubectl scale asks; the endpoints line prints that many Pod
// addresses; and make down leaves no process of the playground, no port
// it listened on listening, and no state.
func TestTryIt(t *testing.T) {
	requirePlayground(t)
	root := testutil.Root()
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := tryItCommands(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{t: t, root: root, dir: filepath.Join(tmp, "up")}
	r.env = commandEnv(r.dir, filepath.Join(tmp, "kube-cache"))
	t.Cleanup(r.cleanup)

	var (
		exportLine string
		name       string // the Memcached the block applies
		want       int    // the size it must converge to
		changed    time.Time
		seen       = map[kind]bool{}
		endpoints  bool
	)
	for _, line := range cmds {
		k := classify(line)
		seen[k] = true
		if k != makeUp && k != export && exportLine == "" {
			t.Fatalf("README: %q comes before make up and its export line", line)
		}
		switch k {
		case makeUp:
			began := time.Now()
			r.up = true
			stdout, err := r.run(line, "", upTimeout)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			record(t, "make-up", time.Since(began))
			lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
			exportLine = lines[len(lines)-1]
			dir, err := exportDir(exportLine)
			if err != nil {
				t.Fatalf("make up's last line on stdout: %v", err)
			}
			if dir != r.dir {
				t.Fatalf("make up's export line names %s, want UP_DIR, %s", dir, r.dir)
			}
		case export:
			// The README's line names the default UP_DIR; the test runs
			// the one make up printed, which must have the same form.
			dir, err := exportDir(line)
			if err != nil {
				t.Errorf("README: %v", err)
			} else if dir != "$PWD/.cache/up" {
				t.Errorf("README: the export line names %s, want $PWD/.cache/up, make up's default UP_DIR", dir)
			}
		case apply:
			name, want = readMemcached(t, filepath.Join(root, applyArg.FindStringSubmatch(line)[1]))
			changed = time.Now()
			if _, err := r.run(line, exportLine, lineTimeout); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
		case watch:
			if name == "" {
				t.Fatalf("README: %q watches before any kubectl apply", line)
			}
			r.watch(line, exportLine, name, want)
			r.waitConverged(exportLine, name, want)
			record(t, fmt.Sprintf("apply-to-ready/size-%d", want), time.Since(changed))
		case scale:
			n, _ := strconv.Atoi(scaleArg.FindStringSubmatch(line)[1])
			changed = time.Now()
			if _, err := r.run(line, exportLine, lineTimeout); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			// The README shows no wait here; a user would look again.
			want = n
			r.waitConverged(exportLine, name, want)
			record(t, fmt.Sprintf("scale-to-ready/size-%d", want), time.Since(changed))
		case makeDown:
			r.checkAgent(exportLine)
			before := r.snapshot()
			began := time.Now()
			if _, err := r.run(line, "", lineTimeout); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			record(t, "make-down", time.Since(began))
			r.up = false
			r.checkGone(before)
		default:
			stdout, err := r.run(line, exportLine, lineTimeout)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			if strings.Contains(line, "{.status.endpoints}") {
				endpoints = true
				checkEndpoints(t, stdout, want)
			}
		}
	}
	for _, k := range []struct {
		kind
		what string
	}{{makeUp, "make up"}, {export, "export"}, {apply, "kubectl apply -f"}, {watch, "kubectl get -w"}, {scale, "kubectl scale --replicas"}, {makeDown, "make down"}} {
		if !seen[k.kind] {
			t.Errorf("README: the Try it block has no %s line", k.what)
		}
	}
	if !endpoints {
		t.Error("README: the Try it block has no line printing .status.endpoints")
	}
}

// requirePlayground skips t (fails it when CI is set) unless what make up
// needs is there: the programs make test builds, make, bash, go, Linux.
func requirePlayground(t *testing.T) {
	t.Helper()
	kube.RequirePrograms(t, playground.Options)
	var missing []string
	for _, prog := range []string{"make", "bash", "go"} {
		if _, err := exec.LookPath(prog); err != nil {
			missing = append(missing, prog)
		}
	}
	if runtime.GOOS != "linux" {
		missing = append(missing, "Linux (make up ties its processes' lives to its own, and make down reads /proc)")
	}
	if len(missing) > 0 {
		testutil.Unavailable(t, "make up needs "+strings.Join(missing, ", "))
	}
}

// commandEnv is the environment the README's commands run in: the test's,
// with UP_DIR set, and without what would tie them to the test's make (its
// jobserver), a developer's cluster (KUBECONFIG) or kubectl settings.
func commandEnv(dir, kubeCache string) []string {
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "UP_DIR", "KUBECONFIG", "KUBERC", "KUBECACHEDIR", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "UP_DIR="+dir, "KUBERC=off", "KUBECACHEDIR="+kubeCache)
}

// runner runs the README's commands for t.
type runner struct {
	t    *testing.T
	root string
	dir  string // UP_DIR
	env  []string
	up   bool // make up ran and make down did not succeed yet
}

// command returns bash running script after prefix (the export line),
// from the repository's root, in a process group of its own (so that a
// timeout or a Ctrl-C reaches whatever it started), ended by ctx.
func (r *runner) command(ctx context.Context, script, prefix string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -eo pipefail\n"+prefix+"\n"+script)
	cmd.Dir = r.root
	cmd.Env = r.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// run runs line after prefix within timeout, logs what it printed, and
// returns its standard output.
func (r *runner) run(line, prefix string, timeout time.Duration) (string, error) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := r.command(ctx, line, prefix)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	began := time.Now()
	err := cmd.Run()
	r.t.Logf("$ %s  (%.1fs)\n%s%s", line, time.Since(began).Seconds(), stdout.String(), stderr.String())
	if ctx.Err() != nil {
		err = fmt.Errorf("still running after %s: %v", timeout, err)
	}
	return stdout.String(), err
}

// watch runs a kubectl get -w line until a row shows Memcached name with
// SIZE and READY want and AVAILABLE True, then interrupts it as a user's
// Ctrl-C would.
func (r *runner) watch(line, prefix, name string, want int) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), convergeTimeout)
	defer cancel()
	cmd := r.command(ctx, line, prefix)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		r.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	var seen []string
	converged := false
	sc := bufio.NewScanner(out)
	var header []string
	for sc.Scan() {
		seen = append(seen, sc.Text())
		fields := strings.Fields(sc.Text())
		if header == nil {
			header = fields
			continue
		}
		if convergedRow(header, fields, name, want) {
			converged = true
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
			break
		}
	}
	if !converged {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	_ = cmd.Wait()
	r.t.Logf("$ %s  (stopped once converged: %v)\n%s\n%s", line, converged, strings.Join(seen, "\n"), stderr.String())
	if !converged {
		r.t.Fatalf("%s: no row showed %s with SIZE %d, READY %d and AVAILABLE True within %s", line, name, want, want, convergeTimeout)
	}
}

// convergedRow tells whether a row of kubectl get memcached (columns named
// by header) shows name converged to want. A row with an empty cell has
// fewer fields than the header, and does not.
func convergedRow(header, row []string, name string, want int) bool {
	if len(row) != len(header) {
		return false
	}
	cell := map[string]string{}
	for i, h := range header {
		cell[h] = row[i]
	}
	w := strconv.Itoa(want)
	return cell["NAME"] == name && cell["SIZE"] == w && cell["READY"] == w && cell["AVAILABLE"] == "True"
}

// memcachedStatus is what waitConverged reads of a Memcached.
type memcachedStatus struct {
	Spec struct {
		Size int `json:"size"`
	} `json:"spec"`
	Status struct {
		ReadyReplicas int      `json:"readyReplicas"`
		Nodes         []string `json:"nodes"`
		Endpoints     []string `json:"endpoints"`
		Conditions    []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		} `json:"conditions"`
	} `json:"status"`
}

// converged says what is not yet converged to want, or "".
func (m memcachedStatus) converged(want int) string {
	available := slices.ContainsFunc(m.Status.Conditions, func(c struct {
		Type   string `json:"type"`
		Status string `json:"status"`
	}) bool {
		return c.Type == "Available" && c.Status == "True"
	})
	if m.Spec.Size != want || m.Status.ReadyReplicas != want || len(m.Status.Nodes) != want || len(m.Status.Endpoints) != want || !available {
		return fmt.Sprintf("spec.size %d, readyReplicas %d, %d nodes, %d endpoints, Available %v; want %d of each and Available",
			m.Spec.Size, m.Status.ReadyReplicas, len(m.Status.Nodes), len(m.Status.Endpoints), available, want)
	}
	return ""
}

// waitConverged polls the Memcached with the user's kubectl until its
// status says it converged to want.
func (r *runner) waitConverged(prefix, name string, want int) {
	r.t.Helper()
	testutil.EventuallyEvery(r.t, convergeTimeout, 500*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), lineTimeout)
		cmd := r.command(ctx, "kubectl get memcached "+name+" -o json", prefix)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		cancel()
		var m memcachedStatus
		switch {
		case err != nil:
			return fmt.Errorf("memcached %s did not converge to %d: kubectl get memcached %s: %v: %s", name, want, name, err, stderr.String())
		case json.Unmarshal(out, &m) != nil:
			return fmt.Errorf("memcached %s did not converge to %d: kubectl get memcached printed no JSON: %s", name, want, out)
		}
		if last := m.converged(want); last != "" {
			return fmt.Errorf("memcached %s did not converge to %d: %s", name, want, last)
		}
		return nil
	})
}

// checkAgent applies the discovery example and checks that the playground
// runs its agent on loopback, as the README says after the block: the
// address in agents/NAMESPACE/NAME answers config get cluster with the
// Memcached's served slots, in slot order.
func (r *runner) checkAgent(prefix string) {
	r.t.Helper()
	const name = "memcached-auto"
	example := filepath.Join(r.root, "examples", "memcached-discovery.yaml")
	if got, _ := readMemcached(r.t, example); got != name {
		r.t.Fatalf("%s names %s, want %s", example, got, name)
	}
	if _, err := r.run("kubectl apply -f "+example, prefix, lineTimeout); err != nil {
		r.t.Fatal(err)
	}
	r.waitConverged(prefix, name, 3)
	addrFile := filepath.Join(r.dir, "agents", "default", name)
	var answer string
	testutil.EventuallyEvery(r.t, convergeTimeout, 500*time.Millisecond, func() error {
		var want []string
		ctx, cancel := context.WithTimeout(context.Background(), lineTimeout)
		out, err := r.command(ctx, "kubectl get memcached "+name+" -o json", prefix).Output()
		cancel()
		var m struct {
			Status struct {
				SlotTable     v1alpha1.SlotTable `json:"slotTable"`
				SlotAddresses []string           `json:"slotAddresses"`
			} `json:"status"`
		}
		if err == nil && json.Unmarshal(out, &m) == nil {
			for _, n := range slots.Served(m.Status.SlotTable.Slots, m.Status.SlotAddresses, name, "default", 11211) {
				want = append(want, n.Host+"|"+n.IP+"|11211")
			}
			if addr, err := os.ReadFile(addrFile); err == nil {
				answer, err = dataplane.ConfigGetCluster(strings.TrimSpace(string(addr)))
				payload := fmt.Sprintf("%d\n%s\n", m.Status.SlotTable.Version, strings.Join(want, " "))
				if err == nil && len(want) == 3 && strings.Contains(answer, payload) {
					return nil
				}
			}
		}
		return fmt.Errorf("the playground's agent of %s (address in %s) does not serve its slot table %v; it answered %q", name, addrFile, want, answer)
	})
}

// checkEndpoints checks the endpoints line printed want addresses, each a
// Pod IP and the memcached port.
func checkEndpoints(t *testing.T, stdout string, want int) {
	t.Helper()
	var eps []string
	if err := json.Unmarshal([]byte(stdout), &eps); err != nil {
		t.Errorf("the endpoints line printed %q, want a JSON list of addresses: %v", stdout, err)
		return
	}
	if len(eps) != want {
		t.Errorf("the endpoints line printed %d addresses %v, want %d", len(eps), eps, want)
	}
	for _, ep := range eps {
		host, port, err := net.SplitHostPort(ep)
		if err != nil || net.ParseIP(host) == nil || port != "11211" {
			t.Errorf("endpoint %q is not IP:11211", ep)
		}
	}
}

// readMemcached reads the name and spec.size of the Memcached in file.
func readMemcached(t *testing.T, file string) (string, int) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Size int `json:"size"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if m.Kind != "Memcached" || m.Metadata.Name == "" || m.Spec.Size == 0 {
		t.Fatalf("%s holds kind %q name %q size %d, want a Memcached with a name and a size", file, m.Kind, m.Metadata.Name, m.Spec.Size)
	}
	return m.Metadata.Name, m.Spec.Size
}

// process is a process of the playground, as /proc shows it.
type process struct {
	pid     int
	program string // argv[0]'s base name
	cmdline string
}

// snapshot is what ran before make down.
type snapshot struct {
	procs map[int]process
	ports []int
}

// snapshot finds the playground's processes in /proc (playgroundProcesses)
// and the ports they listen on, and checks that every program make up
// starts is among them, all listening on 127.0.0.1 only.
func (r *runner) snapshot() snapshot {
	r.t.Helper()
	procs, err := playgroundProcesses(r.dir)
	if err != nil {
		r.t.Fatal(err)
	}
	snap := snapshot{procs: procs}
	var programs []string
	for _, p := range procs {
		programs = append(programs, p.program)
		socks, err := procnet.Listening(p.pid)
		if errors.Is(err, fs.ErrNotExist) {
			// It exited since it was listed (a kubectl the playground
			// ran): it holds no port.
			continue
		}
		if err != nil {
			r.t.Fatalf("%s (pid %d): %v", p.program, p.pid, err)
		}
		for _, s := range socks {
			if !s.Local.Equal(net.IPv4(127, 0, 0, 1)) {
				r.t.Errorf("%s (pid %d) listens on %s, want 127.0.0.1 only", p.program, p.pid, s.Local)
			}
			snap.ports = append(snap.ports, s.LocalPort)
		}
	}
	slices.Sort(programs)
	slices.Sort(snap.ports)
	r.t.Logf("before make down: %d processes of the playground (%s), listening on %v", len(procs), strings.Join(programs, " "), snap.ports)
	for _, want := range []string{"playground", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "metacontroller", "memcached-hook"} {
		if !slices.ContainsFunc(programs, func(p string) bool { return p == want || strings.HasPrefix(p, want+"-") }) {
			r.t.Errorf("before make down no process of the playground runs %s (found %v): the checks after it would prove little", want, programs)
		}
	}
	if len(snap.ports) == 0 {
		r.t.Error("before make down the playground listens on no port")
	}
	return snap
}

// checkGone checks, after make down, that none of the processes before
// runs (by PID; an exited process its parent has not collected yet, a
// zombie, does not), that /proc shows no process of the playground, that
// none of the ports listens (but for a process that is not the
// playground's and took the port since), and that UP_DIR is gone.
func (r *runner) checkGone(before snapshot) {
	r.t.Helper()
	for _, p := range before.procs {
		if procnet.Running(p.pid) {
			r.t.Errorf("after make down %s (pid %d) still runs: %s", p.program, p.pid, p.cmdline)
		} else if state, err := procnet.State(p.pid); err == nil {
			r.t.Logf("after make down %s (pid %d) is a zombie (state %s): exited, not yet collected by its parent", p.program, p.pid, state)
		}
	}
	after, err := playgroundProcesses(r.dir)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, p := range after {
		r.t.Errorf("after make down /proc shows a process of the playground: %s (pid %d): %s", p.program, p.pid, p.cmdline)
	}
	sockets, err := procnet.Sockets()
	if err != nil {
		r.t.Fatal(err)
	}
	var inodes []string
	for ino, s := range sockets {
		if s.Listening() && slices.Contains(before.ports, s.LocalPort) {
			inodes = append(inodes, ino)
		}
	}
	owners, err := procnet.Owners(inodes)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, ino := range inodes {
		s, pids := sockets[ino], owners[ino]
		foreign := len(pids) > 0
		for _, pid := range pids {
			if _, ours := before.procs[pid]; ours || isPlayground(pid, r.dir) {
				foreign = false
			}
		}
		if foreign {
			r.t.Logf("port %d listens again, held by pid(s) %v, which are not the playground's", s.LocalPort, pids)
			continue
		}
		r.t.Errorf("after make down port %d still listens on %s (held by pids %v)", s.LocalPort, s.Local, pids)
	}
	if _, err := os.Stat(r.dir); !errors.Is(err, os.ErrNotExist) {
		entries, _ := os.ReadDir(r.dir)
		names := make([]string, 0, len(entries))
		for _, e := range entries {
			names = append(names, e.Name())
		}
		r.t.Errorf("after make down %s still exists (holding %v), want it removed", r.dir, names)
	}
}

// playgroundProcesses returns the running processes (not zombies) of the
// playground in dir, by PID, read from /proc.
func playgroundProcesses(dir string) (map[int]process, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[int]process{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || !isPlayground(pid, dir) || !procnet.Running(pid) {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue // gone meanwhile
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		out[pid] = process{pid: pid, program: filepath.Base(args[0]), cmdline: strings.Join(args, " ")}
	}
	return out, nil
}

// isPlayground tells whether process pid belongs to the playground in dir:
// it carries playground.DirEnv=dir in its environment (every process make
// up starts inherits it), or runs in dir (its working directory is dir or
// below it: the supervisor and the control plane's processes do).
func isPlayground(pid int, dir string) bool {
	if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err == nil &&
		slices.Contains(strings.Split(string(env), "\x00"), playground.DirEnv+"="+dir) {
		return true
	}
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	return err == nil && (cwd == dir || strings.HasPrefix(cwd, dir+"/"))
}

// cleanup runs at the end of the test: when it failed, it logs the
// playground's logs; when make down did not run or failed, it stops the
// playground with make down, so that no process outlives the test.
func (r *runner) cleanup() {
	if r.t.Failed() {
		r.logLogs()
	}
	if !r.up {
		return
	}
	if _, err := r.run("make down", "", lineTimeout); err != nil {
		r.t.Errorf("cleaning up: make down: %v", err)
	}
}

// logLogs logs the end of each log of the playground in dir.
func (r *runner) logLogs() {
	files := []string{filepath.Join(r.dir, "supervisor.log")}
	more, _ := filepath.Glob(filepath.Join(r.dir, "cluster", "run*", "*.log"))
	files = append(files, more...)
	files = append(files, filepath.Join(r.dir, "hook", "hook.log"))
	const tail = 16 << 10
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		cut := ""
		if len(b) > tail {
			cut = fmt.Sprintf(" (its last %d bytes)", tail)
			b = b[len(b)-tail:]
		}
		r.t.Logf("---- %s%s ----\n%s", f, cut, b)
	}
}
