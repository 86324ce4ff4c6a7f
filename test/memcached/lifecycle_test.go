//go:build linux

package memcached_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/test/pod"
	"github.com/example/memcached-operator/test/testutil"
)

// dialAddr connects from the test process to memcached at addr, a Pod's
// IP and port, as a client in the cluster would, waiting for it to listen.
func dialAddr(t *testing.T, addr string) *client {
	t.Helper()
	var conn net.Conn
	if !testutil.Poll(20*time.Second, func() bool {
		var err error
		conn, err = net.DialTimeout("tcp", addr, 2*time.Second)
		return err == nil
	}) {
		t.Fatalf("nothing listens at %s", addr)
	}
	t.Cleanup(func() { conn.Close() })
	return &client{conn: conn, r: bufio.NewReader(conn)}
}

// set stores an item; it fails the test unless memcached says STORED.
func (c *client) set(t *testing.T, key, value string) {
	t.Helper()
	c.conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c.conn, "set %s 0 0 %d\r\n%s\r\n", key, len(value), value)
	if line, err := c.r.ReadString('\n'); line != "STORED\r\n" {
		t.Fatalf("set %s: %q, %v", key, line, err)
	}
}

// get reads an item: its value, or false for a miss. An answer that is
// not memcached's (the connection closed, something else at the address)
// is an error.
func (c *client) get(key string) (string, bool, error) {
	c.conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c.conn, "get %s\r\n", key); err != nil {
		return "", false, err
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		return "", false, err
	}
	if line == "END\r\n" {
		return "", false, nil
	}
	var size int
	if _, err := fmt.Sscanf(line, "VALUE "+key+" %d %d\r\n", new(int), &size); err != nil {
		return "", false, fmt.Errorf("get %s: %q", key, line)
	}
	data := make([]byte, size+2)
	if _, err := io.ReadFull(c.r, data); err != nil {
		return "", false, err
	}
	if end, err := c.r.ReadString('\n'); end != "END\r\n" {
		return "", false, fmt.Errorf("get %s: %q, %v", key, end, err)
	}
	return string(data[:size]), true, nil
}

// mustGet is get that fails the test on an error.
func (c *client) mustGet(t *testing.T, key string) (string, bool) {
	t.Helper()
	v, ok, err := c.get(key)
	if err != nil {
		t.Fatal(err)
	}
	return v, ok
}

// TestPodsAtTheirIPs runs two Pods of the hook's template for the
// operator-sdk tutorial's Memcached, as a Deployment's replicas, and talks
// to both from the test process at their own addresses at once, as a
// client in the cluster does: an item set on one is not on the other.
func TestPodsAtTheirIPs(t *testing.T) {
	tmpl := template(t, answer(t, exampleObject(t, "memcached-sample.yaml")))
	a, b := pod.Run(t, tmpl, pod.Options{}), pod.Run(t, tmpl, pod.Options{})
	if a.IP() == b.IP() {
		t.Fatalf("both Pods are at %s", a.IP())
	}
	t.Logf("Pods at %s and %s", a.Addr(memcached.Port), b.Addr(memcached.Port))
	ca, cb := dialAddr(t, a.Addr(memcached.Port)), dialAddr(t, b.Addr(memcached.Port))
	ca.set(t, "greeting", "from a")
	cb.set(t, "other", "from b")
	for _, tt := range []struct {
		name, key string
		c         *client
		want      string // "" for a miss
	}{
		{"a's item on a", "greeting", ca, "from a"},
		{"a's item on b", "greeting", cb, ""},
		{"b's item on b", "other", cb, "from b"},
		{"b's item on a", "other", ca, ""},
	} {
		if got, _ := tt.c.mustGet(t, tt.key); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestTermination deletes Pods of the hook's templates the way kubelet
// ends them, and checks the preStop the hook wrote: memcached serves
// through it, gets SIGTERM when it ends and exits; the plain preStop
// sleeps; with keepWarm it waits for the hand-off's done item in its own
// memcached (set here from the test process, at the Pod's IP, as the
// agent would) and ends soon after it is set, or at handoffSeconds
// without it. The timings are printed as benchmark lines.
func TestTermination(t *testing.T) {
	plain := template(t, answer(t, withSpec("term-plain", `{}`)))
	// The plain preStop is the sleep that keepWarm's starts with.
	sleep := time.Duration(plain.Spec.Containers[0].Lifecycle.PreStop.Sleep.Seconds) * time.Second
	const handoff = 10 * time.Second
	keepWarm := fmt.Sprintf(`{"rollout":{"keepWarm":true,"handoffSeconds":%d}}`, int(handoff.Seconds()))
	tests := []struct {
		name string
		spec string
		// doneAt is when the test sets the done item, 0 for never.
		doneAt time.Duration
		// The preStop's end, counted from its start, must be in
		// [from, to); with doneAt, in [0, to) counted from the moment
		// the item was set, which a loaded machine makes later than
		// doneAt. The keepWarm preStop counts handoffSeconds with
		// date +%s, in whole seconds, from its first reading after the
		// sleep: it ends on the first poll at or after the second that
		// reading plus handoffSeconds names, which is more than
		// handoffSeconds less a second after it, and less than
		// handoffSeconds and a poll period.
		from, to time.Duration
	}{
		{name: "plain", spec: `{}`, from: sleep, to: sleep + terminateSlack},
		{name: "keepWarm, done", spec: keepWarm, doneAt: sleep + 3*time.Second, to: handoffPollPeriod + handoffPollSlack},
		{name: "keepWarm, never done", spec: keepWarm, from: sleep + handoff - time.Second, to: sleep + handoff + handoffPollPeriod + handoffPollSlack},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tmpl := template(t, answer(t, withSpec(fmt.Sprintf("term-%d", i), tt.spec)))
			p := pod.Run(t, tmpl, pod.Options{})
			c := dialAddr(t, p.Addr(memcached.Port))
			c.set(t, "item", "kept")

			ended := make(chan pod.Termination, 1)
			begin := time.Now()
			go func() { ended <- p.Terminate() }()
			time.Sleep(sleep / 2)
			if got, _ := c.mustGet(t, "item"); got != "kept" {
				t.Errorf("during the preStop's sleep: item = %q, want it served", got)
			}
			var setFrom, setTo time.Time // the done item's set, sent and answered
			if tt.doneAt > 0 {
				time.Sleep(time.Until(begin.Add(tt.doneAt)))
				if got, _ := c.mustGet(t, "item"); got != "kept" {
					t.Errorf("while the preStop waits for the hand-off: item = %q, want it served", got)
				}
				setFrom = time.Now()
				c.set(t, contract.DoneKey, "1")
				setTo = time.Now()
			}
			term := <-ended
			t.Logf("%s", term)
			m := term.Container("memcached")
			if !m.PreStopRan || m.PreStopTimedOut || m.PreStopExitCode != 0 {
				t.Errorf("preStop ran %v, timed out %v, exit %d (%s); want it run to its end", m.PreStopRan, m.PreStopTimedOut, m.PreStopExitCode, m.PreStopOutput)
			}
			if tt.doneAt > 0 {
				// The preStop started at or after term.Start and ended
				// before SIGTERM: at the latest, term.Start+Signaled; at
				// the earliest, term.Start+PreStop. Each bound is held
				// to the side that cannot fail for that uncertainty.
				latest, earliest := term.Start.Add(m.Signaled), term.Start.Add(m.PreStop)
				if latest.Before(setFrom) || m.PreStop < sleep {
					t.Errorf("the preStop ended at %v, %v before the done item was set: want it to wait past its %v sleep for the item", m.PreStop.Round(time.Millisecond), setFrom.Sub(latest).Round(time.Millisecond), sleep)
				}
				if got := earliest.Sub(setTo); got >= tt.to {
					t.Errorf("the preStop ended %v after the done item was set, want within %v", got.Round(time.Millisecond), tt.to)
				}
			} else if m.PreStop < tt.from || m.PreStop >= tt.to {
				t.Errorf("the preStop ended at %v, want from %v to %v", m.PreStop.Round(time.Millisecond), tt.from, tt.to)
			}
			if m.Signal != syscall.SIGTERM || m.Signaled-m.PreStop > terminateSlack {
				t.Errorf("%v at %v, want SIGTERM when the preStop ended (%v)", m.Signal, m.Signaled, m.PreStop)
			}
			// memcached exits at its next clock tick, a second after
			// SIGTERM on an idle machine; a loaded one adds to that, and
			// the grace period is what it has (handoffStopSeconds for
			// keepWarm): exit 0, not killed, within it.
			if m.Killed || m.Err != nil {
				t.Errorf("memcached ended at %v with %v (killed %v), want exit 0 on SIGTERM", m.Exited, m.Err, m.Killed)
			}
			if grace := term.Grace; m.Exited >= grace {
				t.Errorf("memcached ended at %v, past the grace period %v", m.Exited, grace)
			}
			name := strings.ReplaceAll(tt.name, " ", "-")
			testutil.Benchmark(fmt.Sprintf("BenchmarkTermination/%s/preStop", name), "%.2f s", m.PreStop.Seconds())
			testutil.Benchmark(fmt.Sprintf("BenchmarkTermination/%s/exited", name), "%.2f s", m.Exited.Seconds())
		})
	}
}

// Slack for the timings above. The keepWarm preStop asks memcached once
// a poll period (a sleep 1 between two asks); each ask is a date, an nc
// and a fork or two, which a loaded machine slows, and so is the exec
// that starts the preStop.
const (
	terminateSlack    = 1500 * time.Millisecond
	handoffPollPeriod = time.Second
	handoffPollSlack  = 2 * time.Second
)

// TestKill loses a Pod without grace, one with keepWarm: no preStop runs,
// memcached is gone at once with its items, and the other Pod goes on
// serving its own.
func TestKill(t *testing.T) {
	lost := pod.Run(t, template(t, answer(t, withSpec("kill-lost", `{"rollout":{"keepWarm":true}}`))), pod.Options{})
	other := pod.Run(t, template(t, answer(t, exampleObject(t, "memcached-minimal.yaml"))), pod.Options{})
	cl, co := dialAddr(t, lost.Addr(memcached.Port)), dialAddr(t, other.Addr(memcached.Port))
	cl.set(t, "item", "on the lost Pod")
	co.set(t, "item", "on the other Pod")

	term := lost.Kill()
	t.Logf("%s", term)
	m := term.Container("memcached")
	if m.PreStopRan || !m.Killed || m.Signal != syscall.SIGKILL || m.Err == nil || m.Err.Error() != "signal: killed" {
		t.Errorf("memcached: preStop ran %v, killed %v by %v, ended with %v; want no preStop and SIGKILL", m.PreStopRan, m.Killed, m.Signal, m.Err)
	}
	if m.Exited > terminateSlack {
		t.Errorf("memcached ended %v after the kill, want at once", m.Exited)
	}
	testutil.Benchmark("BenchmarkKill/memcached-exited", "%.1f ms", float64(m.Exited.Microseconds())/1000)

	// The lost Pod's connection ends, and its address no longer leads
	// to memcached (whatever the machine's default route leads to may
	// answer there).
	if v, ok, err := cl.get("item"); err == nil || ok {
		t.Errorf("the lost Pod's connection still answers: %q %v %v", v, ok, err)
	}
	if conn, err := net.DialTimeout("tcp", lost.Addr(memcached.Port), 2*time.Second); err == nil {
		c := &client{conn: conn, r: bufio.NewReader(conn)}
		if v, ok, err := c.get("item"); err == nil {
			t.Errorf("memcached answers at the lost Pod's address: %q %v", v, ok)
		}
		conn.Close()
	}
	if got, _ := co.mustGet(t, "item"); got != "on the other Pod" {
		t.Errorf("the other Pod's item: %q, want it served", got)
	}
}
