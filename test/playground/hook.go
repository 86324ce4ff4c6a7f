package playground

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/example/memcached-operator/test/testutil"
)

// Hook is the operator's hook, built from this checkout and run on
// loopback, as the CompositeController calls it. It can be stopped and
// started again on the same address, which is how an end-to-end scenario
// takes it down for a while. Its methods are safe for concurrent use.
type Hook struct {
	bin     string
	logPath string

	mu    sync.Mutex
	addr  string // 127.0.0.1:PORT once started
	cmd   *exec.Cmd
	done  <-chan struct{} // closed when the process has exited
	calls []hookCall      // every call the hook logged, in order
}

// hookCall is one line the hook logs per call.
type hookCall struct {
	at        time.Time
	Msg       string `json:"msg"`
	Hook      string `json:"hook"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Status    int    `json:"status"`
}

// AgentImage is the image the hook gives the agents' Deployments here.
const AgentImage = "ghcr.io/example/memcached-hook:playground"

// hookStartTimeout bounds the wait for the hook to say it listens.
const hookStartTimeout = 30 * time.Second

// BuildHook builds cmd/memcached-hook of the repository at root into dir
// with the go command, with the race detector if race is set (the
// end-to-end suite sets it when it runs with it, so that a race in the hook
// under real traffic fails the suite), and returns the binary's path.
func BuildHook(ctx context.Context, root, dir string, race bool) (string, error) {
	bin := filepath.Join(dir, "memcached-hook")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "./cmd/memcached-hook")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s ./cmd/memcached-hook in %s: %v\n%s", strings.Join(args, " "), root, err, out)
	}
	return bin, nil
}

// NewHook returns the hook built as bin, not started, which logs to
// logPath (appending: a restarted hook keeps the earlier lines).
func NewHook(bin, logPath string) *Hook {
	return &Hook{bin: bin, logPath: logPath}
}

// Start runs the hook on addr (127.0.0.1:0 for a free port the first time)
// and returns once it logs that it listens.
func (h *Hook) Start(addr string) error {
	log, err := os.OpenFile(h.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	// No container runs here, so the agent's image is never pulled: it
	// only names what a cluster would run.
	cmd := exec.Command(h.bin, "--listen-address="+addr, "--shutdown-delay=0", "--agent-image="+AgentImage)
	cmd.Env = hookEnv()
	listening := make(chan string, 1)
	done, err := startLogged(cmd, log, func(line []byte) {
		var c struct {
			hookCall
			Address string `json:"address"`
		}
		if json.Unmarshal(line, &c) != nil {
			return
		}
		switch c.Msg {
		case "listening":
			listening <- c.Address
		case "hook call":
			c.at = time.Now()
			h.mu.Lock()
			h.calls = append(h.calls, c.hookCall)
			h.mu.Unlock()
		}
	}, nil)
	if err != nil {
		return err
	}
	select {
	case a := <-listening:
		h.mu.Lock()
		h.addr, h.cmd, h.done = a, cmd, done
		h.mu.Unlock()
		return nil
	case <-done:
		return fmt.Errorf("the hook exited before listening on %s: %v (output in %s)", addr, cmd.ProcessState, h.logPath)
	case <-time.After(hookStartTimeout):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("the hook did not say it listens within %s (output in %s)", hookStartTimeout, h.logPath)
	}
}

// startLogged starts cmd, which the kernel kills if this process dies,
// with what it writes going to log, which it closes when cmd has exited
// or could not start. It hands each line cmd writes on stdout (the
// program's JSON log) to each, in order, then calls exited, if not nil,
// once cmd has exited, and closes the channel it returns.
func startLogged(cmd *exec.Cmd, log *os.File, each func(line []byte), exited func()) (<-chan struct{}, error) {
	cmd.Stderr = log
	cmd.SysProcAttr = sysProcAttr()
	stdout, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		log.Close()
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer log.Close()
		sc := testutil.Lines(stdout, 1<<20)
		for sc.Scan() {
			fmt.Fprintf(log, "%s\n", sc.Bytes())
			each(sc.Bytes())
		}
		_ = cmd.Wait()
		if exited != nil {
			exited()
		}
	}()
	return done, nil
}

// Stop stops the hook (SIGTERM: it stops at once with --shutdown-delay=0)
// and waits for it to exit. It reports a data race the race-built hook
// found. Stopping a stopped hook does nothing.
func (h *Hook) Stop() error {
	h.mu.Lock()
	cmd, done := h.cmd, h.done
	h.cmd = nil
	h.mu.Unlock()
	if cmd == nil {
		return nil
	}
	if !testutil.Stop(cmd, done, syscall.SIGTERM, 15*time.Second) {
		return fmt.Errorf("the hook did not stop within 15s of SIGTERM (output in %s)", h.logPath)
	}
	return h.raceReport()
}

// URL returns the hook's base URL, http://127.0.0.1:PORT.
func (h *Hook) URL() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return "http://" + h.addr
}

// Address returns 127.0.0.1:PORT.
func (h *Hook) Address() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.addr
}

// LogPath returns the file holding the hook's output.
func (h *Hook) LogPath() string { return h.logPath }

// Running tells whether the hook's process runs (it was started and not
// stopped, and has not exited).
func (h *Hook) Running() bool {
	h.mu.Lock()
	cmd, done := h.cmd, h.done
	h.mu.Unlock()
	if cmd == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// PID returns the hook's process ID, 0 when it does not run.
func (h *Hook) PID() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cmd == nil {
		return 0
	}
	return h.cmd.Process.Pid
}

// raceReport returns an error if the hook's output holds a data race
// report.
func (h *Hook) raceReport() error {
	b, err := os.ReadFile(h.logPath)
	if err != nil {
		return err
	}
	if n := bytes.Count(b, []byte("WARNING: DATA RACE")); n > 0 {
		return fmt.Errorf("the race detector found %d data race(s) in the hook; see %s", n, h.logPath)
	}
	return nil
}

// CallsIn returns the calls the hook logged for Memcacheds in namespace ns
// since since, by hook (sync, customize).
func (h *Hook) CallsIn(ns string, since time.Time) map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := map[string]int{}
	for _, c := range h.calls {
		if c.Namespace == ns && !c.at.Before(since) {
			n[c.Hook]++
		}
	}
	return n
}

// LogLinesFor returns the hook's log lines that name namespace ns, for a
// failed scenario's output.
func (h *Hook) LogLinesFor(ns string) string {
	f, err := os.Open(h.logPath)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var out strings.Builder
	sc := testutil.Lines(f, 1<<20)
	needle := []byte(`"namespace":"` + ns + `"`)
	for sc.Scan() {
		if bytes.Contains(sc.Bytes(), needle) {
			out.Write(sc.Bytes())
			out.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		fmt.Fprintf(&out, "reading %s: %v\n", h.logPath, err)
	}
	return out.String()
}

// hookEnv is the hook's environment: this process's, less
// MEMCACHED_HOOK_*, which the hook reads as flags.
func hookEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MEMCACHED_HOOK_") {
			env = append(env, kv)
		}
	}
	return env
}
