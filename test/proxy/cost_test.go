package proxy_test

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/test/dataplane"
	"github.com/example/memcached-operator/test/testutil"
)

// TestProxyCost measures what the proxy costs on loopback: one load
// generator (./loadgen, built without the race detector whatever the tests
// run with), in one run, straight to one memcached and through the proxy
// (as the hook runs it: 2 threads) to three, in alternating rounds. It
// prints requests per second and p50/p99 latency for each and their
// ratios, as benchmark lines, and asserts none of them. Load generator,
// proxy and memcached share this machine's cores: in a cluster the proxy
// has CPUs of its own and adds a network round trip instead.
func TestProxyCost(t *testing.T) {
	direct := dataplane.StartMemcached(t, ipOf(40))
	f := &fixture{t: t, servers: map[string]*dataplane.Memcached{}, file: filepath.Join(t.TempDir(), "memcached.json")}
	f.c = &dataplane.Cluster{Name: "cache", Namespace: "shop", Spec: `{"size":3,"proxy":{"enabled":true}}`, Pods: []dataplane.Pod{f.pod(41), f.pod(42), f.pod(43)}}
	_, table, _ := f.publish()
	f.proxy = dataplane.StartProxy(t, ipOf(201), f.c.ProxySetup(t))
	f.agent = dataplane.StartAgent(t, append(f.proxy.AgentArgs(), "--namespace=shop", "--from-file="+f.file, "--shutdown-delay=0s")...)
	f.waitPool("the pool", table)
	want := fmt.Sprintf("pool version %d: 3 slots, 0 down", table.Version)
	if !testutil.Poll(10*time.Second, func() bool { return strings.Contains(f.proxy.Log(), want) }) {
		t.Fatalf("the proxy never took the pool:\n%s", f.proxy.Log())
	}

	bin := filepath.Join(t.TempDir(), "loadgen")
	if out, err := exec.Command("go", "build", "-o", bin, filepath.Join(testutil.Root(), "test", "proxy", "loadgen")).CombinedOutput(); err != nil {
		t.Fatalf("building the load generator: %v\n%s", err, out)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "-target", "direct="+direct.Addr(), "-target", "proxy="+f.proxy.Addr())
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("loadgen: %v\n%s", err, stderr.String())
	}
	fmt.Print(stdout.String())
	for _, line := range []string{"BenchmarkProxyCost/direct 1 ", "BenchmarkProxyCost/proxy 1 ", "BenchmarkProxyCost/proxy-vs-direct 1 "} {
		if !strings.Contains(stdout.String(), line) {
			t.Errorf("loadgen printed no %q:\n%s", line, stdout.String())
		}
	}
	f.alive("after the load")
}
