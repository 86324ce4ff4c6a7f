//go:build linux

package pod

import (
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/example/memcached-operator/test/testutil"
)

// slack is what a loaded machine may add to a wait: a signal sent, a
// process started, an exit seen. The lower bounds are exact.
const slack = 1500 * time.Millisecond

// within checks that got is in [from, from+extra+slack).
func within(t *testing.T, what string, got, from, extra time.Duration) {
	t.Helper()
	if got < from || got >= from+extra+slack {
		t.Errorf("%s at %v, want from %v to %v", what, got.Round(time.Millisecond), from, from+extra+slack)
	}
}

// restOfGrace is how long a container gets between SIGTERM and SIGKILL,
// as kubelet counts it: the grace period less the seconds the preStop ran,
// truncated (a preStop of 1.6 s takes 1 s off), and at least 2 s.
func restOfGrace(grace int64, preStop time.Duration) time.Duration {
	return max(time.Duration(grace)*time.Second-preStop.Truncate(time.Second), minimumGraceSeconds*time.Second)
}

func execHandler(script string) *corev1.Lifecycle {
	return &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", script}}}}
}

func sleepHandler(seconds int64) *corev1.Lifecycle {
	return &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: seconds}}}
}

// deaf is a container whose main process ignores SIGTERM, once it has
// said ready.
func deaf(name string) corev1.Container {
	return corev1.Container{Name: name, Image: "memcached:1.6.45", Command: []string{"sh", "-c", `trap "" TERM; echo ready; while true; do sleep 0.1; done`}}
}

// waitReady waits for the Pod's containers to serve: memcached to answer
// on its port, a deaf container to say it is ready.
func waitReady(t *testing.T, p *Pod, containers []corev1.Container) {
	t.Helper()
	for _, c := range containers {
		if c.Command == nil {
			waitVersion(t, p.Addr(11211))
			continue
		}
		if !testutil.Poll(10*time.Second, func() bool { return strings.Contains(p.Container(c.Name).Output(), "ready") }) {
			t.Fatalf("container %s is not ready: %q", c.Name, p.Container(c.Name).Output())
		}
	}
}

func withLifecycle(c corev1.Container, l *corev1.Lifecycle) corev1.Container {
	c.Lifecycle = l
	return c
}

// TestTerminate ends Pods as kubelet does, with short grace periods, and
// checks when each step happened: the preStop ran for as long as it takes
// or until the grace period ended; SIGTERM came after it; SIGKILL came
// only to a container that outlived the rest of its grace, which is at
// least 2 s.
func TestTerminate(t *testing.T) {
	s := time.Second
	tests := []struct {
		name       string
		grace      int64
		containers []corev1.Container
		// want, for the first container
		preStop  time.Duration // how long it runs at the least; 0 for none
		timedOut bool          // cut at the end of the grace period
		signaled time.Duration // SIGTERM, at the earliest
		killed   bool          // SIGKILL: the container ignores SIGTERM
	}{
		{name: "no preStop", grace: 5, containers: []corev1.Container{memcachedContainer("memcached", 11211)},
			signaled: 0},
		{name: "exec preStop", grace: 5,
			containers: []corev1.Container{withLifecycle(memcachedContainer("memcached", 11211), execHandler("sleep 1"))},
			preStop:    1 * s, signaled: 1 * s},
		{name: "exec preStop past the grace period", grace: 2,
			containers: []corev1.Container{withLifecycle(memcachedContainer("memcached", 11211), execHandler("sleep 30"))},
			preStop:    2 * s, timedOut: true, signaled: 2 * s},
		{name: "sleep preStop", grace: 5,
			containers: []corev1.Container{withLifecycle(memcachedContainer("memcached", 11211), sleepHandler(1))},
			preStop:    1 * s, signaled: 1 * s},
		{name: "sleep preStop past the grace period", grace: 2,
			containers: []corev1.Container{withLifecycle(memcachedContainer("memcached", 11211), sleepHandler(30))},
			preStop:    2 * s, timedOut: true, signaled: 2 * s},
		{name: "SIGTERM ignored: SIGKILL at the end of the grace period", grace: 4,
			containers: []corev1.Container{withLifecycle(deaf("deaf"), execHandler("sleep 1"))},
			preStop:    1 * s, signaled: 1 * s, killed: true},
		{name: "SIGTERM ignored after a preStop that used the grace period: 2 s more", grace: 2,
			containers: []corev1.Container{withLifecycle(deaf("deaf"), sleepHandler(30))},
			preStop:    2 * s, timedOut: true, signaled: 2 * s, killed: true},
		{name: "zero grace: no preStop, 2 s", grace: 0,
			containers: []corev1.Container{withLifecycle(deaf("deaf"), sleepHandler(30))},
			signaled:   0, killed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := Run(t, testPod(tt.grace, tt.containers...), Options{})
			name := tt.containers[0].Name
			waitReady(t, p, tt.containers)
			got := p.Terminate()
			t.Logf("%s", got)
			c := got.Container(name)
			if c.Name != name {
				t.Fatalf("no termination of %s: %s", name, got)
			}
			if c.PreStopRan != (tt.preStop > 0) {
				t.Errorf("the preStop ran = %v, want %v", c.PreStopRan, tt.preStop > 0)
			}
			if tt.preStop > 0 && c.PreStop < tt.preStop {
				t.Errorf("the preStop ended at %v, want from %v", c.PreStop, tt.preStop)
			}
			if tt.timedOut {
				// Cut by the harness's own timer.
				within(t, "the preStop was cut", c.PreStop, tt.preStop, 0)
			}
			if c.PreStopTimedOut != tt.timedOut {
				t.Errorf("the preStop timed out = %v, want %v", c.PreStopTimedOut, tt.timedOut)
			}
			if c.Signal != syscall.SIGTERM {
				t.Errorf("first signal %v, want SIGTERM", c.Signal)
			}
			// SIGTERM comes when the preStop has ended (at once without
			// one), however long a loaded machine made it run.
			if c.Signaled < tt.signaled || c.Signaled >= c.PreStop+slack {
				t.Errorf("SIGTERM at %v, want from %v and within %v of the preStop's end (%v)", c.Signaled, tt.signaled, slack, c.PreStop)
			}
			rest := restOfGrace(tt.grace, c.PreStop)
			switch {
			case c.Killed:
				within(t, "SIGKILL, counted from SIGTERM,", c.Exited-c.Signaled, rest, 0)
				if !tt.killed {
					// memcached exits on SIGTERM at its next clock tick,
					// a second; a loaded machine can make it outlive the
					// 2 s a preStop that used the grace period leaves,
					// and kubelet kills it then, as the harness did.
					t.Logf("%s outlived the %v after SIGTERM and was killed, as kubelet kills it", name, rest)
				}
			case tt.killed:
				t.Errorf("%s ended at %v (%v), want SIGKILL %v after SIGTERM", name, c.Exited, c.Err, rest)
			case c.Err != nil:
				// memcached ends on SIGTERM with status 0.
				t.Errorf("%s ended with %v, want exit 0 on SIGTERM", name, c.Err)
			}
			// Whatever the machine's default route leads to may answer
			// at the address now; memcached does not.
			if got, _ := version(p.Addr(11211)); got == "VERSION 1.6.45" {
				t.Errorf("memcached still answers at %s after Terminate", p.Addr(11211))
			}
		})
	}
}

// TestTerminatePreStopIsTheContainers runs an exec preStop as the
// container's user, with its image's PATH and its environment, and
// reports its output.
func TestTerminatePreStopIsTheContainers(t *testing.T) {
	c := withLifecycle(memcachedContainer("memcached", 11211), execHandler(`id -u; command -v memcached; echo "$GREETING"; exit 3`))
	c.Env = []corev1.EnvVar{{Name: "GREETING", Value: "bye"}}
	p := Run(t, testPod(5, c), Options{})
	got := p.Terminate().Container("memcached")
	want := []string{"11211", p.pathOf(c) + "/memcached", "bye"}
	if lines := strings.Fields(got.PreStopOutput); strings.Join(lines, " ") != strings.Join(want, " ") {
		t.Errorf("the preStop wrote %q, want %q", got.PreStopOutput, want)
	}
	if got.PreStopExitCode != 3 {
		t.Errorf("the preStop's exit code: %d, want 3", got.PreStopExitCode)
	}
}

// TestTerminateSidecarLast runs a Pod with a native sidecar (an init
// container that always restarts): it runs its preStop with the others,
// and gets SIGTERM only once the main container has exited.
func TestTerminateSidecarLast(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	sidecar := withLifecycle(memcachedContainer("sidecar", 11212), sleepHandler(1))
	sidecar.RestartPolicy = &always
	tmpl := testPod(10, withLifecycle(memcachedContainer("main", 11211), sleepHandler(2)))
	tmpl.Spec.InitContainers = []corev1.Container{sidecar}
	p := Run(t, tmpl, Options{})
	waitVersion(t, p.Addr(11211))
	waitVersion(t, p.Addr(11212))
	got := p.Terminate()
	t.Logf("%s", got)
	main, side := got.Container("main"), got.Container("sidecar")
	within(t, "the sidecar's preStop ended", side.PreStop, 1*time.Second, 0)
	within(t, "the main container's SIGTERM", main.Signaled, 2*time.Second, 0)
	if side.Signaled < main.Exited {
		t.Errorf("the sidecar got SIGTERM at %v, before the main container exited at %v", side.Signaled, main.Exited)
	}
	if main.Killed || side.Killed {
		t.Errorf("killed: main %v, sidecar %v; want both ended on SIGTERM", main.Killed, side.Killed)
	}
}

// TestKill kills a Pod: no preStop, SIGKILL to every container at once.
func TestKill(t *testing.T) {
	tmpl := testPod(30, withLifecycle(memcachedContainer("memcached", 11211), sleepHandler(10)), withLifecycle(deaf("deaf"), sleepHandler(10)))
	p := Run(t, tmpl, Options{})
	waitReady(t, p, tmpl.Spec.Containers)
	got := p.Kill()
	t.Logf("%s", got)
	if len(got.Containers) != 2 {
		t.Fatalf("%d containers ended, want 2", len(got.Containers))
	}
	for _, c := range got.Containers {
		if c.PreStopRan || !c.Killed || c.Signal != syscall.SIGKILL || c.Exited >= slack {
			t.Errorf("%s: preStop ran %v, killed %v by %v at %v; want no preStop, SIGKILL at once", c.Name, c.PreStopRan, c.Killed, c.Signal, c.Exited)
		}
		if c.Err == nil || c.Err.Error() != "signal: killed" {
			t.Errorf("%s ended with %v, want signal: killed", c.Name, c.Err)
		}
	}
	testutil.Benchmark("BenchmarkKill", "%.1f ms", float64(got.Took.Microseconds())/1000)
}
