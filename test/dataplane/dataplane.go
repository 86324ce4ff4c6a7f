// Package dataplane runs the operator's data plane on this machine for the
// tests of the agent, the proxy and hand-offs: real memcached 1.6.45
// processes standing in for Pods, each on an address of its own on
// memcached's port (a loopback alias, 127.x.y.z:11211, as a Pod IP would
// be), the Memcached's status as the hook answers it for those Pods
// (Cluster runs the hook's own logic) and the agent built from this
// checkout; test/clients starts the real clients that use them.
//
// memcached comes from the environment make test sets (MEMCACHED_BIN,
// memcached 1.6.45), and runs as test/memcachedtest starts it. Without it
// a test skips naming it, or fails when CI is set.
package dataplane

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/memcached-operator/test/memcachedtest"
	"github.com/example/memcached-operator/test/testutil"
)

// Port is memcached's, on every Pod.
const Port = 11211

// Memcached is a memcached process standing in for a Pod.
type Memcached struct {
	*memcachedtest.Server
}

// StartMemcached starts memcached on ip:11211 with args (beside -p and
// -l), waits until it answers there itself (not a process that held the
// address already, while this one exits unable to bind), and stops it
// when the test ends.
func StartMemcached(t testing.TB, ip string, args ...string) *Memcached {
	t.Helper()
	return &Memcached{memcachedtest.Start(t, memcachedtest.Config{IP: ip, Port: Port, Args: args})}
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
	c := memcachedtest.Dial(t, m.Addr())
	defer c.Close()
	return c.Held(keys)
}

// Agent is memcached-agent built from this checkout, running.
type Agent struct {
	// Addr is the configuration endpoint's address, Admin the admin
	// server's.
	Addr, Admin string
	// Name is its Pod's name (POD_NAME): the agent beside a proxy
	// reports what its proxy loaded under it.
	Name string
	cmd  *exec.Cmd
	out  *testutil.LockedBuffer
	done chan struct{}
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
	a.Name = fmt.Sprintf("agent-%d", agents.Add(1))
	a.cmd.Env = append(os.Environ(), "POD_NAME="+a.Name)
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

// ConfigGetCluster asks an endpoint for its list, as clients do.
func ConfigGetCluster(addr string) (string, error) {
	return memcachedtest.Ask(addr, "config get cluster\r\n")
}
