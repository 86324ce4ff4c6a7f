//go:build linux

package pod

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// process is a started command: a container's nsenter, an exec's, the
// sandbox. A container's and an exec's lead their own process group
// (nsenter forks the program it runs, which must get the signals too).
//
// Signals to a group are sent only while the leader is not reaped: until
// then its PID, which is the group's ID, cannot go to another process.
// Machines with a small pid_max (32768 is common) reuse PIDs soon; a kill
// of a reaped group's ID could reach someone else's processes. To kill a
// container, every process of the group but nsenter is killed (kill).
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once it is reaped
	err  error         // what Wait returned, once done is closed

	mu    sync.Mutex
	ended bool // it exited: it may be reaped any time
}

// start starts cmd and a goroutine that waits for it.
func start(cmd *exec.Cmd) (*process, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	pr := &process{cmd: cmd, done: make(chan struct{})}
	go pr.wait()
	return pr, nil
}

func (pr *process) wait() {
	// Learn that it exited without reaping it (WNOWAIT), mark it, and
	// only then reap it.
	var info unix.Siginfo
	for {
		if err := unix.Waitid(unix.P_PID, pr.cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != unix.EINTR {
			break
		}
	}
	pr.mu.Lock()
	pr.ended = true
	pr.mu.Unlock()
	pr.err = pr.cmd.Wait()
	close(pr.done)
}

// signalGroup sends sig to the process's group, if its leader has not
// exited.
func (pr *process) signalGroup(sig syscall.Signal) error {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.ended {
		return os.ErrProcessDone
	}
	return syscall.Kill(-pr.cmd.Process.Pid, sig)
}

// kill kills every process of the group and waits for the leader to
// end. nsenter itself gets no signal: it reaps the program, which it forks
// into the Pod's PID namespace, and exits with the program's signal. Were
// nsenter killed with the rest, the program's zombie would go to the
// machine's init (nsenter is outside the Pod), and the Pod's PID 1 could
// not exit before that init reaped it (about a second here).
func (pr *process) kill() {
	pr.killMembers()
	select {
	case <-pr.done:
	case <-time.After(5 * time.Second):
		pr.signalGroup(syscall.SIGKILL) // nsenter did not end: all of it
		<-pr.done
	}
}

// killMembers sends SIGKILL to every process of the group but its leader,
// each through a pidfd opened after it was found and checked again after,
// so that a PID reused in between is left alone.
func (pr *process) killMembers() {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.ended {
		return
	}
	leader := pr.cmd.Process.Pid
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == leader || groupOf(pid) != leader {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		if groupOf(pid) == leader {
			unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		}
		unix.Close(fd)
	}
}

// groupOf is a process's group ID, or 0.
func groupOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid pgrp ...: comm may hold spaces.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 3 {
		return 0
	}
	g, _ := strconv.Atoi(f[2])
	return g
}

// signalChild sends sig to the program nsenter runs, and to it alone: the
// container's main process, which kubelet's runtime signals to stop it.
// The program may not have started yet (nsenter forks it): it waits up to
// a second for it.
func (pr *process) signalChild(sig syscall.Signal) error {
	var err error
	for range 100 {
		if err = pr.trySignalChild(sig); err == nil || err == os.ErrProcessDone {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
	return err
}

func (pr *process) trySignalChild(sig syscall.Signal) error {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.ended {
		return os.ErrProcessDone
	}
	nsenter := pr.cmd.Process.Pid
	pid, err := childOf(nsenter)
	if err != nil {
		return err
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err == unix.ESRCH {
		return os.ErrProcessDone
	}
	if err != nil {
		return fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(fd)
	// The PID may have gone to another process between reading it and
	// opening it; it is still the program if nsenter (which forks once)
	// still has it as its child.
	if again, err := childOf(nsenter); err != nil || again != pid {
		return os.ErrProcessDone
	}
	return unix.PidfdSendSignal(fd, sig, nil, 0)
}

// childOf is a process's first child: for nsenter, the program it runs.
func childOf(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("process %d has no child", pid)
	}
	return strconv.Atoi(f[0])
}
