package handoff

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/test/memcachedtest"
	"github.com/example/memcached-operator/test/testutil"
)

// The tests run memcached on port 11211 (the hand-offs name only
// addresses) of loopback addresses of this package's block
// (testutil.Loopback), so that packages tested in parallel never meet;
// nextIP lends one to t until it ends, so that -count=N runs in the
// block's 254 addresses.
var block = testutil.Loopback("cmd/memcached-agent/internal/handoff")

func nextIP(t testing.TB) string {
	t.Helper()
	return block.Lend(t)
}

// server is a memcached process (test/memcachedtest) at ip:11211.
type server struct {
	ip, addr string
	*memcachedtest.Server
}

// startServer runs memcached on ip:11211 with -m memoryMB and extra args.
func startServer(t testing.TB, ip string, memoryMB int, args ...string) *server {
	t.Helper()
	s := memcachedtest.Start(t, memcachedtest.Config{IP: ip, Port: 11211, Args: append([]string{"-t", "2", "-m", strconv.Itoa(memoryMB)}, args...)})
	return &server{ip: ip, addr: s.Addr(), Server: s}
}

func (s *server) kill() { s.Kill() }

// client is a test's connection to a memcached (memcachedtest.Client),
// with the arguments these tests write: flags and TTLs as numbers, a
// binary key given raw with " b" after it and sent base64.
type client struct {
	*memcachedtest.Client
	t    testing.TB
	addr string
}

func newClient(t testing.TB, addr string) *client {
	t.Helper()
	return &client{Client: memcachedtest.Dial(t, addr), t: t, addr: addr}
}

// set stores an item (ttl 0: none).
func (cl *client) set(key string, value []byte, flags uint32, ttl int64) {
	cl.t.Helper()
	f := []string{fmt.Sprintf("F%d", flags), fmt.Sprintf("T%d", ttl)}
	if k, ok := strings.CutSuffix(key, " b"); ok {
		key, f = k, append(f, "b")
	}
	cl.Set(key, value, f...)
}

// got is an item as mg sees it.
type got struct {
	value []byte
	flags uint32
	ttl   int64
}

// get reads key: ok false on a miss.
func (cl *client) get(key string) (got, bool) {
	cl.t.Helper()
	it, ok := cl.Get(key)
	return got{value: it.Value, flags: it.Flags, ttl: it.TTL}, ok
}

func (cl *client) delete(key string) {
	cl.t.Helper()
	cl.Delete(key)
}

// stat returns one of stats' numbers.
func (cl *client) stat(name string) int64 {
	cl.t.Helper()
	return cl.Stat(name)
}

// keys lists every key of a memcached (base64 ones with " b"), with the
// copier's own dump reader.
func (cl *client) keys() []string {
	cl.t.Helper()
	c, err := dial(context.Background(), (&net.Dialer{}).DialContext, cl.addr, 30*time.Second, getBufs)
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

// fill writes count items named prefix-i with sizes from size(i) and
// flags i (memcachedtest's Client.Fill), and returns their total bytes.
func fill(t testing.TB, addr, prefix string, count int, size func(i int) int, ttl int64) int64 {
	t.Helper()
	c := memcachedtest.Dial(t, addr)
	defer c.Close()
	return c.Fill(prefix, count, func(key string, i int) []byte { return valueFor(key, size(i)) }, ttl)
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
