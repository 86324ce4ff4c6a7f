package testutil

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"time"
)

// Stop ends cmd as kubelet ends a container: it sends sig (SIGTERM), waits
// up to grace for done, which closes once cmd has exited, then kills cmd
// and waits again. It reports whether cmd ended within grace. A cmd that
// has exited already is left alone.
func Stop(cmd *exec.Cmd, done <-chan struct{}, sig os.Signal, grace time.Duration) bool {
	select {
	case <-done:
		return true
	default:
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
		return true
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
		return false
	}
}

// Lines scans r line by line, a line up to max bytes: a program's JSON log
// line, a hook call's say, can be far longer than bufio.Scanner's 64 KiB.
func Lines(r io.Reader, max int) *bufio.Scanner {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), max)
	return sc
}
