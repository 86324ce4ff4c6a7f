//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/example/memcached-operator/test/kube"
	"github.com/example/memcached-operator/test/playground"
	"github.com/example/memcached-operator/test/procnet"
	"github.com/example/memcached-operator/test/testutil"
)

// waitStartTimeout bounds how long up waits for a supervisor that an
// earlier, interrupted up left starting.
const waitStartTimeout = 5 * time.Minute

// reportFD is the descriptor on which the supervisor tells up how the
// start goes: the pipe up passes as its first extra file.
const reportFD = 3

// report is one line the supervisor writes to up, as JSON.
type report struct {
	Progress string `json:"progress,omitempty"`
	Ready    bool   `json:"ready,omitempty"`
	Error    string `json:"error,omitempty"`
}

// up starts the playground in d unless it runs already, and prints the
// export line.
func up(ctx context.Context, d stateDir, root string, getenv func(string) string, stdout, stderr io.Writer) error {
	began := time.Now()
	if err := os.MkdirAll(string(d), 0o700); err != nil {
		return err
	}
	lock, err := d.lock(ctx, stderr)
	if err != nil {
		return err
	}
	defer lock.Close()

	if pid, ok := d.supervisor(); ok {
		if _, err := d.readState(); errors.Is(err, fs.ErrNotExist) {
			// An interrupted up left its supervisor starting.
			fmt.Fprintf(stderr, "playground: a playground is starting in %s (supervisor pid %d); waiting for it\n", d, pid)
			if err := waitReady(ctx, d, pid); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "playground: already up in %s (supervisor pid %d; logs in %s); make down stops it\n", d, pid, d.path(logName))
		fmt.Fprintln(stdout, d.exportLine())
		return nil
	}
	if _, err := kube.ProgramsFromEnv(getenv, playground.Options); err != nil {
		return fmt.Errorf("%v\n(make up builds what it can and sets the variables: run it, and read what it says it could not build)", err)
	}
	if procs, err := d.processes(); err != nil {
		return err
	} else if len(procs) > 0 {
		// Its supervisor is gone, but not they: make down stops them.
		return fmt.Errorf("%d processes of an earlier playground in %s still run (pids %v); run make down first", len(procs), d, slices.Sorted(maps.Keys(procs)))
	}
	if left := d.leftovers(); len(left) > 0 {
		if why := d.stoppedReason(); why != "" {
			fmt.Fprintf(stderr, "playground: the playground that ran in %s stopped on its own: %s\n", d, why)
		}
		fmt.Fprintf(stderr, "playground: removing what an earlier run left in %s (%s)\n", d, strings.Join(left, ", "))
		if err := d.clear(); err != nil {
			return err
		}
	}
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return err
	}

	exe, err := os.Executable()
	if err != nil {
		return err
	}
	logFile, err := os.OpenFile(d.path(logName), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		logFile.Close()
		return err
	}
	cmd := exec.Command(exe, "supervise", "--dir="+string(d), "--root="+absRoot)
	cmd.Dir = string(d)
	cmd.Env = append(os.Environ(), playground.DirEnv+"="+string(d))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.ExtraFiles = []*os.File{w} // reportFD
	// A session of its own: the terminal's Ctrl-C and hang-up reach make
	// and up, not the playground.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	fmt.Fprintf(stderr, "playground: starting in %s (the supervisor's log: %s)\n", d, d.path(logName))
	err = cmd.Start()
	w.Close()
	logFile.Close()
	if err != nil {
		r.Close()
		return fmt.Errorf("starting the supervisor: %w", err)
	}

	reports := make(chan report)
	go func() {
		defer close(reports)
		defer r.Close()
		sc := testutil.Lines(r, 1<<20)
		for sc.Scan() {
			var rep report
			if json.Unmarshal(sc.Bytes(), &rep) != nil {
				rep = report{Progress: sc.Text()}
			}
			reports <- rep
		}
	}()
	var (
		ready       bool
		failure     string
		interrupted bool
	)
	done := ctx.Done()
read:
	for {
		select {
		case <-done:
			// Ctrl-C: the supervisor stops what it started, says so
			// and closes the pipe.
			_ = cmd.Process.Signal(syscall.SIGTERM)
			interrupted, done = true, nil
		case rep, ok := <-reports:
			switch {
			case !ok:
				break read
			case rep.Progress != "":
				fmt.Fprintln(stderr, "playground:", rep.Progress)
			case rep.Error != "":
				failure = rep.Error
			case rep.Ready:
				// Done: the supervisor closes the pipe next.
				ready = true
				break read
			}
		}
	}
	if ready && !interrupted {
		_ = cmd.Process.Release()
		fmt.Fprintf(stderr, "playground: up in %.1fs; logs: %s, %s, %s\n", time.Since(began).Seconds(),
			d.path(logName), d.path(clusterDir, "run*", "<process>.log"), d.path(hookDir, "hook.log"))
		fmt.Fprintf(stderr, "playground: make down stops it and removes %s\n", d)
		fmt.Fprintln(stdout, d.exportLine())
		return nil
	}
	// The supervisor has stopped what it started, or is doing so.
	waitErr := cmd.Wait()
	switch {
	case interrupted:
		return fmt.Errorf("interrupted: stopped what had started (logs in %s)", d)
	case failure != "":
		return fmt.Errorf("start-up failed, stopped what had started: %s\n(the supervisor's log: %s; make up starts again, make down removes the files)", failure, d.path(logName))
	default:
		return fmt.Errorf("the supervisor exited (%v) before it was ready; see %s", waitErr, d.path(logName))
	}
}

// waitReady waits until the supervisor pid of d has written its state, or
// has exited.
func waitReady(ctx context.Context, d stateDir, pid int) error {
	deadline := time.Now().Add(waitStartTimeout)
	for {
		if _, err := d.readState(); err == nil {
			return nil
		}
		if !procnet.Running(pid) {
			return fmt.Errorf("the starting playground exited before it was ready; see %s", d.path(logName))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the starting playground (pid %d) was not ready after %s; see %s, or run make down", pid, waitStartTimeout, d.path(logName))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// supervise starts the system, reports to up, and stops the system on
// SIGTERM or SIGINT (ctx), or when one of its processes exits on its own.
// stdout is its log.
func supervise(ctx context.Context, d stateDir, root string, getenv func(string) string, stdout io.Writer) error {
	var (
		rep *os.File
		st  syscall.Stat_t
	)
	if syscall.Fstat(reportFD, &st) == nil {
		// Close-on-exec: the pipe came without it, and the children
		// would inherit it, so up would never see it closed.
		syscall.CloseOnExec(reportFD)
		rep = os.NewFile(reportFD, "report")
	}
	send := func(r report) {
		if rep == nil {
			return
		}
		b, _ := json.Marshal(r)
		// Ignored error: up may be gone (killed); the log has it all.
		_, _ = rep.Write(append(b, '\n'))
	}
	logf := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		fmt.Fprintf(stdout, "%s %s\n", time.Now().Format(time.RFC3339Nano), msg)
		send(report{Progress: strings.TrimPrefix(strings.TrimPrefix(msg, "kube: "), "playground: ")})
	}
	fail := func(err error) error {
		fmt.Fprintf(stdout, "%s error: %v\n", time.Now().Format(time.RFC3339Nano), err)
		send(report{Error: err.Error()})
		return err
	}

	if err := d.writeFile(pidName, fmt.Appendf(nil, "%d\n", os.Getpid())); err != nil {
		return fail(err)
	}
	defer os.Remove(d.path(pidName))
	progs, err := kube.ProgramsFromEnv(getenv, playground.Options)
	if err != nil {
		return fail(err)
	}
	sys, err := playground.Start(ctx, playground.Config{Root: root, Dir: d.path(hookDir), Logf: logf}, progs, d.path(clusterDir))
	if err != nil {
		return fail(err)
	}
	if err := writeReady(d, sys, progs); err != nil {
		stopSystem(sys, logf)
		return fail(err)
	}
	logf("ready: %s", strings.Join(slices.Sorted(maps.Keys(sys.PIDs())), ", "))
	send(report{Ready: true})
	if rep != nil {
		rep.Close()
	}

	// The agents of the Memcacheds that ask for the configuration
	// endpoint, on loopback: their Pods are kwok's and run nothing.
	agents := &playground.Agents{Root: root, Dir: d.path(agentsDir), Logf: logf}
	defer agents.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			logf("asked to stop")
			agents.Stop()
			stopSystem(sys, logf)
			return nil
		case <-tick.C:
		}
		if err := agents.Sync(ctx, sys.Cluster); err != nil {
			logf("following the Memcacheds for their agents: %v", err)
		}
		if err := sys.Exited(); err != nil {
			logf("%v; stopping the rest", err)
			agents.Stop()
			stopSystem(sys, logf)
			_ = d.writeFile(stoppedName, fmt.Appendf(nil, "%s: %v\n", time.Now().Format(time.RFC3339), err))
			_ = os.Remove(d.path(stateName))
			return err
		}
	}
}

// stopSystem stops the system, saying so in the log.
func stopSystem(sys *playground.System, logf func(string, ...any)) {
	logf("stopping: the hook and the API server's clients, then kube-apiserver, then etcd")
	if err := sys.Stop(); err != nil {
		logf("stopping: %v", err)
	}
	logf("stopped")
}

// writeReady writes what the user and down need once the system is ready:
// the kubeconfig, bin/kubectl, and the state (last: it says "ready").
func writeReady(d stateDir, sys *playground.System, progs kube.Programs) error {
	kubeconfig, err := os.ReadFile(sys.Cluster.Kubeconfig())
	if err != nil {
		return err
	}
	if err := d.writeFile(kubeconfigName, kubeconfig); err != nil {
		return err
	}
	if err := os.MkdirAll(d.path(binDir), 0o700); err != nil {
		return err
	}
	kubectl, err := filepath.Abs(progs.Kubectl)
	if err != nil {
		return err
	}
	link := d.path(binDir, "kubectl")
	_ = os.Remove(link)
	if err := os.Symlink(kubectl, link); err != nil {
		return err
	}
	st := state{Supervisor: os.Getpid(), Processes: sys.PIDs(), Server: sys.Cluster.Server(), Logs: map[string]string{}}
	for name, pid := range st.Processes {
		socks, err := procnet.Listening(pid)
		if err != nil {
			return fmt.Errorf("reading what %s (pid %d) listens on: %w", name, pid, err)
		}
		for _, s := range socks {
			st.Ports = append(st.Ports, s.LocalPort)
		}
		if name == "memcached-hook" {
			st.Logs[name] = sys.Hook.LogPath()
		} else {
			st.Logs[name] = sys.Cluster.LogPath(name)
		}
	}
	slices.Sort(st.Ports)
	st.Ports = slices.Compact(st.Ports)
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return d.writeFile(stateName, append(b, '\n'))
}
