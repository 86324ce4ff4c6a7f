// Package memcachedtest runs the real memcached 1.6.45 for a test and
// speaks its text protocol: Start is the one launcher the tests use (the
// agent's, the hand-offs', the protocol comparison's and test/dataplane's
// Pods and proxies), Dial the one client. It is imported by tests and the
// test harnesses only.
//
// memcached comes from the environment make test sets (MEMCACHED_BIN).
// Without it a test skips naming it, or fails when CI is set
// (testutil.Program).
package memcachedtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/test/testutil"
)

// EnvBin names memcached 1.6.45's program.
const EnvBin = "MEMCACHED_BIN"

// StartTimeout bounds how long Start waits for memcached to listen.
const StartTimeout = 30 * time.Second

// Config is what Start runs.
type Config struct {
	// IP is the address memcached listens on (-l): 127.0.0.1 when empty.
	IP string
	// Port is its TCP port (-p). 0 lets memcached pick a free one (-p -1)
	// and write it to MEMCACHED_PORT_FILENAME once it listens, as its own
	// test suite does: a port freed by the test and then given to
	// memcached could be taken meanwhile by another package's process.
	Port int
	// Args are memcached's other arguments (-m, -t, -o ...), beside -l, -p
	// and -U 0, which Start gives after them.
	Args []string
	// Env is added to the test's environment.
	Env []string
	// What names the server in messages and in the skip ("memcached
	// 1.6.45" when empty).
	What string
}

// Server is a memcached process, killed when the test ends.
type Server struct {
	// IP and Port are where it listens.
	IP   string
	Port int

	what  string
	cmd   *exec.Cmd
	out   *testutil.LockedBuffer
	done  chan struct{}
	state *os.ProcessState
}

// Start runs memcached as cfg says and returns once it listens at its
// address itself, not a process that held the address already while this
// one exits unable to bind (testutil.Listens). Run as root, it starts
// memcached as nobody (memcached refuses to run as root unless told
// whom to become), through the process's credentials rather than
// memcached's -u: a process that changes its own credentials loses its
// parent-death signal, and a memcached that outlives a killed test binary
// holds its address for the next run. Files memcached reads must be
// readable by nobody then (dataplane.ReadableDir).
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	if cfg.What == "" {
		cfg.What = "memcached 1.6.45"
	}
	if cfg.IP == "" {
		cfg.IP = "127.0.0.1"
	}
	bin := testutil.Program(t, EnvBin, cfg.What)
	attr, asUser, err := procAttr()
	if err == nil {
		bin, err = runnable(bin, attr)
	}
	if err != nil {
		t.Fatalf("memcachedtest: %v", err)
	}
	s := &Server{IP: cfg.IP, Port: cfg.Port, what: cfg.What, out: &testutil.LockedBuffer{}, done: make(chan struct{})}
	port := strconv.Itoa(cfg.Port)
	env := append(os.Environ(), cfg.Env...)
	var portFile string
	if cfg.Port == 0 {
		port, portFile = "-1", s.portFile(t)
		env = append(env, "MEMCACHED_PORT_FILENAME="+portFile)
	}
	// Start's own arguments last, so that the address it waits on is the
	// one memcached listens on whatever Args says (the proxy's name -p).
	args := append(slices.Clone(cfg.Args), "-l", cfg.IP, "-p", port, "-U", "0")
	s.cmd = exec.Command(bin, append(args, asUser...)...)
	s.cmd.Env = env
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	s.cmd.SysProcAttr = attr
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("memcachedtest: starting %s on %s: %v", cfg.What, cfg.IP, err)
	}
	go func() {
		_ = s.cmd.Wait()
		s.state = s.cmd.ProcessState
		close(s.done)
	}()
	t.Cleanup(func() {
		s.Kill()
		if t.Failed() && s.out.String() != "" {
			t.Logf("memcachedtest: %s on %s wrote:\n%s", s.what, s.Addr(), s.out.String())
		}
	})
	testutil.Eventually(t, StartTimeout, func() error {
		if exited, how := s.Exited(); exited {
			t.Fatalf("memcachedtest: %s on %s exited (%s); it wrote: %s", cfg.What, cfg.IP, how, s.out.String())
		}
		if portFile != "" {
			return s.readPortFile(t, portFile)
		}
		return s.listens()
	})
	return s
}

// portFile is a file for memcached to write its port to.
func (s *Server) portFile(t testing.TB) string {
	t.Helper()
	return filepath.Join(Dir(t, "memcached-ports-"), "ports")
}

// Dir is a directory of the test's, named after pattern and removed when
// it ends, that memcached may write however it runs (as nobody when the
// test runs as root): not t.TempDir, whose parent only its owner may
// enter. Its port file, say, or its extstore file (-o ext_path).
func Dir(t testing.TB, pattern string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// readPortFile reads the port memcached wrote: it renames the file into
// place once every socket is bound.
func (s *Server) readPortFile(t testing.TB, path string) error {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("memcached wrote no port file yet: %v; it wrote: %s", err, s.out.String())
	}
	for line := range strings.Lines(string(b)) {
		if _, err := fmt.Sscanf(line, "TCP INET: %d", &s.Port); err == nil {
			return nil
		}
	}
	t.Fatalf("memcachedtest: memcached's port file has no TCP port: %q", b)
	return nil
}

// listens is nil once the server answers at its address, and is the
// process that listens there.
func (s *Server) listens() error {
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		return fmt.Errorf("%s does not listen on %s: %v; it wrote: %s", s.what, s.Addr(), err, s.out.String())
	}
	c.Close()
	ours, err := testutil.Listens(s.cmd.Process.Pid, s.Addr())
	switch {
	case err != nil:
		return fmt.Errorf("cannot tell which process answers on %s: %v", s.Addr(), err)
	case !ours:
		return fmt.Errorf("another process than %s answers on %s", s.what, s.Addr())
	}
	return nil
}

// Addr is the server's ip:port.
func (s *Server) Addr() string { return net.JoinHostPort(s.IP, strconv.Itoa(s.Port)) }

// PID is the server's process ID.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Output is what memcached wrote so far, on standard output and error.
func (s *Server) Output() string { return s.out.String() }

// Kill ends memcached at once, as a Pod lost without grace, and waits for
// it to be gone.
func (s *Server) Kill() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// Exited tells whether memcached ended, and how, from the process's own
// wait status: its parent reaped it, so a zombie counts as ended (kill -0
// on a zombie succeeds).
func (s *Server) Exited() (bool, string) {
	select {
	case <-s.done:
		return true, s.state.String()
	default:
		return false, ""
	}
}

// Running tells whether the process still runs.
func (s *Server) Running() bool {
	exited, _ := s.Exited()
	return !exited
}

// Freeze stops memcached with SIGSTOP, to cut it off while it still runs:
// it keeps its items and answers nothing, while the kernel still accepts
// connections to its address and takes the bytes sent on them, which
// memcached reads once thawed (Thaw). A client that gives up on it
// (a read timeout) closes its connection; the requests it had sent are
// still served when memcached runs again, as a network cut that heals
// before TCP gives up delivers them, and the ones it sends after giving
// up never reach it.
func (s *Server) Freeze(t testing.TB) {
	t.Helper()
	s.signal(t, freezeSignal)
}

// Thaw resumes a memcached Freeze stopped (SIGCONT).
func (s *Server) Thaw(t testing.TB) {
	t.Helper()
	s.signal(t, thawSignal)
}

func (s *Server) signal(t testing.TB, sig os.Signal) {
	t.Helper()
	if sig == nil {
		t.Fatalf("memcachedtest: cannot stop or resume a process on this system")
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("memcachedtest: %s on %s: %v: %v", s.what, s.Addr(), sig, err)
	}
}

// Stop ends memcached as kubelet ends a container (testutil.Stop): sig,
// then SIGKILL once grace has passed; it reports whether memcached ended
// within grace.
func (s *Server) Stop(sig os.Signal, grace time.Duration) bool {
	return testutil.Stop(s.cmd, s.done, sig, grace)
}
