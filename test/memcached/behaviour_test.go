//go:build linux

package memcached_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/test/pod"
	"github.com/example/memcached-operator/test/testutil"
)

// TestLivenessCheck runs the liveness probe the hook answers, as kubelet
// would, against the real memcached: the default check passes while
// memcached serves and fails once it is stopped (SIGSTOP: its kernel still
// completes TCP handshakes), and passes again once it runs. A tcpSocket
// probe (livenessCheck TCP) cannot tell: it passes either way.
func TestLivenessCheck(t *testing.T) {
	tests := []struct {
		name          string
		spec          string
		passesStopped bool
	}{
		{name: "version check", spec: `{}`, passesStopped: false},
		{name: "version check, binary protocol only", spec: `{"memcached":{"extraArgs":["-B","binary"]}}`, passesStopped: false},
		{name: "version check, text protocol only", spec: `{"memcached":{"extraArgs":["-B","ascii"]}}`, passesStopped: false},
		{name: "tcp", spec: `{"livenessCheck":"TCP"}`, passesStopped: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tmpl := template(t, answer(t, withSpec(fmt.Sprintf("live-%d", i), tt.spec)))
			var probe = tmpl.Spec.Containers[0].LivenessProbe
			p := pod.Run(t, tmpl, pod.Options{})
			dial(t, p, memcached.Port) // listening
			if !p.Probe("memcached", probe) {
				t.Fatalf("the liveness probe fails on a serving memcached")
			}
			ctr := p.Container("memcached")
			if err := ctr.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			if got := p.Probe("memcached", probe); got != tt.passesStopped {
				t.Errorf("on a stopped memcached the liveness probe passes = %v, want %v", got, tt.passesStopped)
			}
			if err := ctr.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			if !testutil.Poll(10*time.Second, func() bool { return p.Probe("memcached", probe) }) {
				t.Errorf("the liveness probe fails once memcached runs again")
			}
		})
	}
}

// TestExporterReportsUp runs the metrics example's Pod, memcached and the
// exporter sidecar with the args the hook gives it, and scrapes the
// exporter: memcached_up 1, and the settings memcached runs with.
func TestExporterReportsUp(t *testing.T) {
	a := answer(t, exampleObject(t, "memcached-metrics.yaml"))
	tmpl := template(t, a)
	p := pod.Run(t, tmpl, pod.Options{})
	dial(t, p, memcached.Port)
	var metrics map[string]string
	if !testutil.Poll(20*time.Second, func() bool {
		metrics = scrape(t, p, memcached.ExporterPort)
		return metrics["memcached_up"] == "1"
	}) {
		t.Fatalf("memcached_up = %q, want 1; exporter output:\n%s", metrics["memcached_up"], p.Container("exporter").Output())
	}
	for name, want := range map[string]float64{"memcached_limit_bytes": 64 << 20, "memcached_max_connections": 1024} {
		if got, err := strconv.ParseFloat(metrics[name], 64); err != nil || got != want {
			t.Errorf("%s = %s, want %v", name, metrics[name], want)
		}
	}
}

// scrape reads the exporter's /metrics in the Pod: each sample without
// labels, by name.
func scrape(t *testing.T, p *pod.Pod, port int) map[string]string {
	t.Helper()
	conn, err := p.Dial(port)
	if err != nil {
		return nil
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	out := map[string]string{}
	for _, line := range strings.Split(string(body), "\n") {
		if f := strings.Fields(line); len(f) == 2 && !strings.HasPrefix(line, "#") {
			out[f[0]] = f[1]
		}
	}
	return out
}

// TestMemoryLimitHolds fills memcached to -m, with the smallest items and
// with large ones, opens every connection it serves less a few, half of
// them in the middle of a set whose read buffer they have filled, and holds
// memcached's peak resident memory against the memory limit the hook
// derived: a peak above it is an OOM kill in a cluster.
func TestMemoryLimitHolds(t *testing.T) {
	tests := []struct {
		name      string
		spec      string
		valueSize int
		tls       bool // clients connect over TLS
	}{
		{name: "smallest items", spec: `{"memcached":{"maxMemoryMB":64,"maxConnections":2048}}`, valueSize: 1},
		{name: "large items", spec: `{"memcached":{"maxMemoryMB":64,"maxConnections":2048}}`, valueSize: 500_000},
		// Many connections for little memory: what the limit derived from
		// -m and 5 KiB a connection got wrong (94 MiB here, against a
		// peak of about 115).
		{name: "many connections", spec: `{"memcached":{"maxMemoryMB":2,"maxConnections":12000}}`, valueSize: 1},
		// Over TLS a connection holds its TLS state and buffers too: the
		// limit without the TLS term (106 MiB here) is below the peak.
		{name: "many TLS connections", spec: `{"memcached":{"maxMemoryMB":2,"maxConnections":4000},"tls":{"secretName":"mem-tls"}}`, valueSize: 1, tls: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl := template(t, answer(t, withSpec(fmt.Sprintf("mem-%d", i), tt.spec)))
			limit := tmpl.Spec.Containers[0].Resources.Limits.Memory().Value()
			var opts pod.Options
			port, wrap := memcached.Port, func(c net.Conn) (net.Conn, error) { return c, nil }
			if tt.tls {
				ca := testutil.NewCA(t, "cache CA")
				opts.Secrets = map[string]map[string][]byte{"mem-tls": tlsSecret(t, ca, "cache")}
				port = memcached.LocalPort // stats and filling in plain text
				wrap = func(c net.Conn) (net.Conn, error) {
					conn := tls.Client(c, tlsConfig(ca))
					return conn, conn.Handshake()
				}
			}
			p := pod.Run(t, tmpl, opts)
			waitListening(t, p, memcached.Port)
			c := dial(t, p, port)
			pid := p.Container("memcached").PID(t)

			fill(t, c, tt.valueSize)
			settings := c.stats(t, "stats settings")
			conns, threads := atoi(settings["maxconns"]), atoi(settings["num_threads"])
			// What memcached serves (README, "Connections") with up to
			// three listeners, less the stats connection and a spare.
			n := conns - 7 - 5*threads - 3 - 2
			held := holdConnections(t, p, n, wrap)
			// The hash table grows once a second and keeps the old table
			// until every item has moved: wait until it is done.
			if !testutil.Poll(30*time.Second, func() bool { return c.stats(t, "stats")["hash_is_expanding"] == "0" }) {
				t.Fatalf("the hash table is still growing after 30 s: the peak would not be the peak")
			}
			st := c.stats(t, "stats")
			peak := vmHWM(t, pid)
			t.Logf("-m %d, %d connections (%d in the middle of a set), %s items: peak RSS %.1f MiB, limit %d MiB (%.2fx); evictions %s, hash_power_level %s",
				atoi(settings["maxbytes"])>>20, held, held/2, st["curr_items"], float64(peak)/(1<<20), limit>>20, float64(limit)/float64(peak), st["evictions"], st["hash_power_level"])
			if st["evictions"] == "0" {
				t.Errorf("memcached evicted nothing: -m is not full")
			}
			if held < n {
				t.Errorf("held %d connections, want %d", held, n)
			}
			if peak >= limit {
				t.Errorf("peak RSS %d bytes is not below the derived limit %d bytes", peak, limit)
			}
		})
	}
}

// fill stores unique items of valueSize bytes until memcached evicts, then
// as many again as it held then, so that every slab of -m is in use.
func fill(t *testing.T, c *client, valueSize int) {
	t.Helper()
	value := strings.Repeat("x", valueSize)
	w := bufio.NewWriterSize(c.conn, 1<<20)
	batch := max(1, (1<<20)/(valueSize+40))
	stored, target := 0, 0
	for round := 0; ; round++ {
		c.conn.SetDeadline(time.Now().Add(60 * time.Second))
		for i := range batch {
			fmt.Fprintf(w, "set k%d-%d 0 0 %d noreply\r\n%s\r\n", round, i, valueSize, value)
		}
		if err := w.Flush(); err != nil {
			t.Fatalf("filling memcached: %v", err)
		}
		stored += batch
		if target == 0 && c.stats(t, "stats")["evictions"] != "0" {
			target = 2 * stored
		}
		if target > 0 && stored >= target {
			return
		}
		if stored > 50_000_000 {
			t.Fatal("memcached never evicted")
		}
	}
}

// holdConnections opens n connections to memcached in the Pod: half idle
// after one version, half in the middle of a 100,000-byte set of which
// 16,000 bytes are sent (enough to fill each one's read buffer). It returns
// how many it holds; they close when the test ends.
func holdConnections(t *testing.T, p *pod.Pod, n int, wrap func(net.Conn) (net.Conn, error)) int {
	t.Helper()
	conns, err := p.DialN(memcached.Port, n)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	if err != nil {
		t.Fatalf("opening %d connections: %v (opened %d)", n, err, len(conns))
	}
	chunk := strings.Repeat("v", 16000)
	for i, raw := range conns {
		raw.SetDeadline(time.Now().Add(30 * time.Second))
		conn, err := wrap(raw)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns[i] = conn
		if i%2 == 0 {
			if err := version(conn); err != nil {
				t.Fatalf("connection %d: %v", i, err)
			}
			continue
		}
		if _, err := fmt.Fprintf(conn, "set busy%d 0 0 100000\r\n%s", i, chunk); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	// Every connection was answered or has its bytes sent; one more
	// version on an idle one makes sure memcached has read what was sent.
	if len(conns) > 0 {
		conns[0].SetDeadline(time.Now().Add(30 * time.Second))
		if err := version(conns[0]); err != nil {
			t.Fatal(err)
		}
	}
	return len(conns)
}

// version asks for memcached's version on a text-protocol connection.
func version(conn net.Conn) error {
	if _, err := io.WriteString(conn, "version\r\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "VERSION ") {
		return fmt.Errorf("version: %q", line)
	}
	return nil
}

// vmHWM is a process's peak resident memory, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// atoi is strconv.Atoi for numbers memcached wrote.
func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
