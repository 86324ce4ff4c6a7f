package testutil

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
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

// LockedBuffer is a buffer several goroutines write (a program's standard
// output and error, say) and a test reads.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is what was written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Reset forgets what was written.
func (l *LockedBuffer) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Reset()
}

// Alive tells whether process pid runs: it exists and is no zombie (kill
// -0 succeeds on a zombie, whose parent has not reaped it yet).
func Alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces, the state follows its ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}
