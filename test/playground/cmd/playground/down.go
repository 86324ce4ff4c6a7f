//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"
)

const (
	// downTimeout bounds the wait after SIGTERM: the supervisor gives each
	// of its three steps (clients, API server, etcd) up to 10 s before it
	// kills.
	downTimeout = 45 * time.Second
	// killTimeout bounds the wait after SIGKILL.
	killTimeout = 10 * time.Second
)

// down stops the playground of d and removes d's files, once no process of
// it is left and none of its ports listens.
func down(ctx context.Context, d stateDir, stderr io.Writer) error {
	if _, err := os.Stat(string(d)); errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(stderr, "playground: nothing is up in %s: nothing to do\n", d)
		return nil
	}
	lock, err := d.lock(ctx, stderr)
	if err != nil {
		return err
	}
	defer lock.Close()

	pid, running := d.supervisor()
	st, err := d.readState()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(stderr, "playground: %v (going on without it)\n", err)
	}
	if st == nil {
		st = &state{}
	}
	procs, err := d.processes()
	if err != nil {
		return err
	}
	if !running && len(procs) == 0 {
		left := d.leftovers()
		if len(left) == 0 {
			fmt.Fprintf(stderr, "playground: nothing is up in %s: nothing to do\n", d)
		} else {
			why := ""
			if r := d.stoppedReason(); r != "" {
				why = " (it stopped on its own: " + r + ")"
			}
			fmt.Fprintf(stderr, "playground: nothing is up in %s%s; removing the files of an earlier run (%s)\n", d, why, strings.Join(left, ", "))
		}
		if err := waitGone(ctx, d, 0, st.Ports, killTimeout); err != nil {
			return err
		}
		return d.remove(stderr)
	}

	began := time.Now()
	if running {
		fmt.Fprintf(stderr, "playground: stopping the playground in %s (supervisor pid %d)\n", d, pid)
		_ = syscall.Kill(pid, syscall.SIGTERM)
	} else {
		// No supervisor, yet processes of it run: it was killed where
		// children do not die with their parent.
		fmt.Fprintf(stderr, "playground: the supervisor is gone but %d of its processes run; stopping them\n", len(procs))
		for p := range procs {
			_ = syscall.Kill(p, syscall.SIGTERM)
		}
		pid = 0
	}
	if err := waitGone(ctx, d, pid, st.Ports, downTimeout); err != nil {
		fmt.Fprintf(stderr, "playground: %v; killing what is left\n", err)
		if p, ok := d.supervisor(); ok {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		left, _ := d.processes()
		for p := range left {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		if err := waitGone(ctx, d, pid, st.Ports, killTimeout); err != nil {
			return fmt.Errorf("%v; %s left in place", err, d)
		}
	}
	if err := d.remove(stderr); err != nil {
		return err
	}
	what := "the supervisor, which was still starting"
	if len(st.Processes) > 0 {
		what = "the supervisor and " + strings.Join(slices.Sorted(maps.Keys(st.Processes)), ", ") +
			fmt.Sprintf("; none of ports %v listens", st.Ports)
	}
	fmt.Fprintf(stderr, "playground: stopped in %.1fs (%s); removed %s\n", time.Since(began).Seconds(), what, d)
	return nil
}

// waitGone waits until the supervisor (pid, 0 for none) and every process
// carrying d's marker have exited and none of ports listens (but for a
// process of someone else's that got one since), or fails after timeout
// naming what is left.
func waitGone(ctx context.Context, d stateDir, pid int, ports []int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var left []string
		supervisorRuns := false
		if pid != 0 {
			_, supervisorRuns = d.supervisor()
		}
		if supervisorRuns {
			left = append(left, fmt.Sprintf("the supervisor (pid %d)", pid))
		}
		procs, err := d.processes()
		if err != nil {
			return err
		}
		for _, p := range slices.Sorted(maps.Keys(procs)) {
			if p != pid {
				left = append(left, fmt.Sprintf("pid %d (%s)", p, procs[p]))
			}
		}
		open, err := listening(ports, func(p int) bool { _, ok := procs[p]; return ok || (supervisorRuns && p == pid) })
		if err != nil {
			return err
		}
		for _, port := range slices.Sorted(maps.Keys(open)) {
			left = append(left, fmt.Sprintf("port %d listening (pids %v)", port, open[port]))
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s still there: %s", timeout, strings.Join(left, "; "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
