package testutil

import (
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
