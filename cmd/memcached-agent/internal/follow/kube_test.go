package follow_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/example/memcached-operator/cmd/memcached-agent/internal/follow"
	"github.com/example/memcached-operator/cmd/memcached-agent/internal/serverlist"
	"github.com/example/memcached-operator/test/kube"
	"github.com/example/memcached-operator/test/testutil"
)

func TestMain(m *testing.M) { kube.Main(m) }

// TestKubeFollowsStatus runs the watch against a real kube-apiserver:
// the CRD installed, two Memcacheds in a namespace, and the follower
// restricted to one of them. Each status change of that one is served
// (the time from the change to the list being served is printed as a
// benchmark line); a change of the other never reaches it.
func TestKubeFollowsStatus(t *testing.T) {
	c := kube.Shared(t, kube.Options{})
	kubectl := func(stdin string, args ...string) {
		t.Helper()
		if _, stderr, err := c.KubectlStdin([]byte(stdin), args...); err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, stderr)
		}
	}
	kubectl("", "apply", "--server-side", "-f", filepath.Join(testutil.Root(), "manifests/base/crd/cache.example.com_memcacheds.yaml"))
	// kubectl wait --for=condition=Established fails when it asks before
	// the CRD has any condition (seen once in a loaded run): ask until the
	// API server serves the kind instead, as a user's next command needs.
	testutil.EventuallyEvery(t, 60*time.Second, 200*time.Millisecond, func() error {
		if _, stderr, err := c.KubectlStdin(nil, "get", "memcacheds.cache.example.com", "-A"); err != nil {
			return fmt.Errorf("the API server does not serve Memcacheds after the CRD was applied: %v\n%s", err, stderr)
		}
		return nil
	})
	// A namespace of this run's own: the API server is shared by every
	// run of -count, and no controller deletes a namespace in it.
	ns, stderr, err := c.KubectlStdin([]byte("apiVersion: v1\nkind: Namespace\nmetadata: {generateName: follow-}\n"), "create", "-f", "-", "-o", "jsonpath={.metadata.name}")
	if err != nil || ns == "" {
		t.Fatalf("creating a namespace: %v\n%s", err, stderr)
	}
	for _, name := range []string{"cache", "other"} {
		kubectl(fmt.Sprintf("apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: %s, namespace: %s}\nspec: {size: 1}\n", name, ns), "apply", "-f", "-")
	}
	setStatus := func(name string, version int64, ips ...string) {
		t.Helper()
		var slots []string
		for i, ip := range ips {
			slots = append(slots, fmt.Sprintf(`{"slot":%d,"pod":"%s-%d","ip":%q,"state":"Serving"}`, i, name, i, ip))
		}
		patch := fmt.Sprintf(`{"status":{"slotTable":{"version":%d,"slots":[%s]}}}`, version, strings.Join(slots, ","))
		kubectl("", "-n", ns, "patch", "memcached", name, "--subresource=status", "--type=merge", "-p", patch)
	}
	setStatus("cache", 100, "10.0.0.1")

	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	refusals := &refusalCount{}
	pub := serverlist.New(slog.New(slog.DiscardHandler), refusals, time.Now)
	errs := &errCount{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- follow.Kube(ctx, cfg, ns, "cache", pub, errs.count, slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Kube = %v", err)
		}
	})
	waitServed(t, pub, 100)

	for _, step := range []struct {
		name    string
		version int64
		ips     []string
	}{
		{"scale-up", 101, []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}},
		{"scale-down", 102, []string{"10.0.0.1", "10.0.0.2"}},
		{"replaced-Pod", 103, []string{"10.0.0.1", "10.0.0.9"}},
	} {
		changed := pub.Changed()
		// The other Memcached changes first: if the follower saw it, it
		// would be offered and refused as another object.
		setStatus("other", step.version+1000, "10.9.9.9")
		start := time.Now()
		setStatus("cache", step.version, step.ips...)
		select {
		case <-changed:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: version %d not served within 20 s", step.name, step.version)
		}
		testutil.Benchmark("BenchmarkWatchServed/"+step.name, "%.1f ms/op", float64(time.Since(start).Microseconds())/1000)
		if cur := pub.Current(); cur.Version != step.version || len(cur.Nodes) != len(step.ips) {
			t.Errorf("%s: serving version %d with %d servers, want %d with %d", step.name, cur.Version, len(cur.Nodes), step.version, len(step.ips))
		}
	}
	refusals.mu.Lock()
	defer refusals.mu.Unlock()
	if len(refusals.n) > 0 {
		t.Errorf("lists refused %v: the watch saw more than its Memcached", refusals.n)
	}
}

// refusalCount counts refusals by reason (serverlist.Observer).
type refusalCount struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *refusalCount) Published(*serverlist.Snapshot) {}
func (r *refusalCount) Refused(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[string]int{}
	}
	r.n[reason]++
}
