//go:build linux

package pod

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// Kubelet's numbers (pkg/kubelet/kuberuntime, v1.30).
const (
	// defaultGraceSeconds is the API's default
	// terminationGracePeriodSeconds.
	defaultGraceSeconds = 30
	// minimumGraceSeconds is what a container always gets between SIGTERM
	// and SIGKILL, whatever its preStop took (minimumGracePeriodInSeconds).
	minimumGraceSeconds = 2
)

// Termination is how a Pod's containers ended.
type Termination struct {
	// Grace is the Pod's terminationGracePeriodSeconds (0 for Kill).
	Grace time.Duration
	// Start is when the termination started, for a test to place the
	// durations below among its own events.
	Start time.Time
	// Took is from the start of termination until the last container
	// had exited.
	Took time.Duration
	// Containers are the containers that were running, in the template's
	// order (init containers first).
	Containers []ContainerTermination
}

// ContainerTermination is how one container ended. Durations are counted
// from the start of the Pod's termination.
type ContainerTermination struct {
	Name string
	// PreStopRan tells that the container has a preStop handler and that
	// it ran.
	PreStopRan bool
	// PreStop is how long the handler ran: until it returned, or until
	// the grace period ended and it was killed (PreStopTimedOut).
	PreStop         time.Duration
	PreStopTimedOut bool
	// PreStopExitCode and PreStopOutput are an exec handler's; the code
	// is -1 when it was killed.
	PreStopExitCode int
	PreStopOutput   string
	// Signal is the first signal the container's process got: SIGTERM
	// (Terminate) or SIGKILL (Kill); Signaled is when.
	Signal   syscall.Signal
	Signaled time.Duration
	// Exited is when the container's process had ended.
	Exited time.Duration
	// Killed tells that it got SIGKILL: it outlived its grace, or the Pod
	// was killed.
	Killed bool
	// Err is how the process ended, as os/exec says it (nil for exit 0).
	Err error
}

// Container returns a container's termination, or one with an empty
// Name if it was not running.
func (t Termination) Container(name string) ContainerTermination {
	for _, c := range t.Containers {
		if c.Name == name {
			return c
		}
	}
	return ContainerTermination{}
}

// String is one line per container, for a log.
func (t Termination) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "grace %v, took %v", t.Grace, t.Took.Round(time.Millisecond))
	for _, c := range t.Containers {
		fmt.Fprintf(&b, "\n  %s:", c.Name)
		if c.PreStopRan {
			fmt.Fprintf(&b, " preStop %v (exit %d", c.PreStop.Round(time.Millisecond), c.PreStopExitCode)
			if c.PreStopTimedOut {
				b.WriteString(", timed out")
			}
			b.WriteString("),")
		}
		fmt.Fprintf(&b, " %s at %v, exited at %v (%v)", unix.SignalName(c.Signal), c.Signaled.Round(time.Millisecond), c.Exited.Round(time.Millisecond), errString(c.Err))
		if c.Killed {
			b.WriteString(", killed")
		}
	}
	return b.String()
}

func errString(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}

// running is a running container with its spec.
type running struct {
	ctr     *Container
	spec    corev1.Container
	sidecar bool
}

// running lists the running containers in the template's order.
func (p *Pod) running() []running {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []running
	for _, c := range append(append([]corev1.Container{}, p.spec.InitContainers...), p.spec.Containers...) {
		ctr := p.containers[c.Name]
		if ctr == nil {
			continue
		}
		if done, _ := ctr.Exited(); done {
			continue
		}
		out = append(out, running{ctr: ctr, spec: c, sidecar: c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways})
	}
	return out
}

// Terminate ends the Pod as kubelet does when the Pod is deleted: for
// every running container at once, its preStop handler (exec: the command
// in the container's namespaces, as its user, with its image's PATH, as
// Exec runs it; sleep: a sleep), for at most the Pod's
// terminationGracePeriodSeconds counted from the start of termination
// (the handler is killed then); then SIGTERM to the container's main
// process, and SIGKILL to all of its processes if it has not exited when
// the rest of the grace period has passed (the seconds the preStop took
// are taken off, truncated as kubelet truncates them, and the container
// gets at least 2 s whatever the preStop took, as kubelet gives it).
// Native sidecars (init containers that always restart) run their preStop
// at once too, but get SIGTERM only after every other container has
// exited, the later ones first. Then the sandbox and the Pod's network go.
//
// One difference: kubelet does not kill a preStop past the grace period;
// it stops waiting for it, and the handler dies with its container, at
// most the 2 s later. Here it is killed at the end of the grace period.
//
// Terminate returns when every container has exited; the Pod can then
// serve nothing more.
func (p *Pod) Terminate() Termination {
	p.t.Helper()
	grace := int64(defaultGraceSeconds)
	if g := p.spec.TerminationGracePeriodSeconds; g != nil {
		grace = *g
	}
	containers := p.running()
	for _, r := range containers {
		if l := r.spec.Lifecycle; l != nil && l.PreStop != nil && l.PreStop.Exec == nil && l.PreStop.Sleep == nil {
			p.t.Fatalf("pod: container %s: a preStop handler of a kind this harness does not run: %+v", r.spec.Name, l.PreStop)
		}
	}
	order := newOrdering(p.spec, containers)
	start := time.Now()
	out := Termination{Grace: time.Duration(grace) * time.Second, Start: start, Containers: make([]ContainerTermination, len(containers))}
	var wg sync.WaitGroup
	for i, r := range containers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out.Containers[i] = p.stopContainer(r, grace, start, order)
		}()
	}
	wg.Wait()
	out.Took = time.Since(start)
	p.end()
	return out
}

// stopContainer is kubelet's killContainer for one container.
func (p *Pod) stopContainer(r running, grace int64, start time.Time, order *ordering) ContainerTermination {
	res := ContainerTermination{Name: r.spec.Name}
	if l := r.spec.Lifecycle; l != nil && l.PreStop != nil && grace > 0 {
		p.preStop(r.spec, l.PreStop, time.Duration(grace)*time.Second, &res)
		grace -= int64(res.PreStop.Seconds())
	}
	if grace > 0 {
		grace -= int64(order.waitForTurn(r.spec.Name, time.Duration(grace)*time.Second).Seconds())
	}
	grace = max(grace, minimumGraceSeconds)
	res.Signal, res.Signaled = syscall.SIGTERM, time.Since(start)
	r.ctr.proc.signalChild(syscall.SIGTERM)
	select {
	case <-r.ctr.proc.done:
	case <-time.After(time.Duration(grace) * time.Second):
		res.Killed = true
		r.ctr.kill()
	}
	res.Exited = time.Since(start)
	res.Err = r.ctr.proc.err
	order.terminated(r.spec.Name)
	return res
}

// preStop runs a preStop handler for at most limit.
func (p *Pod) preStop(c corev1.Container, h *corev1.LifecycleHandler, limit time.Duration, res *ContainerTermination) {
	res.PreStopRan = true
	begin := time.Now()
	defer func() { res.PreStop = time.Since(begin) }()
	switch {
	case h.Exec != nil:
		code, out, err := p.run(c, h.Exec.Command, limit)
		res.PreStopExitCode, res.PreStopOutput = code, out
		if err != nil {
			// kubelet records a failed hook and goes on.
			res.PreStopExitCode, res.PreStopOutput = -1, err.Error()
		}
		res.PreStopTimedOut = code == -1 && err == nil
	case h.Sleep != nil:
		d := time.Duration(h.Sleep.Seconds) * time.Second
		if d > limit {
			d, res.PreStopTimedOut = limit, true
		}
		time.Sleep(d)
	}
}

// ordering holds native sidecars until the containers they serve have
// exited, as kubelet's terminationOrdering does: a sidecar waits for every
// regular container and for the sidecars declared after it.
type ordering struct {
	exited  map[string]chan struct{}
	prereqs map[string][]chan struct{}
}

func newOrdering(spec corev1.PodSpec, containers []running) *ordering {
	o := &ordering{exited: map[string]chan struct{}{}, prereqs: map[string][]chan struct{}{}}
	isRunning := func(name string) bool {
		return slices.ContainsFunc(containers, func(r running) bool { return r.spec.Name == name })
	}
	channel := func(name string) chan struct{} {
		ch := make(chan struct{})
		if !isRunning(name) {
			close(ch)
		}
		o.exited[name] = ch
		return ch
	}
	var regular []chan struct{}
	for _, c := range spec.Containers {
		regular = append(regular, channel(c.Name))
	}
	var later chan struct{}
	for _, c := range slices.Backward(spec.InitContainers) {
		ch := channel(c.Name)
		if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			continue
		}
		o.prereqs[c.Name] = slices.Clone(regular)
		if later != nil {
			o.prereqs[c.Name] = append(o.prereqs[c.Name], later)
		}
		later = ch
	}
	return o
}

// waitForTurn waits, up to limit, for what must exit before the container
// gets SIGTERM, and returns how long it waited.
func (o *ordering) waitForTurn(name string, limit time.Duration) time.Duration {
	begin := time.Now()
	timeout := time.After(limit)
	for _, ch := range o.prereqs[name] {
		select {
		case <-ch:
		case <-timeout:
			return time.Since(begin)
		}
	}
	return time.Since(begin)
}

func (o *ordering) terminated(name string) { close(o.exited[name]) }

// Kill ends the Pod without grace, as a Pod is lost with its node or
// force-deleted: SIGKILL to every process of every container now, no
// preStop; then the sandbox and the Pod's network go.
func (p *Pod) Kill() Termination {
	p.t.Helper()
	containers := p.running()
	start := time.Now()
	out := Termination{Start: start, Containers: make([]ContainerTermination, len(containers))}
	for _, r := range containers {
		r.ctr.proc.killMembers()
	}
	for i, r := range containers {
		r.ctr.kill()
		out.Containers[i] = ContainerTermination{Name: r.spec.Name, Signal: syscall.SIGKILL, Killed: true, Exited: time.Since(start), Err: r.ctr.proc.err}
	}
	out.Took = time.Since(start)
	p.end()
	return out
}
