package dataplane

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/test/memcachedtest"
	"github.com/example/memcached-operator/test/testutil"
)

// ProxySetup is the proxy tier as the hook answered it for the Memcached
// (spec.proxy): the proxy container's memcached arguments and
// environment, the route configuration of ConfigMap NAME-proxy, and the
// arguments of the agent container beside it.
type ProxySetup struct {
	Args      []string
	Env       map[string]string
	Config    string
	AgentArgs []string
}

// ProxySetup returns the proxy tier of the last Sync's answer.
func (c *Cluster) ProxySetup(t testing.TB) ProxySetup {
	t.Helper()
	return c.proxySetup(t, c.Name+v1alpha1.ProxySuffix)
}

// ZoneProxySetup returns zone's proxy tier of the last Sync's answer, for
// a Memcached with zones: the proxy Deployment NAME-proxy-ZONE (its
// environment names the zone, MEMCACHED_PROXY_LOCAL_ZONE) and the route
// configuration of ConfigMap NAME-proxy, which every zone's shares.
func (c *Cluster) ZoneProxySetup(t testing.TB, zone string) ProxySetup {
	t.Helper()
	return c.proxySetup(t, c.Name+v1alpha1.ProxySuffix+"-"+zone)
}

// proxySetup reads the proxy Deployment deployment and the ConfigMap
// NAME-proxy of the last Sync's answer.
func (c *Cluster) proxySetup(t testing.TB, deployment string) ProxySetup {
	t.Helper()
	var d appsv1.Deployment
	if err := json.Unmarshal(c.child(t, "Deployment", deployment), &d); err != nil {
		t.Fatalf("dataplane: the proxy Deployment %s: %v", deployment, err)
	}
	var cm corev1.ConfigMap
	if err := json.Unmarshal(c.child(t, "ConfigMap", c.Name+v1alpha1.ProxySuffix), &cm); err != nil {
		t.Fatalf("dataplane: the proxy ConfigMap: %v", err)
	}
	s := ProxySetup{Env: map[string]string{}, Config: cm.Data["config.lua"]}
	for _, ctr := range d.Spec.Template.Spec.Containers {
		switch ctr.Name {
		case "proxy":
			s.Args = ctr.Args
			for _, e := range ctr.Env {
				s.Env[e.Name] = e.Value
			}
		case "agent":
			s.AgentArgs = ctr.Args
		}
	}
	if s.Args == nil || s.AgentArgs == nil || s.Config == "" {
		t.Fatalf("dataplane: the hook's proxy Deployment %s has no proxy and agent containers, or its ConfigMap no config.lua: %s", deployment, c.child(t, "Deployment", deployment))
	}
	return s
}

// child returns the last Sync's child of kind and name, as JSON.
func (c *Cluster) child(t testing.TB, kind, name string) []byte {
	t.Helper()
	b, ok := c.Answered(t, kind, name)
	if !ok {
		t.Fatalf("dataplane: the hook answered no %s %s", kind, name)
	}
	return b
}

// Proxy is memcached 1.6.45 running as the proxy tier's proxy, with the
// hook's arguments, environment and route configuration; it reads its pool
// from PoolFile, which the agent writes.
type Proxy struct {
	IP       string
	PoolFile string
	setup    ProxySetup
	server   *memcachedtest.Server
}

// ReadableDir returns a new directory that memcached can read however it
// runs: tests run as root start memcached as nobody (memcached refuses to
// run as root), and a test's temporary directory is its owner's alone.
func ReadableDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// StartProxy starts the proxy of setup on ip:11211, its route
// configuration and pool file in a directory of its own, and returns once
// it answers (with no pool yet it answers version, and fails every
// request). It is killed when the test ends.
func StartProxy(t testing.TB, ip string, setup ProxySetup) *Proxy {
	t.Helper()
	dir := ReadableDir(t)
	config := filepath.Join(dir, "config.lua")
	if err := os.WriteFile(config, []byte(setup.Config), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &Proxy{IP: ip, PoolFile: filepath.Join(dir, "pool"), setup: setup}
	var args []string
	for _, a := range setup.Args {
		// -o proxy_config=routelib,proxy_arg=/etc/memcached-proxy/config.lua
		if i := strings.Index(a, "proxy_arg="); i >= 0 {
			rest := a[i+len("proxy_arg="):]
			end := strings.IndexByte(rest, ',')
			if end < 0 {
				end = len(rest)
			}
			a = a[:i] + "proxy_arg=" + config + rest[end:]
		}
		args = append(args, a)
	}
	var env []string
	for k, v := range setup.Env {
		if k == "MEMCACHED_PROXY_POOL_FILE" {
			v = p.PoolFile
		}
		env = append(env, k+"="+v)
	}
	p.server = memcachedtest.Start(t, memcachedtest.Config{IP: ip, Port: Port, Args: args, Env: env, What: "the proxy"})
	testutil.Eventually(t, 10*time.Second, func() error {
		if exited, how := p.Exited(); exited {
			t.Fatalf("dataplane: the proxy exited (%s): %s", how, p.Log())
		}
		if err := p.Alive(); err != nil {
			return fmt.Errorf("the proxy does not answer: %v: %s", err, p.Log())
		}
		return nil
	})
	return p
}

// Addr is the proxy's ip:11211.
func (p *Proxy) Addr() string { return net.JoinHostPort(p.IP, fmt.Sprint(Port)) }

// PID is the proxy's process ID.
func (p *Proxy) PID() int { return p.server.PID() }

// Exited tells whether the proxy ended, and how (Server.Exited).
func (p *Proxy) Exited() (bool, string) { return p.server.Exited() }

// Alive returns nil when the proxy has not exited and answers version.
func (p *Proxy) Alive() error {
	if exited, how := p.Exited(); exited {
		return fmt.Errorf("the proxy exited: %s", how)
	}
	got, err := memcachedtest.Ask(p.Addr(), "version\r\n")
	if err != nil {
		return err
	}
	if !strings.HasPrefix(got, "VERSION ") {
		return fmt.Errorf("the proxy answered version with %q", got)
	}
	return nil
}

// Freeze stops the proxy (SIGSTOP) without ending it: it neither loads
// nor announces a pool, nor answers, until Thaw.
func (p *Proxy) Freeze(t testing.TB) { p.server.Freeze(t) }

// Thaw resumes a proxy Freeze stopped.
func (p *Proxy) Thaw(t testing.TB) { p.server.Thaw(t) }

// Stats returns the proxy's own stats (proxy_config_reloads, ...).
func (p *Proxy) Stats(t testing.TB) map[string]string {
	t.Helper()
	out, err := memcachedtest.Stats(p.Addr())
	if err != nil {
		t.Fatalf("dataplane: the proxy's stats: %v", err)
	}
	return out
}

// Log is what the proxy printed so far (proxy.lua logs to stderr).
func (p *Proxy) Log() string { return p.server.Output() }

// AgentArgs are the hook's arguments for the agent beside the proxy, with
// the pool file this proxy reads, this proxy's address (in a Pod, the
// default 127.0.0.1:11211 is the proxy beside the agent; here each proxy
// has an address of its own) and without the admin address (StartAgent
// picks a free one on loopback).
func (p *Proxy) AgentArgs() []string {
	var args []string
	for _, a := range p.setup.AgentArgs {
		switch {
		case strings.HasPrefix(a, "--admin-listen="), strings.HasPrefix(a, "--proxy-addr="):
			continue
		case strings.HasPrefix(a, "--pool-file="):
			a = "--pool-file=" + p.PoolFile
		}
		args = append(args, a)
	}
	return append(args, "--proxy-addr="+p.Addr())
}

// ExpectedPool is the pool file the agent must write for a slot table,
// worked out here from the table alone (the tests' own reading of the
// format proxy.lua takes): version, the tables line (the zone ""'s
// version), one line a slot in slot order (a
// Serving slot its address on memcached's port, any other the
// placeholder 127.0.0.1:1 labelled _down_<slot>), end and the count; one
// placeholder for a table with no slot.
func ExpectedPool(table v1alpha1.SlotTable) string {
	lines := []string{fmt.Sprintf("version %d", table.Version), fmt.Sprintf("# tables =%d", table.Version)}
	for i, e := range table.Slots {
		if e.State == v1alpha1.SlotServing && e.IP != "" {
			lines = append(lines, net.JoinHostPort(e.IP, fmt.Sprint(memcached.Port)))
		} else {
			lines = append(lines, fmt.Sprintf("127.0.0.1:1 _down_%d", i))
		}
	}
	n := len(lines) - 2
	if n == 0 {
		lines, n = append(lines, "127.0.0.1:1 _down_0"), 1
	}
	return strings.Join(append(lines, fmt.Sprintf("end %d", n)), "\n") + "\n"
}

// PodTemplate is the memcached Pods' template of the last Sync's answer:
// what test/pod runs as the Pods.
func (c *Cluster) PodTemplate(t testing.TB) corev1.PodTemplateSpec {
	t.Helper()
	var d appsv1.Deployment
	if err := json.Unmarshal(c.child(t, "Deployment", c.Name), &d); err != nil {
		t.Fatalf("dataplane: the memcached Deployment: %v", err)
	}
	return d.Spec.Template
}

// ZonePodTemplate is zone's memcached Pods' template of the last Sync's
// answer, for a Memcached with zones (Deployment NAME-ZONE): what
// test/pod runs as that zone's Pods.
func (c *Cluster) ZonePodTemplate(t testing.TB, zone string) corev1.PodTemplateSpec {
	t.Helper()
	var d appsv1.Deployment
	if err := json.Unmarshal(c.child(t, "Deployment", c.Name+"-"+zone), &d); err != nil {
		t.Fatalf("dataplane: zone %s's memcached Deployment: %v", zone, err)
	}
	return d.Spec.Template
}
