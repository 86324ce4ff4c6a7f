// Package clients starts the real memcached clients a user of the
// operator meets, for a test to drive alike: the npm memcache client
// (node/client.mjs), Grafana dskit's cache.MemcachedClient and
// bradfitz/gomemcache (go/memclient, a module of its own), pymemcache's
// HashClient (python/client.py) and PHP's memcached extension
// (php/client.php). Each speaks one protocol, JSON lines on its standard
// input and output (see node/client.mjs), so a test sets and gets keys,
// asks for the servers a client hashes over and waits for its events the
// same way with any of them.
//
// Each client is set up as its users set it up: what is measured is how
// that client places keys, not how a test harness would. Names are
// resolved by each one's own resolver from /etc/hosts and
// /etc/resolv.conf: Options.Hosts and Options.ResolvConf give the client
// files of the test's own in a mount namespace of its own, so that a test
// points it at a test DNS server, or names addresses, without touching the
// machine's files.
//
// The programs come from the environment make test sets (NPM_CLIENTS_DIR,
// GO_CLIENTS_BIN) and from Debian's packages (make debian-clients): a
// missing one skips the test naming it, or fails it when CI is set.
package clients

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/memcached-operator/test/testutil"
)

// Environment variables naming the programs.
const (
	// EnvNPMClients is the directory make test installs the npm clients in.
	EnvNPMClients = "NPM_CLIENTS_DIR"
	// EnvGoClients is memclient, make test's build of test/clients/go.
	EnvGoClients = "GO_CLIENTS_BIN"
)

// Python is the interpreter pymemcache's client runs in: Debian's own,
// which python3-pymemcache is installed for, never a python3 earlier on
// PATH (pyenv's, say) that lacks it.
const Python = "/usr/bin/python3"

// Kind is a client and how it finds its servers. Start's args are what
// each kind's comment names.
type Kind string

const (
	// Node is the npm memcache client with a fixed list: HOST:PORT[,...].
	Node Kind = "node"
	// NodeDiscover is the npm memcache client with Auto Discovery from a
	// configuration endpoint: HOST:PORT POLL_MS.
	NodeDiscover Kind = "node-discover"
	// Dskit is dskit's cache.MemcachedClient: ADDRESS[,...] [REFRESH_MS],
	// each address host:port or dskit's service discovery
	// (dnssrvnoa+_memcached._tcp.NAME); REFRESH_MS shortens dskit's 30 s
	// re-resolution (see go/memclient). Its SRV lookups (dskit's miekgdns
	// resolver) go to resolv.conf's nameservers over TCP only, with no
	// search domains: the test's DNS server must answer on TCP, and NAME
	// be fully qualified (….svc.cluster.local). The SRV targets are then
	// resolved by Go's resolver, search domains and /etc/hosts included.
	Dskit Kind = "dskit"
	// Gomemcache is bradfitz/gomemcache's memcache.New: HOST:PORT[,...],
	// resolved once when it starts.
	Gomemcache Kind = "gomemcache"
	// Pymemcache is pymemcache's HashClient: HOST:PORT[,...].
	Pymemcache Kind = "pymemcache"
	// PHPMemcached is PHP's Memcached with libketama-compatible consistent
	// hashing: HOST:PORT[,...].
	PHPMemcached Kind = "php-memcached"
)

// Options are how a client is started, beside its kind and arguments.
type Options struct {
	// Hosts, when set, is the /etc/hosts the client sees (the machine's
	// otherwise). Client.SetHosts rewrites it while the client runs.
	Hosts string
	// ResolvConf, when set, is the /etc/resolv.conf the client sees: its
	// nameserver a test DNS server, say (PodResolvConf writes kubelet's).
	ResolvConf string
}

// Client is a real client, running, driven over its standard input.
type Client struct {
	kind   Kind
	cmd    *exec.Cmd
	in     io.WriteCloser
	events chan map[string]any
	out    *testutil.LockedBuffer
	// hosts and resolvConf are the files bind-mounted over the client's
	// /etc/hosts and /etc/resolv.conf, or "".
	hosts, resolvConf string
	stop              sync.Once
	exited            chan struct{}
}

// Start runs a client of kind with args (see Kind), stopping it when the
// test ends; with opts.Hosts or opts.ResolvConf, in a mount namespace of its
// own that sees them.
func Start(t testing.TB, opts Options, kind Kind, args ...string) *Client {
	t.Helper()
	argv, dir := program(t, kind, args)
	c := &Client{kind: kind, events: make(chan map[string]any, 1024), out: &testutil.LockedBuffer{}, exited: make(chan struct{})}
	if opts.Hosts != "" || opts.ResolvConf != "" {
		argv = c.isolate(t, opts, argv)
	}
	c.cmd = exec.Command(argv[0], argv[1:]...)
	c.cmd.Dir = dir
	c.cmd.Stderr = c.out
	c.cmd.SysProcAttr = sysProcAttr()
	var err error
	if c.in, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("clients: starting %s: %v", kind, err)
	}
	go func() {
		sc := testutil.Lines(stdout, 4<<20)
		for sc.Scan() {
			c.out.Write(append(sc.Bytes(), '\n'))
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				c.events <- m
			}
		}
		close(c.events)
	}()
	go func() { _ = c.cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			t.Logf("clients: the %s client's output:\n%s", kind, c.out.String())
		}
	})
	return c
}

// scripts counts the copies of client.mjs, to name each its own.
var scripts atomic.Int64

// program is the command line that runs kind with args, and the directory
// it runs in; Unavailable when this machine lacks it.
func program(t testing.TB, kind Kind, args []string) (argv []string, dir string) {
	t.Helper()
	src := filepath.Join(testutil.Root(), "test", "clients")
	switch kind {
	case Node, NodeDiscover:
		modules := testutil.Program(t, EnvNPMClients, "npm clients")
		node := testutil.Installed(t, "node", "the npm clients run in it")
		// An ES module resolves its imports from its own directory: the
		// script runs from beside node_modules, a copy per client so that
		// one test's cleanup never removes another's.
		b, err := os.ReadFile(filepath.Join(src, "node", "client.mjs"))
		if err != nil {
			t.Fatal(err)
		}
		script := filepath.Join(modules, fmt.Sprintf("client-%d-%d.mjs", os.Getpid(), scripts.Add(1)))
		if err := os.WriteFile(script, b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(script) })
		mode := "nodes"
		if kind == NodeDiscover {
			mode = "discover"
		}
		return append([]string{node, script, mode}, args...), modules
	case Dskit, Gomemcache:
		bin := testutil.Program(t, EnvGoClients, "Go clients (memclient: dskit, gomemcache)")
		return append([]string{bin, string(kind)}, args...), ""
	case Pymemcache:
		if out, err := exec.Command(Python, "-c", "import pymemcache").CombinedOutput(); err != nil {
			testutil.Unavailable(t, fmt.Sprintf("no pymemcache for %s: %v %s(make debian-clients installs python3-pymemcache)", Python, err, out))
		}
		return append([]string{Python, filepath.Join(src, "python", "client.py"), "nodes"}, args...), ""
	case PHPMemcached:
		php := testutil.Installed(t, "php", "PHP's memcached client runs in it (make debian-clients installs php-cli)")
		if out, err := exec.Command(php, "-r", `exit(class_exists("Memcached") ? 0 : 1);`).CombinedOutput(); err != nil {
			testutil.Unavailable(t, fmt.Sprintf("no memcached extension in %s: %v %s(make debian-clients installs php-memcached)", php, err, out))
		}
		return append([]string{php, filepath.Join(src, "php", "client.php"), "nodes"}, args...), ""
	}
	t.Fatalf("clients: unknown kind %q", kind)
	return nil, ""
}

// isolate writes opts' files and returns argv run in a mount namespace of
// its own (util-linux's unshare; private propagation, so nothing reaches
// the machine's) where they are bind-mounted over /etc/hosts and
// /etc/resolv.conf. /etc/nsswitch.conf, where the machine has one, is
// bound to "hosts: files dns" as well, as in the Debian and Alpine images
// clients run from: a desktop's mdns4_minimal would answer for
// cluster.local itself. The client's process is the one argv starts
// (unshare and sh exec it), so its PID and parent-death signal are its own.
func (c *Client) isolate(t testing.TB, opts Options, argv []string) []string {
	t.Helper()
	if runtime.GOOS != "linux" {
		testutil.Unavailable(t, "clients: Options.Hosts and ResolvConf need Linux's mount namespaces")
	}
	if os.Geteuid() != 0 {
		testutil.Unavailable(t, "clients: Options.Hosts and ResolvConf need root, for a mount namespace of the client's own")
	}
	unshare := testutil.Installed(t, "unshare", "it runs a client in a mount namespace of its own (util-linux)")
	testutil.Installed(t, "mount", "it binds a client's /etc/hosts and /etc/resolv.conf (util-linux)")
	dir := t.TempDir()
	write := func(name, content string) string {
		if content == "" {
			return ""
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c.hosts, c.resolvConf = write("hosts", opts.Hosts), write("resolv.conf", opts.ResolvConf)
	nsswitch := ""
	if _, err := os.Stat("/etc/nsswitch.conf"); err == nil {
		nsswitch = write("nsswitch.conf", "hosts: files dns\n")
	}
	const script = `set -e
bind() { if [ -n "$1" ]; then mount --bind "$1" "$2"; fi; }
bind "$1" /etc/hosts
bind "$2" /etc/resolv.conf
bind "$3" /etc/nsswitch.conf
shift 3
exec "$@"`
	return append([]string{unshare, "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", c.hosts, c.resolvConf, nsswitch}, argv...)
}

// SetHosts rewrites the client's /etc/hosts (Options.Hosts) in place, as
// the bind mount shows the same file: the next lookup the client makes
// sees it (Go's resolver rereads it at most 5 s later).
func (c *Client) SetHosts(t testing.TB, hosts string) {
	t.Helper()
	c.rewrite(t, c.hosts, "Options.Hosts", hosts)
}

// SetResolvConf rewrites the client's /etc/resolv.conf (Options.ResolvConf)
// in place.
func (c *Client) SetResolvConf(t testing.TB, conf string) {
	t.Helper()
	c.rewrite(t, c.resolvConf, "Options.ResolvConf", conf)
}

func (c *Client) rewrite(t testing.TB, path, what, content string) {
	t.Helper()
	if path == "" {
		t.Fatalf("clients: the %s client was started without %s", c.kind, what)
	}
	// Truncated and written, never replaced: the mount holds the inode.
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Kind is the client's kind.
func (c *Client) Kind() Kind { return c.kind }

// PID is the client's process ID.
func (c *Client) PID() int { return c.cmd.Process.Pid }

// Output is what the client wrote so far, standard output and error.
func (c *Client) Output() string { return c.out.String() }

// Stop ends the client (quit, then SIGKILL after 5 s) and waits for it.
// Cleanup calls it too; a second call does nothing.
func (c *Client) Stop() {
	c.stop.Do(func() {
		_, _ = io.WriteString(c.in, `{"op":"quit"}`+"\n")
		select {
		case <-c.exited:
		case <-time.After(5 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.exited
		}
	})
}

// Counts is a set's or a get's answer.
type Counts struct {
	OK     int `json:"ok"`
	Hits   int `json:"hits"`
	Misses int `json:"misses"`
	Errors int `json:"errors"`
	// Stale are the hits of a GetExpect whose value was not the one
	// expected; Previous, those of them that had the value given as the
	// one before it (GetExpectAfter).
	Stale    int `json:"stale"`
	Previous int `json:"previous"`
	// Stuck are the operations counted in Errors because they had not
	// settled by the client's deadline (the npm client's: see its
	// client.mjs, for a library bug that leaves one pending forever).
	Stuck int `json:"stuck"`
}

// Set stores the keys prefix0 … prefix(n-1), each a value of size bytes
// (100 when size is 0).
func (c *Client) Set(t testing.TB, prefix string, n, size int) Counts {
	t.Helper()
	return c.counts(t, map[string]any{"op": "set", "prefix": prefix, "n": n, "size": size})
}

// Get fetches the keys prefix0 … prefix(n-1).
func (c *Client) Get(t testing.TB, prefix string, n int) Counts {
	t.Helper()
	return c.counts(t, map[string]any{"op": "get", "prefix": prefix, "n": n})
}

// SetValue stores value under the keys prefix0 … prefix(n-1).
func (c *Client) SetValue(t testing.TB, prefix string, n int, value string) Counts {
	t.Helper()
	return c.counts(t, map[string]any{"op": "set", "prefix": prefix, "n": n, "value": value})
}

// GetExpect fetches the keys prefix0 … prefix(n-1) and counts as Stale
// each hit whose value is not expect: after a SetValue of expect that
// every key acknowledged, a stale hit is a value older than one the cache
// acknowledged.
func (c *Client) GetExpect(t testing.TB, prefix string, n int, expect string) Counts {
	t.Helper()
	return c.counts(t, map[string]any{"op": "get", "prefix": prefix, "n": n, "expect": expect})
}

// GetExpectAfter is GetExpect, and counts as Previous too each stale hit
// whose value is previous: the value the keys had before expect was
// written, one write behind rather than older.
func (c *Client) GetExpectAfter(t testing.TB, prefix string, n int, expect, previous string) Counts {
	t.Helper()
	return c.counts(t, map[string]any{"op": "get", "prefix": prefix, "n": n, "expect": expect, "previous": previous})
}

func (c *Client) counts(t testing.TB, cmd map[string]any) Counts {
	t.Helper()
	res := c.Do(t, cmd)
	b, _ := json.Marshal(res)
	var n Counts
	if err := json.Unmarshal(b, &n); err != nil {
		t.Fatalf("clients: the %s client answered %s: %v", c.kind, b, err)
	}
	return n
}

// Nodes are the servers the client hashes keys over now, in its order:
// IP:port for the Go clients and the npm client with discovery, the
// names as given for the others (they resolve a name when they connect).
func (c *Client) Nodes(t testing.TB) []string {
	t.Helper()
	var nodes []string
	for _, n := range c.Do(t, map[string]any{"op": "nodes"})["nodes"].([]any) {
		nodes = append(nodes, n.(string))
	}
	return nodes
}

// Do sends a command and returns its answer (the next line with its op),
// keeping the events it reads meanwhile for Next. Numbers are float64.
func (c *Client) Do(t testing.TB, cmd map[string]any) map[string]any {
	t.Helper()
	b, _ := json.Marshal(cmd)
	if _, err := c.in.Write(append(b, '\n')); err != nil {
		t.Fatalf("clients: the %s client: %v", c.kind, err)
	}
	timeout := time.After(2 * time.Minute)
	var skipped []map[string]any
	defer func() {
		for _, e := range skipped {
			c.events <- e
		}
	}()
	for {
		select {
		case m, ok := <-c.events:
			if !ok {
				t.Fatalf("clients: the %s client exited: %s", c.kind, c.out.String())
			}
			if m["op"] == cmd["op"] {
				return m
			}
			skipped = append(skipped, m)
		case <-timeout:
			t.Fatalf("clients: no answer to %s from the %s client: %s", b, c.kind, c.out.String())
		}
	}
}

// Next returns the next event for which match holds, waiting up to
// timeout; other events are dropped.
func (c *Client) Next(t testing.TB, timeout time.Duration, match func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case m, ok := <-c.events:
			if !ok {
				t.Fatalf("clients: the %s client exited: %s", c.kind, c.out.String())
			}
			if match(m) {
				return m
			}
		case <-deadline:
			t.Fatalf("clients: no matching event from the %s client within %s: %s", c.kind, timeout, c.out.String())
		}
	}
}

// HostsFile is an /etc/hosts naming each IP (ipByName: name → IP), sorted
// by name, after localhost's line.
func HostsFile(ipByName map[string]string) string {
	var b strings.Builder
	b.WriteString("127.0.0.1\tlocalhost\n")
	for _, name := range slices.Sorted(maps.Keys(ipByName)) {
		fmt.Fprintf(&b, "%s\t%s\n", ipByName[name], name)
	}
	return b.String()
}

// PodResolvConf is the /etc/resolv.conf kubelet writes for a Pod of
// namespace with dnsPolicy ClusterFirst, the cluster's DNS at nameserver
// and the cluster domain cluster.local: a client in a test resolves
// cache-0.cache-slots (and the SRV name) as one in that Pod does.
func PodResolvConf(nameserver, namespace string) string {
	return fmt.Sprintf("search %s.svc.cluster.local svc.cluster.local cluster.local\nnameserver %s\noptions ndots:5\n", namespace, nameserver)
}
