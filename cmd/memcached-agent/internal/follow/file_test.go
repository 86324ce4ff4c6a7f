package follow_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/cmd/memcached-agent/internal/follow"
	"github.com/example/memcached-operator/cmd/memcached-agent/internal/serverlist"
	"github.com/example/memcached-operator/test/testutil"
)

// object is Memcached cache in namespace shop as kubectl prints it, with a
// slot table of version whose slots hold the given Pods (name=ip, or ""
// for an Empty slot).
func object(version int64, pods ...string) string {
	var slots []string
	for i, p := range pods {
		if p == "" {
			slots = append(slots, fmt.Sprintf(`{"slot":%d,"state":"Empty"}`, i))
			continue
		}
		name, ip, _ := strings.Cut(p, "=")
		slots = append(slots, fmt.Sprintf(`{"slot":%d,"pod":%q,"ip":%q,"state":"Serving"}`, i, name, ip))
	}
	return fmt.Sprintf(`{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached",
  "metadata":{"name":"cache","namespace":"shop","resourceVersion":"%d","uid":"6a1b","managedFields":[{"manager":"kubectl"}]},
  "spec":{"size":%d},
  "status":{"slotTable":{"version":%d,"slots":[%s]},"conditions":[]}}`, version, len(pods), version, strings.Join(slots, ","))
}

// errCount counts follower errors.
type errCount struct {
	mu sync.Mutex
	n  map[string]int
}

func (e *errCount) count(source string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == nil {
		e.n = map[string]int{}
	}
	e.n[source]++
}

// TestFileFollowsRewrites runs the file follower into a real Publisher and
// rewrites the file as the hook's status would change (atomically: a new
// file renamed over the old one), for a scale-up, a scale-down and a
// replaced Pod: each new version and list is served. The time from the
// rename to the list being served is printed as a benchmark line (-v).
func TestFileFollowsRewrites(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "memcached.json")
	testutil.WriteFileAtomic(t, path, []byte(object(100, "a=10.0.0.1", "b=10.0.0.2", "c=10.0.0.3")))
	pub := serverlist.New(slog.New(slog.DiscardHandler), nil, time.Now)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	errs := &errCount{}
	go func() {
		defer close(done)
		follow.File(ctx, path, 50*time.Millisecond, "cache", "", pub, errs.count, slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() { cancel(); <-done })

	waitServed(t, pub, 100)
	steps := []struct {
		name    string
		content string
		version int64
		hosts   string
	}{
		{"scale-up", object(101, "a=10.0.0.1", "b=10.0.0.2", "c=10.0.0.3", "d=10.0.0.4", "e=10.0.0.5"), 101, "10.0.0.1 10.0.0.2 10.0.0.3 10.0.0.4 10.0.0.5"},
		{"scale-down", object(102, "a=10.0.0.1", "b=10.0.0.2"), 102, "10.0.0.1 10.0.0.2"},
		{"replaced Pod", object(103, "a=10.0.0.1", "f=10.0.0.9"), 103, "10.0.0.1 10.0.0.9"},
		{"as YAML", toYAML(t, object(104, "a=10.0.0.1", "f=10.0.0.9", "g=10.0.0.7")), 104, "10.0.0.1 10.0.0.9 10.0.0.7"},
	}
	for _, s := range steps {
		changed := pub.Changed()
		start := time.Now()
		testutil.WriteFileAtomic(t, path, []byte(s.content))
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: version %d not served within 10 s", s.name, s.version)
		}
		took := time.Since(start)
		cur := pub.Current()
		var ips []string
		for _, n := range cur.Nodes {
			ips = append(ips, n.IP)
		}
		if cur.Version != s.version || strings.Join(ips, " ") != s.hosts {
			t.Errorf("%s: serving version %d %v, want %d [%s]", s.name, cur.Version, ips, s.version, s.hosts)
		}
		testutil.Benchmark("BenchmarkFromFileServed/"+s.name, "%.1f ms/op", float64(took.Microseconds())/1000)
	}
}

// TestFileKeepsLastGood checks that a file that is removed, malformed,
// empty or holds an empty list keeps the list served, and that the next
// good file is served.
func TestFileKeepsLastGood(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "memcached.yaml")
	var logs testutil.LockedBuffer
	pub := serverlist.New(slog.New(slog.NewTextHandler(&logs, nil)), nil, time.Now)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	errs := &errCount{}
	go func() {
		defer close(done)
		follow.File(ctx, path, 20*time.Millisecond, "cache", "", pub, errs.count, slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() { cancel(); <-done })

	// Missing at start: nothing served, reported.
	waitLog(t, &logs, "no such file")
	if pub.Current() != nil {
		t.Fatal("something served with no file")
	}
	testutil.WriteFileAtomic(t, path, []byte(object(7, "a=10.0.0.1")))
	waitServed(t, pub, 7)
	for _, bad := range []struct{ name, content, log string }{
		{"truncated JSON", object(8, "a=10.0.0.2")[:40], "malformed JSON"},
		{"not a Memcached", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cache"}}`, "ConfigMap"},
		{"empty", "  \n", "empty"},
		{"no Serving slot", object(9, "", ""), "no Serving slot"},
		{"YAML that is not", "a: [\n", "YAML"},
	} {
		testutil.WriteFileAtomic(t, path, []byte(bad.content))
		waitLog(t, &logs, bad.log)
		if cur := pub.Current(); cur == nil || cur.Version != 7 {
			t.Errorf("%s: serving %+v, want version 7 still", bad.name, cur)
		}
	}
	os.Remove(path)
	waitLog(t, &logs, "no such file")
	testutil.WriteFileAtomic(t, path, []byte(object(10, "a=10.0.0.3")))
	waitServed(t, pub, 10)
	errs.mu.Lock()
	defer errs.mu.Unlock()
	if errs.n["file"] != 2 {
		t.Errorf("file errors counted %v, want 2 (missing twice)", errs.n)
	}
}

func toYAML(t testing.TB, j string) string {
	t.Helper()
	y, err := yaml.JSONToYAML([]byte(j))
	if err != nil {
		t.Fatal(err)
	}
	return string(y)
}

func waitServed(t *testing.T, pub *serverlist.Publisher, version int64) {
	t.Helper()
	testutil.EventuallyEvery(t, 10*time.Second, 5*time.Millisecond, func() error {
		if cur := pub.Current(); cur == nil || cur.Version != version {
			return fmt.Errorf("version %d not served (serving %+v)", version, cur)
		}
		return nil
	})
}

// waitLog waits until the log holds s, and then forgets what it held.
func waitLog(t *testing.T, l *testutil.LockedBuffer, s string) {
	t.Helper()
	testutil.EventuallyEvery(t, 10*time.Second, 5*time.Millisecond, func() error {
		if !strings.Contains(l.String(), s) {
			return fmt.Errorf("log never said %q:\n%s", s, l.String())
		}
		return nil
	})
	l.Reset()
}

// TestDecode checks the forms a file may take.
func TestDecode(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		wantErr  error
	}{
		{"JSON", object(1, "a=10.0.0.1"), nil},
		{"JSON after white space", "\n\t " + object(1, "a=10.0.0.1"), nil},
		{"YAML", toYAML(t, object(1, "a=10.0.0.1")), nil},
	} {
		m, err := follow.Decode([]byte(tt.in))
		if !errors.Is(err, tt.wantErr) || (err == nil && (m.Name != "cache" || m.Status.SlotTable.Version != 1)) {
			t.Errorf("%s: Decode = %+v, %v", tt.name, m, err)
		}
	}
}
