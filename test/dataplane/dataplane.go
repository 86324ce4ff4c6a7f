// Package dataplane runs the operator's data plane on this machine for the
// tests of the agent, the proxy and hand-offs: real memcached 1.6.45
// processes standing in for Pods, each on an address of its own on
// memcached's port (a loopback alias, 127.x.y.z:11211, as a Pod IP would
// be), the Memcached's status as the hook answers it for those Pods
// (Cluster runs the hook's own logic) and the agent built from this
// checkout; test/clients starts the real clients that use them.
//
// memcached comes from the environment make test sets (MEMCACHED_BIN,
// memcached 1.6.45). Without it a test skips naming it, or fails when CI
// is set.
package dataplane

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/memcached-operator/test/testutil"
)

// EnvMemcached names memcached 1.6.45's program.
const EnvMemcached = "MEMCACHED_BIN"

// Port is memcached's, on every Pod.
const Port = 11211

// Memcached is a memcached process standing in for a Pod.
type Memcached struct {
	IP   string
	cmd  *exec.Cmd
	out  *testutil.LockedBuffer
	done chan struct{}
}

// StartMemcached starts memcached on ip:11211 with args (beside -p and
// -l), waits until it answers there itself (not a process that held the
// address already, while this one exits unable to bind), and stops it
// when the test ends.
func StartMemcached(t testing.TB, ip string, args ...string) *Memcached {
	t.Helper()
	bin := testutil.Program(t, EnvMemcached, "memcached 1.6.45")
	argv := append([]string{"-p", fmt.Sprint(Port), "-l", ip, "-U", "0"}, args...)
	if os.Geteuid() == 0 {
		argv = append(argv, "-u", "nobody")
	}
	m := &Memcached{IP: ip, out: &testutil.LockedBuffer{}, done: make(chan struct{})}
	m.cmd = exec.Command(bin, argv...)
	m.cmd.Stdout, m.cmd.Stderr = m.out, m.out
	m.cmd.SysProcAttr = sysProcAttr()
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("dataplane: starting memcached on %s: %v", ip, err)
	}
	go func() { _ = m.cmd.Wait(); close(m.done) }()
	t.Cleanup(m.Kill)
	deadline := time.Now().Add(10 * time.Second)
	why := "nothing answers there"
	for {
		if c, err := net.DialTimeout("tcp", m.Addr(), time.Second); err == nil {
			c.Close()
			ours, err := testutil.Listens(m.cmd.Process.Pid, m.Addr())
			if ours {
				return m
			}
			why = "another process answers there"
			if err != nil {
				why = "cannot tell which process answers there: " + err.Error()
			}
		}
		select {
		case <-m.done:
			t.Fatalf("dataplane: memcached on %s exited: %s", ip, m.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("dataplane: memcached on %s does not answer: %s; it wrote: %s", ip, why, m.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Addr is the Pod's ip:11211.
func (m *Memcached) Addr() string { return net.JoinHostPort(m.IP, fmt.Sprint(Port)) }

// Kill ends memcached at once, as a Pod lost without grace.
func (m *Memcached) Kill() {
	if m.cmd.Process != nil {
		_ = m.cmd.Process.Kill()
	}
	<-m.done
}

// Freeze stops memcached with SIGSTOP, to cut it off while it still runs:
// it keeps its items and answers nothing, while the kernel still accepts
// connections to its address and takes the bytes sent on them, which
// memcached reads once thawed (Thaw). A client that gives up on it
// (a read timeout) closes its connection; the requests it had sent are
// still served when memcached runs again, as a network cut that heals
// before TCP gives up delivers them, and the ones it sends after giving
// up never reach it.
func (m *Memcached) Freeze(t testing.TB) {
	t.Helper()
	m.signal(t, freezeSignal)
}

// Thaw resumes a memcached Freeze stopped (SIGCONT).
func (m *Memcached) Thaw(t testing.TB) {
	t.Helper()
	m.signal(t, thawSignal)
}

func (m *Memcached) signal(t testing.TB, sig os.Signal) {
	t.Helper()
	if sig == nil {
		t.Fatalf("dataplane: cannot stop or resume a process on this system")
	}
	if err := m.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("dataplane: memcached on %s: %v: %v", m.IP, sig, err)
	}
}

// Running tells whether the process still runs.
func (m *Memcached) Running() bool {
	select {
	case <-m.done:
		return false
	default:
		return true
	}
}

// Keys returns how many of keys this memcached holds, asked directly.
func (m *Memcached) Keys(t testing.TB, keys []string) int {
	t.Helper()
	return len(m.Held(t, keys))
}

// Held returns which of keys this memcached holds, asked directly (mg, one
// key at a time), in keys' order.
func (m *Memcached) Held(t testing.TB, keys []string) []string {
	t.Helper()
	c := mustDial(t, m.Addr(), 30*time.Second)
	defer c.Close()
	r := bufio.NewReader(c)
	var held []string
	for _, k := range keys {
		if _, err := fmt.Fprintf(c, "mg %s\r\n", k); err != nil {
			t.Fatal(err)
		}
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("dataplane: %s: %v", m.Addr(), err)
		}
		if strings.HasPrefix(line, "HD") {
			held = append(held, k)
		}
	}
	return held
}

// Agent is memcached-agent built from this checkout, running.
type Agent struct {
	// Addr is the configuration endpoint's address, Admin the admin
	// server's.
	Addr, Admin string
	cmd         *exec.Cmd
	out         *testutil.LockedBuffer
	done        chan struct{}
}

var agentBuild struct {
	once sync.Once
	path string
	err  error
}

// agentBinary builds cmd/memcached-agent once per test binary.
func agentBinary(t testing.TB) string {
	t.Helper()
	agentBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "memcached-agent-")
		if err != nil {
			agentBuild.err = err
			return
		}
		agentBuild.path = filepath.Join(dir, "memcached-agent")
		out, err := exec.Command("go", "build", "-o", agentBuild.path, filepath.Join(testutil.Root(), "cmd", "memcached-agent")).CombinedOutput()
		if err != nil {
			agentBuild.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if agentBuild.err != nil {
		t.Fatalf("dataplane: building the agent: %v", agentBuild.err)
	}
	return agentBuild.path
}

// agents counts the agents started, to name them.
var agents atomic.Int64

// StartAgent runs the agent with args (beside --admin-listen and
// --log-format) and returns once it listens; it stops it when the test
// ends, and prints its log if the test failed.
func StartAgent(t testing.TB, args ...string) *Agent {
	t.Helper()
	a := &Agent{out: &testutil.LockedBuffer{}, done: make(chan struct{})}
	a.cmd = exec.Command(agentBinary(t), append([]string{"--admin-listen=127.0.0.1:0", "--log-format=json"}, args...)...)
	// Each agent runs in a Pod of its own name, which names it in the
	// hand-off's lock: two agents of one name would both hold it.
	a.cmd.Env = append(os.Environ(), fmt.Sprintf("POD_NAME=agent-%d", agents.Add(1)))
	a.cmd.Stderr = a.out
	stdout, err := a.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	a.cmd.SysProcAttr = sysProcAttr()
	if err := a.cmd.Start(); err != nil {
		t.Fatalf("dataplane: starting the agent: %v", err)
	}
	listening := make(chan struct{})
	go func() {
		sc := testutil.Lines(stdout, 1<<20)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Bytes()
			a.out.Write(append(line, '\n'))
			var l struct {
				Msg          string `json:"msg"`
				Address      string `json:"address"`
				AdminAddress string `json:"admin_address"`
			}
			if json.Unmarshal(line, &l) == nil && l.Msg == "listening" {
				a.Addr, a.Admin = l.Address, l.AdminAddress
				once.Do(func() { close(listening) })
			}
		}
	}()
	go func() { _ = a.cmd.Wait(); close(a.done) }()
	t.Cleanup(func() {
		a.Stop()
		if t.Failed() {
			t.Logf("dataplane: the agent's log:\n%s", a.out.String())
		}
	})
	select {
	case <-listening:
	case <-a.done:
		t.Fatalf("dataplane: the agent exited: %s", a.out.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("dataplane: the agent does not listen: %s", a.out.String())
	}
	return a
}

// Stop ends the agent with SIGTERM, as kubelet does, and waits.
func (a *Agent) Stop() { testutil.Stop(a.cmd, a.done, terminate, 30*time.Second) }

// PID is the agent's process ID.
func (a *Agent) PID() int { return a.cmd.Process.Pid }

// Log is what the agent logged so far.
func (a *Agent) Log() string { return a.out.String() }

// dial connects to addr for one exchange, which must be over within d.
func dial(addr string, d time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(d))
	return c, nil
}

// mustDial is dial for t, which it fails when addr does not answer.
func mustDial(t testing.TB, addr string, d time.Duration) net.Conn {
	t.Helper()
	c, err := dial(addr, d)
	if err != nil {
		t.Fatalf("dataplane: %s: %v", addr, err)
	}
	return c
}

// Stats asks addr (a memcached, or the proxy) for its stats, on a
// connection of its own that it closes.
func Stats(addr string) (map[string]string, error) {
	c, err := dial(addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if _, err := io.WriteString(c, "stats\r\n"); err != nil {
		return nil, err
	}
	out := map[string]string{}
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("stats of %s: %w", addr, err)
		}
		if line == "END\r\n" {
			return out, nil
		}
		if f := strings.Fields(line); len(f) == 3 && f[0] == "STAT" {
			out[f[1]] = f[2]
		}
	}
}

// ConfigGetCluster asks an endpoint for its list, as clients do.
func ConfigGetCluster(addr string) (string, error) {
	c, err := dial(addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if _, err := io.WriteString(c, "config get cluster\r\n"); err != nil {
		return "", err
	}
	var b bytes.Buffer
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			return b.String(), err
		}
		if line == "END\r\n" || strings.HasPrefix(line, "SERVER_ERROR") || strings.HasPrefix(line, "ERROR") {
			return b.String(), nil
		}
	}
}

// WaitFor polls f every 20 ms until it holds or timeout passes.
func WaitFor(timeout time.Duration, f func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !f() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}
