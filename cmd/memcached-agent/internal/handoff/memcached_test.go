package handoff

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/test/testutil"
)

// The tests run memcached on port 11211 (the hand-offs name only
// addresses) of loopback addresses of this package's block
// (testutil.Loopback), so that packages tested in parallel never meet;
// nextIP lends one to t until it ends, so that -count=N runs in the
// block's 254 addresses.
var block = testutil.Loopback("cmd/memcached-agent/internal/handoff")

func nextIP(t *testing.T) string {
	t.Helper()
	return block.Lend(t)
}

// server is a memcached process.
type server struct {
	ip, addr string
	cmd      *exec.Cmd
	stderr   *bytes.Buffer
}

// startServer runs memcached on ip:11211 with -m memoryMB and extra args.
func startServer(t testing.TB, ip string, memoryMB int, args ...string) *server {
	t.Helper()
	bin := testutil.Program(t, "MEMCACHED_BIN", "memcached 1.6.45")
	a := []string{"-l", ip, "-p", "11211", "-U", "0", "-t", "2", "-m", strconv.Itoa(memoryMB)}
	if os.Geteuid() == 0 {
		a = append(a, "-u", "nobody")
	}
	cmd := exec.Command(bin, append(a, args...)...)
	s := &server{ip: ip, addr: net.JoinHostPort(ip, "11211"), cmd: cmd, stderr: &bytes.Buffer{}}
	cmd.Stderr = s.stderr
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.kill)
	deadline := time.Now().Add(10 * time.Second)
	for {
		// Answered at its address, and by itself: not by a process that
		// held the address already, while this one exits unable to bind.
		c, err := net.Dial("tcp", s.addr)
		if err == nil {
			c.Close()
			var ours bool
			if ours, err = testutil.Listens(cmd.Process.Pid, s.addr); ours {
				return s
			} else if err == nil {
				err = errors.New("another process answers there")
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("memcached did not listen on %s: %v; it wrote: %s", s.addr, err, s.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *server) kill() {
	if s.cmd.Process != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	}
}

// client is a test's connection to a memcached.
type client struct {
	t testing.TB
	c *conn
}

func newClient(t testing.TB, addr string) *client {
	t.Helper()
	c, err := dial(context.Background(), (&net.Dialer{}).DialContext, addr, 30*time.Second, getBufs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	return &client{t: t, c: c}
}

// set stores an item (ttl 0: none); binary keys are given raw and sent
// base64.
func (cl *client) set(key string, value []byte, flags uint32, ttl int64) {
	cl.t.Helper()
	f := fmt.Sprintf("F%d T%d", flags, ttl)
	if k, ok := strings.CutSuffix(key, " b"); ok {
		key, f = k, f+" b"
	}
	ok, err := cl.c.store(key, value, f)
	if err != nil || !ok {
		cl.t.Fatalf("ms %s: %v, stored %v", key, err, ok)
	}
}

// got is an item as mg sees it.
type got struct {
	value []byte
	flags uint32
	ttl   int64
}

// get reads key (with " b" in it for a base64 key): ok false on a miss.
func (cl *client) get(key string) (got, bool) {
	cl.t.Helper()
	answer, err := cl.c.do("mg "+key+" v f t", nil)
	if err != nil {
		cl.t.Fatal(err)
	}
	if answer == "EN" {
		return got{}, false
	}
	f := strings.Fields(answer)
	if len(f) < 4 || f[0] != "VA" {
		cl.t.Fatalf("mg %s: %q", key, answer)
	}
	n, _ := strconv.Atoi(f[1])
	var g got
	for _, tok := range f[2:] {
		switch tok[0] {
		case 'f':
			v, _ := strconv.ParseUint(tok[1:], 10, 32)
			g.flags = uint32(v)
		case 't':
			g.ttl, _ = strconv.ParseInt(tok[1:], 10, 64)
		}
	}
	var buf bytes.Buffer
	if err := cl.c.copyValue(&buf, int64(n)); err != nil {
		cl.t.Fatal(err)
	}
	g.value = buf.Bytes()
	return g, true
}

func (cl *client) delete(key string) {
	cl.t.Helper()
	if answer, err := cl.c.do("md "+key, nil); err != nil || answer != "HD" {
		cl.t.Fatalf("md %s: %q %v", key, answer, err)
	}
}

// stat returns one of stats' numbers.
func (cl *client) stat(name string) int64 {
	cl.t.Helper()
	cl.c.w.WriteString("stats\r\n")
	if err := cl.c.flush(); err != nil {
		cl.t.Fatal(err)
	}
	var v int64 = -1
	for {
		l, err := cl.c.line()
		if err != nil {
			cl.t.Fatal(err)
		}
		if string(l) == "END" {
			return v
		}
		if f := strings.Fields(string(l)); len(f) == 3 && f[1] == name {
			v, _ = strconv.ParseInt(f[2], 10, 64)
		}
	}
}

// keys lists every key of a memcached (base64 ones with " b"), with the
// copier's own dump reader.
func (cl *client) keys() []string {
	cl.t.Helper()
	c, err := dial(context.Background(), (&net.Dialer{}).DialContext, cl.c.addr, 30*time.Second, getBufs)
	if err != nil {
		cl.t.Fatal(err)
	}
	defer c.close()
	for i := 0; ; i++ {
		err := startDump(c)
		if err == errBusy && i < 50 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if err != nil {
			cl.t.Fatal(err)
		}
		break
	}
	out := make(chan []dumpKey, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- readDump(context.Background(), c, 1000, out, func() {})
		close(out)
	}()
	var keys []string
	for b := range out {
		for _, k := range b {
			if k.binary {
				keys = append(keys, k.key+" b")
			} else {
				keys = append(keys, k.key)
			}
		}
	}
	if err := <-errc; err != nil {
		cl.t.Fatal(err)
	}
	// The reserved keys are left out by readDump; look for them apart.
	for _, k := range []string{LockKey, CopiedKey, "__memcached-operator/handoff/done"} {
		if _, ok := cl.get(k); ok {
			keys = append(keys, k)
		}
	}
	return keys
}

// valueFor is the value a test writes for key: n bytes that depend on the
// key, so that a value cut or mixed with another's shows.
func valueFor(key string, n int) []byte {
	sum := sha256.Sum256([]byte(key))
	v := bytes.Repeat(sum[:], n/len(sum)+1)[:n]
	return v
}

// fill writes count items named prefix-i with sizes from size(i),
// pipelined (ms q, mn to end each batch), and returns their total bytes.
func fill(t testing.TB, addr, prefix string, count int, size func(i int) int, ttl int64) int64 {
	t.Helper()
	c, err := dial(context.Background(), (&net.Dialer{}).DialContext, addr, 30*time.Second, getBufs)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	var total int64
	const batch = 200
	for i := 0; i < count; i += batch {
		for j := i; j < min(i+batch, count); j++ {
			key := fmt.Sprintf("%s-%d", prefix, j)
			n := size(j)
			total += int64(n)
			fmt.Fprintf(c.w, "ms %s %d T%d F%d q\r\n", key, n, ttl, j)
			c.w.Write(valueFor(key, n))
			c.w.WriteString("\r\n")
		}
		c.w.WriteString("mn\r\n")
		if err := c.flush(); err != nil {
			t.Fatal(err)
		}
		for {
			l, err := c.line()
			if err != nil {
				t.Fatal(err)
			}
			if string(l) == "MN" {
				break
			}
			t.Fatalf("filling %s: %q", addr, l)
		}
	}
	return total
}

// recorder is a Reporter that keeps everything in memory.
type recorder struct {
	mu      sync.Mutex
	states  map[string][]string // by Pod, in order
	last    map[string]v1alpha1.HandoffProgress
	events  []string
	forgot  []string
	changed chan struct{}
	// failLast fails this many reports of a copy's end (Done or Failed),
	// as an API server that is away would.
	failLast int
}

func newRecorder() *recorder {
	return &recorder{states: map[string][]string{}, last: map[string]v1alpha1.HandoffProgress{}, changed: make(chan struct{}, 1)}
}

func (r *recorder) Report(_ context.Context, pod string, p v1alpha1.HandoffProgress) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.State != "Copying" && r.failLast > 0 {
		r.failLast--
		return errors.New("the API server is away")
	}
	if s := r.states[pod]; len(s) == 0 || s[len(s)-1] != string(p.State) {
		r.states[pod] = append(s, string(p.State))
	}
	r.last[pod] = p
	r.notify()
	return nil
}

func (r *recorder) Forget(_ context.Context, pod string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forgot = append(r.forgot, pod)
	delete(r.last, pod)
	r.notify()
	return nil
}

func (r *recorder) Event(_ context.Context, warning bool, reason, message string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	kind := "Normal"
	if warning {
		kind = "Warning"
	}
	r.events = append(r.events, kind+" "+reason+": "+message)
	r.notify()
	return nil
}

func (r *recorder) notify() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// wait waits until cond holds of the recorder (under its lock).
func (r *recorder) wait(t testing.TB, what string, timeout time.Duration, cond func(r *recorder) bool) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		r.mu.Lock()
		ok := cond(r)
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-r.changed:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			r.mu.Lock()
			defer r.mu.Unlock()
			t.Fatalf("waited %s for %s: states %v, last %+v, events %q", timeout, what, r.states, r.last, r.events)
		}
	}
}

// final waits for pod's copy to end and returns its last report.
func (r *recorder) final(t testing.TB, pod string, timeout time.Duration) v1alpha1.HandoffProgress {
	t.Helper()
	r.wait(t, pod+"'s copy to end", timeout, func(r *recorder) bool {
		s := r.last[pod].State
		return s == "Done" || s == "Failed"
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last[pod]
}

// meter is an Observer that adds up.
type meter struct {
	items, bytes atomic.Int64
	mu           sync.Mutex
	results      []string
}

func (m *meter) Handed(items, bytes int64) { m.items.Add(items); m.bytes.Add(bytes) }
func (m *meter) Ended(result string, _ time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.results = append(m.results, result)
}

// TestRenewLock holds renewLock to what the copy's lock promises: renewed
// while this agent holds it, taken back when it expired and no one took
// it, and lost (errLockLost, the copy stops) when another agent holds it.
func TestRenewLock(t *testing.T) {
	src := startServer(t, nextIP(t), 16)
	c, err := dial(context.Background(), (&net.Dialer{}).DialContext, src.addr, 30*time.Second, getBufs)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	holder := func() string {
		t.Helper()
		v, _, found, err := c.get(LockKey)
		if err != nil {
			t.Fatal(err)
		}
		if !found {
			return ""
		}
		return string(v)
	}
	tests := []struct {
		name string
		// before sets the lock up: who holds it ("" for nobody, as
		// after it expired).
		before string
		want   error
		holder string
	}{
		{name: "held", before: "agent-a", want: nil, holder: "agent-a"},
		{name: "expired, nobody took it", before: "", want: nil, holder: "agent-a"},
		{name: "taken by another agent", before: "agent-b", want: errLockLost, holder: "agent-b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := c.store(LockKey, []byte("agent-a"), "T60"); err != nil {
				t.Fatal(err)
			}
			_, cas, _, err := c.get(LockKey)
			if err != nil {
				t.Fatal(err)
			}
			switch tt.before {
			case "":
				err = c.deleteCAS(LockKey, cas)
			case "agent-a":
			default:
				_, err = c.store(LockKey, []byte(tt.before), "T60")
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := renewLock(c, "agent-a", time.Minute); !errors.Is(err, tt.want) {
				t.Errorf("renewLock = %v, want %v", err, tt.want)
			}
			if got := holder(); got != tt.holder {
				t.Errorf("the lock is held by %q, want %q", got, tt.holder)
			}
		})
	}
}
