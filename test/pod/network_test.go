//go:build linux

package pod

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/example/memcached-operator/test/testutil"
)

// memcachedUser is the user the test Pods run as (the official image's).
const memcachedUser = 11211

// testPod is a Pod template of the given containers, as memcachedUser.
func testPod(grace int64, containers ...corev1.Container) corev1.PodTemplateSpec {
	uid := int64(memcachedUser)
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		SecurityContext:               &corev1.PodSecurityContext{RunAsUser: &uid, RunAsGroup: &uid},
		TerminationGracePeriodSeconds: &grace,
		Containers:                    containers,
	}}
}

// memcachedContainer runs memcached on port, on every address (no -l), as
// the hook's template does.
func memcachedContainer(name string, port int) corev1.Container {
	return corev1.Container{Name: name, Image: "memcached:1.6.45", Args: []string{"-p", strconv.Itoa(port)}}
}

// version asks memcached at addr (from the test process) for its version.
func version(addr string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, "version\r\n"); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(line), err
}

// waitVersion waits for memcached at addr to answer.
func waitVersion(t *testing.T, addr string) string {
	t.Helper()
	var got string
	var err error
	if !testutil.Poll(20*time.Second, func() bool {
		got, err = version(addr)
		return err == nil
	}) {
		t.Fatalf("memcached at %s does not answer: %v", addr, err)
	}
	return got
}

// TestPodNetwork runs two Pods at once: each has its own address in the
// chosen range, on a /30 of its own, that touches no route of the machine
// but its own; memcached, listening on every address of the Pod, answers
// the test process there; a Pod reaches the machine at its HostIP; a Pod
// does not reach the other.
func TestPodNetwork(t *testing.T) {
	a := Run(t, testPod(30, memcachedContainer("memcached", 11211)), Options{})
	b := Run(t, testPod(30, memcachedContainer("memcached", 11211)), Options{})
	for _, p := range []*Pod{a, b} {
		ip, err := netip.ParseAddr(p.IP())
		if err != nil {
			t.Fatalf("Pod IP %q: %v", p.IP(), err)
		}
		if !podRange.prefix.Contains(ip) || !p.net.subnet.Contains(ip) || p.net.subnet.Bits() != 30 {
			t.Errorf("Pod IP %s is not in its /30 %s of the range %s", ip, p.net.subnet, podRange.prefix)
		}
		if got, want := p.Addr(11211), net.JoinHostPort(p.IP(), "11211"); got != want {
			t.Errorf("Addr(11211) = %q, want %q", got, want)
		}
		if got := waitVersion(t, p.Addr(11211)); got != "VERSION 1.6.45" {
			t.Errorf("memcached at %s: %q, want VERSION 1.6.45", p.Addr(11211), got)
		}
		t.Logf("Pod at %s (host end %s, %s), range %s", p.IP(), p.net.iface, p.HostIP(), podRange.prefix)
	}
	if a.net.subnet.Overlaps(b.net.subnet) {
		t.Errorf("the Pods' subnets overlap: %s and %s", a.net.subnet, b.net.subnet)
	}

	t.Run("no other route touches a Pod's subnet", func(t *testing.T) {
		rs, err := routes(a.net.ip)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []*Pod{a, b} {
			for _, r := range rs {
				if dst, ok := r.prefix(); ok && dst.Overlaps(p.net.subnet) && r.Dev != p.net.iface && !r.isRangeRoute() {
					t.Errorf("route %s overlaps the Pod's %s", r, p.net.subnet)
				}
			}
		}
	})

	// The range's unreachable route does not make it taken: a test
	// process starting now chooses the same range.
	t.Run("the range is unreachable where no Pod is", func(t *testing.T) {
		rs, err := routes(a.net.ip)
		if err != nil {
			t.Fatal(err)
		}
		want := route{Dst: podRange.prefix.String(), Type: "unreachable", Metric: unreachableMetric}
		if !slices.ContainsFunc(rs, func(r route) bool { return r.isRangeRoute() && r.Dst == want.Dst }) {
			t.Errorf("no route %s among the machine's", want)
		}
		if got, err := chooseRange(a.net.ip); err != nil || got != podRange.prefix {
			t.Errorf("chooseRange() = %v, %v; want %s, the range the Pods have", got, err, podRange.prefix)
		}
	})

	t.Run("a Pod reaches the machine at its HostIP", func(t *testing.T) {
		l, err := net.Listen("tcp", net.JoinHostPort(a.HostIP(), "0"))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		got := make(chan string, 1)
		go func() {
			conn, err := l.Accept()
			if err != nil {
				got <- err.Error()
				return
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			line, _ := bufio.NewReader(conn).ReadString('\n')
			got <- strings.TrimSpace(line) + " from " + conn.RemoteAddr().(*net.TCPAddr).IP.String()
		}()
		port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
		if code, out := a.Exec("memcached", []string{"sh", "-c", "echo hello | nc -w 2 " + a.HostIP() + " " + port}, 10*time.Second); code != 0 {
			t.Fatalf("nc from the Pod to %s:%s: exit %d\n%s", a.HostIP(), port, code, out)
		}
		if g, want := <-got, "hello from "+a.IP(); g != want {
			t.Errorf("the machine got %q, want %q", g, want)
		}
	})

	t.Run("a Pod does not reach another", func(t *testing.T) {
		err := a.inNetns(func() error {
			conn, err := net.DialTimeout("tcp", b.Addr(11211), 2*time.Second)
			if err == nil {
				conn.Close()
			}
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "network is unreachable") {
			t.Errorf("dialing %s from the other Pod: %v, want network is unreachable", b.Addr(11211), err)
		}
	})
}

// TestEndedPodUnreachable ends a Pod each way a test ends one, and dials
// its address: the connection fails at once with no route to host, as it
// does to a gone Pod's address in a cluster, and a client marks the
// server failed. Were the address the machine's default route's, whatever
// answers there on some machines would accept it (and answer HTTP 400, or
// nothing), and a client that looks a server's name up again only once
// connecting fails (libmemcached) would keep sending to the ended Pod.
func TestEndedPodUnreachable(t *testing.T) {
	for _, tt := range []struct {
		name string
		end  func(p *Pod)
	}{
		{"Terminate", func(p *Pod) { p.Terminate() }},
		{"Kill", func(p *Pod) { p.Kill() }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := Run(t, testPod(30, memcachedContainer("memcached", 11211)), Options{})
			waitVersion(t, p.Addr(11211))
			tt.end(p) // returns once the Pod's interface and routes are gone
			conn, err := net.DialTimeout("tcp", p.Addr(11211), 5*time.Second)
			if err == nil {
				conn.Close()
			}
			if !errors.Is(err, syscall.EHOSTUNREACH) {
				// Another Pod takes the slot in between only by chance:
				// a Pod starts at a random one of the range's slots.
				_, taken := ifindex(p.net.iface)
				t.Errorf("dialing the ended Pod's %s: %v, want no route to host (EHOSTUNREACH); the slot's interface %s exists again: %v",
					p.Addr(11211), err, p.net.iface, taken == nil)
			}
		})
	}
}

// TestNothingLeftBehind ends a Pod every way a test can end one, and every
// way a test process can end, and checks that its veth pair and routes
// are gone from the machine, and its processes.
func TestNothingLeftBehind(t *testing.T) {
	inProcess := []struct {
		name string
		end  func(p *Pod)
	}{
		{"Terminate", func(p *Pod) { p.Terminate() }},
		{"Kill", func(p *Pod) { p.Kill() }},
		{"the test's cleanup", nil},
	}
	for _, tt := range inProcess {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var n network
			var pid int
			t.Run("pod", func(t *testing.T) {
				p := Run(t, testPod(30, memcachedContainer("memcached", 11211)), Options{})
				waitVersion(t, p.Addr(11211))
				n, pid = *p.net, p.Container("memcached").PID(t)
				if tt.end != nil {
					tt.end(p)
				}
			})
			checkGone(t, &n, pid)
		})
	}

	for _, mode := range []string{"exit", "panic", "sigkill"} {
		t.Run("test process ends: "+mode, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperPod$", "-test.v")
			cmd.Env = append(os.Environ(), helperEnv+"="+mode)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var output, stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var n network
			var pid int
			var dir string
			scanner := bufio.NewScanner(stdout)
			for scanner.Scan() {
				line := scanner.Text()
				output.WriteString(line + "\n")
				if rest, ok := strings.CutPrefix(line, "helper pod: "); ok {
					var subnet string
					if _, err := fmt.Sscan(rest, &n.iface, &n.ifindex, &subnet, &pid, &dir); err != nil {
						t.Fatalf("%q: %v", line, err)
					}
					n.subnet, n.ip = netip.MustParsePrefix(subnet), "ip"
					if mode == "sigkill" {
						cmd.Process.Signal(syscall.SIGKILL)
					}
				}
			}
			err = cmd.Wait()
			if pid == 0 {
				t.Fatalf("the helper started no Pod (%v):\n%s%s", err, output.String(), stderr.String())
			}
			t.Logf("helper: %v", err)
			began := time.Now()
			checkGone(t, &n, pid)
			testutil.Benchmark("BenchmarkPodGoneAfterTestProcess/"+mode, "%.1f ms", float64(time.Since(began).Microseconds())/1000)
			// The Pod's files are the test's cleanup's to remove, which a
			// killed process does not run.
			if _, err := os.Stat(dir); err == nil && mode != "sigkill" {
				t.Errorf("the Pod's directory %s is left", dir)
			}
			os.RemoveAll(dir)
		})
	}
}

// helperEnv tells TestHelperPod how to end.
const helperEnv = "POD_TEST_HELPER"

// TestHelperPod, run by TestNothingLeftBehind in a process of its own,
// starts a Pod, prints its host interface, the index of that interface,
// its subnet, memcached's PID and the Pod's directory, and ends as told:
// returns, panics, or waits to be killed.
func TestHelperPod(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("a helper of TestNothingLeftBehind")
	}
	p := Run(t, testPod(30, memcachedContainer("memcached", 11211)), Options{})
	waitVersion(t, p.Addr(11211))
	fmt.Printf("helper pod: %s %d %s %d %s\n", p.net.iface, p.net.ifindex, p.net.subnet, p.Container("memcached").PID(t), p.dir)
	switch mode {
	case "panic":
		panic("on purpose")
	case "sigkill":
		time.Sleep(time.Minute)
	}
}

// checkGone checks that a Pod's interface, its routes and memcached are
// gone, waiting a while for the kernel.
func checkGone(t *testing.T, n *network, pid int) {
	t.Helper()
	if left := n.leftovers(10 * time.Second); len(left) > 0 {
		t.Errorf("left on the machine: %s", strings.Join(left, "; "))
	}
	if !testutil.Poll(10*time.Second, func() bool {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		return err != nil || filepath.Base(exe) != filepath.Base(os.Getenv(EnvMemcached))
	}) {
		t.Errorf("memcached (PID %d) still runs", pid)
	}
}
