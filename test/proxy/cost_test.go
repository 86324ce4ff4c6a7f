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

// BenchmarkProxyCost measures what the proxy costs on loopback (make
// bench runs it, once: -benchtime 1x): one load generator (./loadgen,
// built without the race detector whatever the tests run with), in one
// run, straight to one memcached and through the proxy (as the hook runs
// it: 2 threads) to three, in alternating rounds. It prints requests per
// second and p50/p99 latency for each and their ratios, as benchmark lines
// (BenchmarkProxyCost/direct, /proxy, /proxy-vs-direct), and asserts none
// of them, which is why it is no test. Load generator, proxy and memcached
// share this machine's cores: in a cluster the proxy has CPUs of its own
// and adds a network round trip instead. It makes one run whatever b.N
// (its servers take the package's addresses): the load generator times
// its own rounds.
func BenchmarkProxyCost(b *testing.B) {
	loadgen := filepath.Join(b.TempDir(), "loadgen")
	if out, err := exec.Command("go", "build", "-o", loadgen, filepath.Join(testutil.Root(), "test", "proxy", "loadgen")).CombinedOutput(); err != nil {
		b.Fatalf("building the load generator: %v\n%s", err, out)
	}
	direct := dataplane.StartMemcached(b, ipOf(40))
	f := &fixture{t: b, servers: map[string]*dataplane.Memcached{}, file: filepath.Join(b.TempDir(), "memcached.json")}
	f.c = &dataplane.Cluster{Name: "cache", Namespace: "shop", Spec: `{"size":3,"proxy":{"enabled":true}}`, Pods: []dataplane.Pod{f.pod(41), f.pod(42), f.pod(43)}}
	_, table, _ := f.publish()
	f.proxy = dataplane.StartProxy(b, ipOf(201), f.c.ProxySetup(b))
	f.agent = dataplane.StartAgent(b, append(f.proxy.AgentArgs(), "--namespace=shop", "--from-file="+f.file, "--shutdown-delay=0s")...)
	f.waitPool("the pool", table)
	want := fmt.Sprintf("pool version %d: 3 slots, 0 down", table.Version)
	testutil.Eventually(b, 10*time.Second, func() error {
		if !strings.Contains(f.proxy.Log(), want) {
			return fmt.Errorf("the proxy never took the pool:\n%s", f.proxy.Log())
		}
		return nil
	})

	var stdout, stderr bytes.Buffer
	cmd := exec.Command(loadgen, "-target", "direct="+direct.Addr(), "-target", "proxy="+f.proxy.Addr())
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("loadgen: %v\n%s", err, stderr.String())
	}
	fmt.Print(stdout.String())
	for _, line := range []string{"BenchmarkProxyCost/direct 1 ", "BenchmarkProxyCost/proxy 1 ", "BenchmarkProxyCost/proxy-vs-direct 1 "} {
		if !strings.Contains(stdout.String(), line) {
			b.Errorf("loadgen printed no %q:\n%s", line, stdout.String())
		}
	}
	f.alive("after the load")
}
