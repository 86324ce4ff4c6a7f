//go:build linux

package memcached_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/sync/metacontroller"
	"github.com/example/memcached-operator/test/pod"
	"github.com/example/memcached-operator/test/testutil"
)

// fixedNow is the clock the hook answers at.
var fixedNow = time.Date(2026, time.November, 23, 12, 0, 0, 0, time.UTC)

// hookOptions are the hook's settings in these tests: an agent image, as
// the manifests set one.
var hookOptions = memcached.Options{AgentImage: "ghcr.io/example/memcached-hook:test"}

// answer runs the hook's first sync for a Memcached (a YAML or JSON
// object) and returns its answer.
func answer(t *testing.T, object []byte) *memcached.Answer {
	t.Helper()
	var parent map[string]any
	if err := yaml.Unmarshal(object, &parent); err != nil {
		t.Fatal(err)
	}
	meta := parent["metadata"].(map[string]any)
	meta["namespace"] = "default"
	meta["generation"] = 1
	req, err := metacontroller.DecodeSyncRequest(testutil.MustMarshal(t, testutil.FirstSync(parent)))
	if err != nil {
		t.Fatal(err)
	}
	a, err := memcached.Sync(req, fixedNow, hookOptions)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// template returns the Pod template of the answer's Deployment, failing
// the test if the answer has none (an invalid spec keeps what exists).
func template(t *testing.T, a *memcached.Answer) corev1.PodTemplateSpec {
	t.Helper()
	for _, c := range a.Response.Children {
		var d appsv1.Deployment
		b := testutil.MustMarshal(t, c)
		if err := yaml.Unmarshal(b, &d); err == nil && d.Kind == "Deployment" {
			return d.Spec.Template
		}
	}
	t.Fatalf("the answer has no Deployment: %s", testutil.Truncate(testutil.MustMarshal(t, a.Response)))
	return corev1.PodTemplateSpec{}
}

// memcachedOf is an example's object, or a Memcached with spec.
func exampleObject(t *testing.T, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testutil.Root(), "examples", file))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// withSpec is a Memcached named name with the spec given as JSON.
func withSpec(name, spec string) []byte {
	return []byte(fmt.Sprintf(`{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":%q},"spec":%s}`, name, spec))
}

// client is a text-protocol connection to memcached.
type client struct {
	conn net.Conn
	r    *bufio.Reader
}

// dial connects to memcached's port in the Pod, waiting for it to listen.
func dial(t *testing.T, p *pod.Pod, port int) *client {
	t.Helper()
	var conn net.Conn
	if !testutil.Poll(20*time.Second, func() bool {
		var err error
		conn, err = p.Dial(port)
		return err == nil
	}) {
		t.Fatalf("nothing listens on 127.0.0.1:%d in the Pod:\n%s", port, p.State())
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	return &client{conn: conn, r: bufio.NewReader(conn)}
}

// stats sends a stats command ("stats settings") and returns its STAT
// lines. It sets its own deadline: the one a previous step set runs out
// while the test does slow work between two stats (CI's loaded machine
// took more than a minute for 4,000 TLS handshakes under -race).
func (c *client) stats(t *testing.T, cmd string) map[string]string {
	t.Helper()
	c.conn.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c.conn, "%s\r\n", cmd)
	out := map[string]string{}
	for {
		line, err := c.r.ReadString('\n')
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "END" {
			return out
		}
		f := strings.SplitN(line, " ", 3)
		if len(f) != 3 || f[0] != "STAT" {
			t.Fatalf("%s: unexpected line %q", cmd, line)
		}
		out[f[1]] = f[2]
	}
}

// TestHarnessRunsTheMinimalExample is the harness's own smoke test.
func TestHarnessRunsTheMinimalExample(t *testing.T) {
	tmpl := template(t, answer(t, exampleObject(t, "memcached-minimal.yaml")))
	p := pod.Run(t, tmpl, pod.Options{})
	c := dial(t, p, memcached.Port)
	s := c.stats(t, "stats settings")
	if s["maxbytes"] != fmt.Sprint(64<<20) || s["maxconns"] != "1024" || s["num_threads"] != "4" {
		t.Errorf("stats settings: maxbytes %s maxconns %s num_threads %s", s["maxbytes"], s["maxconns"], s["num_threads"])
	}
}
