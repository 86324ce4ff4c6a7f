//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/example/memcached-operator/test/playground"
	"github.com/example/memcached-operator/test/procnet"
)

// The files and directories of the state directory, all the playground
// ever makes there: down removes these and nothing else, so that a
// mistaken UP_DIR loses nothing of its own.
const (
	binaryName     = "playground"     // this command, built by make up
	lockName       = "lock"           // flock'ed by up and down
	pidName        = "supervisor.pid" // the supervisor's PID, while it runs
	logName        = "supervisor.log" // its output: progress, and why it stopped
	stateName      = "state.json"     // what runs, written once it is all ready
	kubeconfigName = "kubeconfig"     // the admin kubeconfig, once ready
	binDir         = "bin"            // kubectl, a link to the one make built
	clusterDir     = "cluster"        // test/kube's files: run1/<process>.log, ...
	hookDir        = "hook"           // the hook's binary and hook.log, install overlays
	agentsDir      = "agents"         // the agents' binary; NAMESPACE/NAME: an agent's address, .log and .kubeconfig
	stoppedName    = "stopped"        // why the supervisor stopped on its own
)

// ownNames are the names above but the binary and the lock, which up keeps
// when it clears an earlier run's files.
var ownNames = []string{pidName, logName, stateName, kubeconfigName, binDir, clusterDir, hookDir, agentsDir, stoppedName}

// stateDir is a playground's state directory, an absolute path.
type stateDir string

// shellSafe matches the paths the export line can hold unquoted.
var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./+@%:,=-]+$`)

// openStateDir makes dir absolute, with no symbolic link in it (two paths
// to one directory are one playground), and checks the export line can
// name it.
func openStateDir(dir string) (stateDir, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if abs, err = resolve(abs); err != nil {
		return "", err
	}
	if !shellSafe.MatchString(abs) {
		return "", fmt.Errorf("the state directory %q holds a space or a character the shell would read: the export line could not be copied as it is; use another UP_DIR", abs)
	}
	return stateDir(abs), nil
}

// resolve resolves the symbolic links in the absolute path abs, whose
// last elements need not exist yet.
func resolve(abs string) (string, error) {
	var rest []string
	for p := abs; ; p = filepath.Dir(p) {
		r, err := filepath.EvalSymlinks(p)
		if err == nil {
			slices.Reverse(rest)
			return filepath.Join(append([]string{r}, rest...)...), nil
		}
		if !errors.Is(err, fs.ErrNotExist) || p == filepath.Dir(p) {
			return "", err
		}
		rest = append(rest, filepath.Base(p))
	}
}

// path returns the path of name in d.
func (d stateDir) path(name ...string) string {
	return filepath.Join(append([]string{string(d)}, name...)...)
}

// exportLine is the line up prints last, for the user to copy.
func (d stateDir) exportLine() string {
	return fmt.Sprintf("export KUBECONFIG=%s PATH=%s:$PATH", d.path(kubeconfigName), d.path(binDir))
}

// lock takes d's lock, waiting (and saying so) while another up or down
// holds it. The lock goes with the returned file: close it to unlock.
func (d stateDir) lock(ctx context.Context, stderr io.Writer) (*os.File, error) {
	f, err := os.OpenFile(d.path(lockName), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	said := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", f.Name(), err)
		}
		if !said {
			fmt.Fprintf(stderr, "playground: waiting for another make up or make down in %s\n", d)
			said = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// supervisor returns the PID of d's supervisor and whether it runs: the
// PID file names a process that runs and is `playground supervise` of d.
func (d stateDir) supervisor() (int, bool) {
	b, err := os.ReadFile(d.path(pidName))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	if !procnet.Running(pid) {
		return pid, false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return pid, false
	}
	args := strings.Split(string(bytes.TrimRight(cmdline, "\x00")), "\x00")
	return pid, slices.Contains(args, "supervise") && slices.Contains(args, "--dir="+string(d))
}

// state is what runs, written by the supervisor once all of it is ready.
type state struct {
	// Supervisor is the supervisor's PID.
	Supervisor int `json:"supervisor"`
	// Processes are its children, by name.
	Processes map[string]int `json:"processes"`
	// Ports are the TCP ports they listen on, all on 127.0.0.1.
	Ports []int `json:"ports"`
	// Server is the API server's URL.
	Server string `json:"server"`
	// Logs are the processes' output files, by name.
	Logs map[string]string `json:"logs"`
}

// readState reads d's state; fs.ErrNotExist when there is none.
func (d stateDir) readState() (*state, error) {
	b, err := os.ReadFile(d.path(stateName))
	if err != nil {
		return nil, err
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", d.path(stateName), err)
	}
	return &st, nil
}

// writeFile writes name in d atomically: a reader sees the old file or the
// new one, never half of it.
func (d stateDir) writeFile(name string, data []byte) error {
	tmp := d.path("." + name + ".new")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, d.path(name))
}

// leftovers lists which of ownNames exist in d.
func (d stateDir) leftovers() []string {
	var out []string
	for _, name := range ownNames {
		if _, err := os.Lstat(d.path(name)); err == nil {
			out = append(out, name)
		}
	}
	return out
}

// clear removes ownNames from d.
func (d stateDir) clear() error {
	var errs []error
	for _, name := range ownNames {
		if err := os.RemoveAll(d.path(name)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// remove removes everything the playground made in d, and d itself if
// that leaves it empty. It says so when d holds files of someone else's.
func (d stateDir) remove(stderr io.Writer) error {
	if err := d.clear(); err != nil {
		return err
	}
	for _, name := range []string{binaryName, lockName} {
		if err := os.Remove(d.path(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := os.Remove(string(d)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(stderr, "playground: left %s in place: it holds files the playground did not make (%v)\n", d, err)
	}
	return nil
}

// stoppedReason returns why an earlier supervisor stopped on its own, or
// "".
func (d stateDir) stoppedReason() string {
	b, err := os.ReadFile(d.path(stoppedName))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// processes returns the processes that carry d's marker
// (playground.DirEnv) and run (not zombies), by PID, with their command
// lines, read from /proc. Processes this one may not read are left out.
func (d stateDir) processes() (map[int]string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	marker := []byte(playground.DirEnv + "=" + string(d) + "\x00")
	out := map[int]string{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !bytes.Contains(append([]byte{0}, env...), append([]byte{0}, marker...)) {
			continue
		}
		if !procnet.Running(pid) {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		out[pid] = strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " ")
	}
	return out, nil
}

// listening returns which of ports still listen, each with the PIDs that
// hold it; a port held only by processes ours refuses (another program
// that got the port since) is left out.
func listening(ports []int, ours func(pid int) bool) (map[int][]int, error) {
	sockets, err := procnet.Sockets()
	if err != nil {
		return nil, err
	}
	byPort := map[int][]string{}
	var inodes []string
	for ino, s := range sockets {
		if s.Listening() && slices.Contains(ports, s.LocalPort) {
			byPort[s.LocalPort] = append(byPort[s.LocalPort], ino)
			inodes = append(inodes, ino)
		}
	}
	if len(inodes) == 0 {
		return nil, nil
	}
	owners, err := procnet.Owners(inodes)
	if err != nil {
		return nil, err
	}
	out := map[int][]int{}
	for port, inos := range byPort {
		for _, ino := range inos {
			pids := owners[ino]
			// A socket whose holder is not known (gone meanwhile, or not
			// readable) counts as ours: better wait than say it is closed.
			if len(pids) == 0 || slices.ContainsFunc(pids, ours) {
				out[port] = append(out[port], pids...)
			}
		}
	}
	return out, nil
}

// newFlagSet returns the flag set of a subcommand, which reports to stderr.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("playground "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}
