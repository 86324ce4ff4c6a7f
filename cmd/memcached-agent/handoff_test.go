package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/example/memcached-operator/cmd/memcached-agent/internal/handoff"
	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/test/memcachedtest"
	"github.com/example/memcached-operator/test/testutil"
)

// asAgent makes the test binary the agent itself when the tests start it
// as a process of its own (to kill it as a Pod dies).
const asAgent = "MEMCACHED_AGENT_TEST_AS_AGENT"

func TestMain(m *testing.M) {
	if os.Getenv(asAgent) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// This package's memcacheds listen on memcached's port of loopback
// addresses of its block (testutil.Loopback; the hand-offs name
// addresses, and memcached's port), each lent to a test until it ends.
var block = testutil.Loopback("cmd/memcached-agent")

func nextIP(t *testing.T) string {
	t.Helper()
	return block.Lend(t)
}

// startMemcached runs memcached 1.6.45 on ip:11211, or skips naming what
// is missing (fails under CI).
func startMemcached(t *testing.T, ip string, memoryMB int) string {
	t.Helper()
	return memcachedtest.Start(t, memcachedtest.Config{IP: ip, Port: 11211, Args: []string{"-t", "2", "-m", strconv.Itoa(memoryMB)}}).Addr()
}

// fill writes count items of size bytes to addr, key prefix-i, pipelined.
func fill(t *testing.T, addr, prefix string, count, size int) {
	t.Helper()
	value := bytes.Repeat([]byte("v"), size)
	c := memcachedtest.Dial(t, addr)
	defer c.Close()
	c.Fill(prefix, count, func(string, int) []byte { return value }, 0)
}

// items is the number of items the memcached at addr holds.
func items(t *testing.T, addr string) int64 {
	t.Helper()
	c := memcachedtest.Dial(t, addr)
	defer c.Close()
	return c.Stat("curr_items")
}

// statusJSON is Memcached cache in namespace shop with this slot table and
// these hand-offs, as kubectl prints it.
func statusJSON(t *testing.T, version int64, table []v1alpha1.Slot, handoffs []v1alpha1.Handoff) []byte {
	t.Helper()
	m := v1alpha1.Memcached{}
	m.APIVersion, m.Kind = "cache.example.com/v1alpha1", "Memcached"
	m.Name, m.Namespace = "cache", "shop"
	size := int32(len(table))
	m.Spec.Size = &size
	m.Status.SlotTable = v1alpha1.SlotTable{Version: version, Slots: table}
	m.Status.Handoffs = handoffs
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// process is the agent as a process of its own.
type process struct {
	name   string
	cmd    *exec.Cmd
	out    *testutil.LockedBuffer
	report string
	exited chan struct{}
}

// startProcess runs the agent (this test binary, as the agent) on a
// status file, writing its reports into a file of its own.
func startProcess(t *testing.T, name, statusFile string, args ...string) *process {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &process{name: name, out: &testutil.LockedBuffer{}, report: filepath.Join(t.TempDir(), "reports.json"), exited: make(chan struct{})}
	p.cmd = exec.Command(exe, append([]string{"--memcached=cache", "--from-file=" + statusFile, "--listen=", "--admin-listen=127.0.0.1:0",
		"--file-poll-interval=20ms", "--report-file=" + p.report, "--log-format=text", "--log-level=debug", "--shutdown-delay=0s"}, args...)...)
	p.cmd.Env = append(os.Environ(), asAgent+"=1", "POD_NAME="+name)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = sysProcAttr()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("%s wrote:\n%s", name, p.out.String())
		}
	})
	return p
}

// progress is the process's last report on pod, if any.
func (p *process) progress(t *testing.T, pod string) (v1alpha1.HandoffProgress, bool) {
	t.Helper()
	b, err := os.ReadFile(p.report)
	if os.IsNotExist(err) {
		return v1alpha1.HandoffProgress{}, false
	}
	var data map[string]string
	if err != nil || json.Unmarshal(b, &data) != nil {
		t.Fatalf("%s's report file: %v\n%s", p.name, err, b)
	}
	raw, ok := data[pod]
	if !ok {
		return v1alpha1.HandoffProgress{}, false
	}
	var pr v1alpha1.HandoffProgress
	if err := json.Unmarshal([]byte(raw), &pr); err != nil {
		t.Fatalf("%s's report on %s: %q: %v", p.name, pod, raw, err)
	}
	return pr, true
}

// TestAgentHandsOff runs the whole agent on a status file: while the
// leaving Pod's hand-off is Waiting nothing is copied; rewritten to
// Replaced, the report goes Copying then Done, every item arrives and the
// done marker appears on the source; SIGTERM stops the agent cleanly.
func TestAgentHandsOff(t *testing.T) {
	srcIP, dstIP, otherIP := nextIP(t), nextIP(t), nextIP(t)
	src, dst := startMemcached(t, srcIP, 512), startMemcached(t, dstIP, 512)
	const count, size = 2000, 100 << 10
	fill(t, src, "item", count, size)
	path := filepath.Join(t.TempDir(), "cache.json")
	leaving := []v1alpha1.Slot{
		{Slot: 0, Pod: "cache-old", IP: srcIP, State: v1alpha1.SlotLeaving},
		{Slot: 1, Pod: "cache-other", IP: otherIP, State: v1alpha1.SlotServing},
	}
	testutil.WriteFileAtomic(t, path, statusJSON(t, 1767225600, leaving, []v1alpha1.Handoff{
		{Pod: "cache-old", IP: srcIP, Reason: v1alpha1.HandoffWaiting, Slot: ptr(int32(0))},
	}))
	p := startProcess(t, "agent-a", path)
	// The agent serves the status's list before it hands the status's
	// hand-offs to its runner, in the same read: once it serves this one,
	// the runner has the Waiting hand-off before the next status. That it
	// started no copy of it, the log tells once the agent has exited.
	p.waitLog(t, `msg="serving a new server list"`, "version=1767225600")

	replaced := []v1alpha1.Slot{
		{Slot: 0, Pod: "cache-new", IP: dstIP, State: v1alpha1.SlotServing},
		{Slot: 1, Pod: "cache-other", IP: otherIP, State: v1alpha1.SlotServing},
	}
	testutil.WriteFileAtomic(t, path, statusJSON(t, 1767225601, replaced, []v1alpha1.Handoff{
		{Pod: "cache-old", IP: srcIP, Reason: v1alpha1.HandoffReplaced, Slot: ptr(int32(0)), To: "cache-new", ToIP: dstIP},
	}))
	var states []v1alpha1.HandoffState
	var last v1alpha1.HandoffProgress
	testutil.EventuallyEvery(t, 60*time.Second, 5*time.Millisecond, func() error {
		if pr, ok := p.progress(t, "cache-old"); ok {
			if len(states) == 0 || states[len(states)-1] != pr.State {
				states = append(states, pr.State)
			}
			last = pr
		}
		if last.State != "Done" && last.State != "Failed" {
			return fmt.Errorf("no end reported: states %q", states)
		}
		return nil
	})
	if want := []v1alpha1.HandoffState{"Copying", "Done"}; !slices.Equal(states, want) {
		t.Errorf("states %q, want %q", states, want)
	}
	if last.Items != count || last.Bytes != count*size || last.Skipped != 0 {
		t.Errorf("final report %+v, want %d items, %d bytes", last, count, count*size)
	}
	if n := items(t, dst); n != count {
		t.Errorf("the destination holds %d items, want %d", n, count)
	}
	// The marker follows the Done report once clients had
	// --handoff-settle to move (the status serves the slot from cache-new).
	testutil.Eventually(t, 10*time.Second, func() error {
		if !memcachedtest.Dial(t, src).Has(contract.DoneKey) {
			return errors.New("no done marker on the source")
		}
		return nil
	})

	m := regexp.MustCompile(`admin_address=(\S+)`).FindStringSubmatch(p.out.String())
	if m == nil {
		t.Fatalf("no admin address in the log:\n%s", p.out.String())
	}
	_, metricsText := httpGet(t, "http://"+m[1]+"/metrics")
	for _, line := range []string{
		`memcached_agent_handoff_copies_total{result="done"} 1`,
		`memcached_agent_handoff_copies_total{result="failed"} 0`,
		`memcached_agent_handoff_copies_total{result="cancelled"} 0`,
		"memcached_agent_handoff_items_total 2000",
		"memcached_agent_handoff_bytes_total 2.048e+08",
		"memcached_agent_handoff_copy_seconds_count 1",
	} {
		if !strings.Contains(metricsText, line+"\n") {
			t.Errorf("/metrics has no %q", line)
		}
	}

	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("the agent exited %d", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the agent did not stop on SIGTERM")
	}
	for _, want := range []string{`msg="handed items on"`, `msg=event reason=HandedOff message="handed on 2000 items (195.3 MiB) from cache-old to cache-new in`} {
		if !strings.Contains(p.out.String(), want) {
			t.Errorf("the log has no %s", want)
		}
	}
	// A copy that ended waits out its settle once clients are given the
	// keys' new place, and says so: one did, for the Replaced hand-off,
	// none for the Waiting one.
	var settles []string
	for _, l := range strings.Split(p.out.String(), "\n") {
		if strings.Contains(l, `msg="the slot serves its new Pod: waiting for clients to move to it"`) {
			settles = append(settles, l)
		}
	}
	if len(settles) != 1 || !strings.Contains(settles[0], "reason=Replaced") {
		t.Errorf("copies started %q, want one, of the Replaced hand-off", settles)
	}
}

// waitLog waits until a line of the process's output holds each of parts.
func (p *process) waitLog(t *testing.T, parts ...string) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, func() error {
		for _, l := range strings.Split(p.out.String(), "\n") {
			if !slices.ContainsFunc(parts, func(part string) bool { return !strings.Contains(l, part) }) {
				return nil
			}
		}
		return fmt.Errorf("%s logged no line with %q:\n%s", p.name, parts, p.out.String())
	})
}

// TestAgentsShareACopy runs two agents on one status: one copies, the
// other waits; killed (SIGKILL, its lock left behind), the copying one is
// taken over by the other once the lock expires, and the copy finishes.
func TestAgentsShareACopy(t *testing.T) {
	srcIP, dstIP := nextIP(t), nextIP(t)
	src, dst := startMemcached(t, srcIP, 1024), startMemcached(t, dstIP, 1024)
	const count, size = 6000, 100 << 10
	fill(t, src, "item", count, size)
	path := filepath.Join(t.TempDir(), "cache.json")
	testutil.WriteFileAtomic(t, path, statusJSON(t, 1767225601,
		[]v1alpha1.Slot{{Slot: 0, Pod: "cache-new", IP: dstIP, State: v1alpha1.SlotServing}},
		[]v1alpha1.Handoff{{Pod: "cache-old", IP: srcIP, Reason: v1alpha1.HandoffReplaced, Slot: ptr(int32(0)), To: "cache-new", ToIP: dstIP}}))
	agents := []*process{
		startProcess(t, "agent-a", path, "--handoff-lock-ttl=3s"),
		startProcess(t, "agent-b", path, "--handoff-lock-ttl=3s"),
	}
	var copying, waiting *process
	testutil.EventuallyEvery(t, 30*time.Second, 2*time.Millisecond, func() error {
		for i, a := range agents {
			if pr, ok := a.progress(t, "cache-old"); ok {
				if pr.State != "Copying" {
					t.Fatalf("%s reported %+v first", a.name, pr)
				}
				copying, waiting = a, agents[1-i]
				return nil
			}
		}
		return errors.New("no agent began copying")
	})
	// Let it copy some, then kill it as a node dies.
	dstItems := memcachedtest.Dial(t, dst)
	testutil.EventuallyEvery(t, 30*time.Second, time.Millisecond, func() error {
		if n := dstItems.Stat("curr_items"); n < 100 {
			return fmt.Errorf("%d items copied, want 100", n)
		}
		return nil
	})
	if pr, ok := waiting.progress(t, "cache-old"); ok {
		t.Errorf("%s reported %+v while %s copied", waiting.name, pr, copying.name)
	}
	// The lock is the copier's as it dies. (After, it lasts until the TTL
	// since the copier last renewed it, which the test does not know.)
	if holder := memcachedtest.Dial(t, src).Value(handoff.LockKey); holder != copying.name {
		t.Fatalf("the lock is held by %q as %s is killed, want it", holder, copying.name)
	}
	copying.cmd.Process.Kill()
	<-copying.exited
	killedAt := time.Now()
	copied := items(t, dst)
	if copied >= count {
		t.Fatalf("the copy was over before the kill (%d items)", copied)
	}

	var last v1alpha1.HandoffProgress
	testutil.EventuallyEvery(t, 60*time.Second, 10*time.Millisecond, func() error {
		last, _ = waiting.progress(t, "cache-old")
		switch last.State {
		case "Failed":
			t.Fatalf("%s failed: %+v", waiting.name, last)
		case "Done":
			return nil
		}
		return fmt.Errorf("%s did not finish: %+v", waiting.name, last)
	})
	// With a lock TTL of 3 s: the take-over waits for it to expire.
	testutil.Benchmark("BenchmarkHandoffTakeOver", "%.1f s/op", time.Since(killedAt).Seconds())
	if n := items(t, dst); n != count {
		t.Errorf("the destination holds %d items, want %d", n, count)
	}
	if last.Items+last.Skipped != count || last.Skipped < int64(copied) {
		t.Errorf("%s's report %+v: want %d items in all, at least the %d the killed agent copied already there", waiting.name, last, count, copied)
	}
	// The slot serves cache-new in this status: the marker follows the
	// report once clients had --handoff-settle to move.
	testutil.Eventually(t, 10*time.Second, func() error {
		if !memcachedtest.Dial(t, src).Has(contract.DoneKey) {
			return errors.New("no done marker on the source")
		}
		return nil
	})
}

func ptr[T any](v T) *T { return &v }
