package kube_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/example/memcached-operator/test/kube"
)

// TestStart starts a cluster and proves kubectl can talk to it.
func TestStart(t *testing.T) {
	c := kube.Start(t, kube.Options{})

	stdout, stderr, err := c.Kubectl("get", "--raw", "/readyz")
	if err != nil {
		t.Fatalf("kubectl get --raw /readyz: %v\nstderr: %s", err, stderr)
	}
	if strings.TrimSpace(stdout) != "ok" {
		t.Errorf("kubectl get --raw /readyz = %q, want ok", stdout)
	}

	if _, stderr, err := c.Kubectl("create", "namespace", "x"); err != nil {
		t.Fatalf("kubectl create namespace x: %v\nstderr: %s", err, stderr)
	}
	stdout, stderr, err = c.Kubectl("get", "namespace", "x", "-o", "jsonpath={.status.phase}")
	if err != nil {
		t.Fatalf("kubectl get namespace x: %v\nstderr: %s", err, stderr)
	}
	if stdout != "Active" {
		t.Errorf("namespace x phase = %q, want Active", stdout)
	}

	// Without a controller manager the ServiceAccount admission plugin
	// would reject every Pod; check that it is off.
	pod := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"x"},
"spec":{"containers":[{"name":"c","image":"memcached:1.6"}]}}`)
	if _, stderr, err := c.KubectlStdin(pod, "create", "--dry-run=server", "-f", "-"); err != nil {
		t.Fatalf("kubectl create --dry-run=server pod: %v\nstderr: %s", err, stderr)
	}

	if c.Kubeconfig() == "" {
		t.Error("Kubeconfig() is empty")
	}
}

func TestMain(m *testing.M) { kube.Main(m) }

// TestShared checks that Shared hands every test the same running cluster.
func TestShared(t *testing.T) {
	c := kube.Shared(t, kube.Options{})
	t.Run("again", func(t *testing.T) {
		if c2 := kube.Shared(t, kube.Options{}); c2 != c {
			t.Errorf("second Shared call returned %p, want the first cluster %p", c2, c)
		}
		stdout, stderr, err := c.Kubectl("get", "--raw", "/readyz")
		if err != nil || strings.TrimSpace(stdout) != "ok" {
			t.Errorf("kubectl get --raw /readyz = %q, %v; stderr: %s", stdout, err, stderr)
		}
	})
}

// TestLaunch starts a cluster without a testing.TB, as make up does, and
// proves that Stop leaves none of its processes running.
func TestLaunch(t *testing.T) {
	kube.RequirePrograms(t, kube.Options{})
	progs, err := kube.ProgramsFromEnv(os.Getenv, kube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		logged []string
	)
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, fmt.Sprintf(format, args...))
	}
	c, err := kube.Launch(context.Background(), kube.Config{Dir: t.TempDir(), Programs: progs, Logf: logf})
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	defer c.Stop()
	if stdout, stderr, err := c.Kubectl("get", "--raw", "/readyz"); err != nil || strings.TrimSpace(stdout) != "ok" {
		t.Errorf("kubectl get --raw /readyz = %q, %v; stderr: %s", stdout, err, stderr)
	}
	if err := c.Exited(); err != nil {
		t.Errorf("Exited() on a running cluster = %v, want nil", err)
	}
	// The zones' proxy Service asks for trafficDistribution, which a 1.30
	// API server drops unless its feature gate is on.
	const svc = `{"apiVersion":"v1","kind":"Service","metadata":{"name":"close","namespace":"default"},` +
		`"spec":{"ports":[{"port":11211}],"trafficDistribution":"PreferClose"}}`
	if stdout, stderr, err := c.KubectlStdin([]byte(svc), "create", "-f", "-", "-o", "jsonpath={.spec.trafficDistribution}"); err != nil || stdout != "PreferClose" {
		t.Errorf("a Service created with trafficDistribution PreferClose is stored with %q (%v; stderr: %s), want PreferClose", stdout, err, stderr)
	}
	mu.Lock()
	if !strings.Contains(strings.Join(logged, "\n"), "etcd and kube-apiserver ready at "+c.Server()) {
		t.Errorf("Launch logged %q, want the API server's readiness", logged)
	}
	mu.Unlock()

	pids := c.PIDs()
	if len(pids) != 2 {
		t.Errorf("PIDs() = %v, want etcd and kube-apiserver", pids)
	}
	c.Stop()
	checkGone(t, pids)
	if err := c.Exited(); err == nil {
		t.Error("Exited() after Stop = nil, want an error naming a process")
	}
}

// TestLaunchCancelled checks that a context ended during start-up stops
// what had started, and that Launch says so.
func TestLaunchCancelled(t *testing.T) {
	kube.RequirePrograms(t, kube.Options{})
	progs, err := kube.ProgramsFromEnv(os.Getenv, kube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c, err := kube.Launch(ctx, kube.Config{Dir: t.TempDir(), Programs: progs})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Launch with an ended context = %v, want context.Canceled", err)
	}
	if c == nil {
		t.Fatal("Launch returned no Cluster: nothing tells where the logs are")
	}
	if c.LogPath("kube-apiserver") == "" {
		t.Error(`LogPath("kube-apiserver") = "", want its log file`)
	}
	checkGone(t, c.PIDs())
}

// checkGone fails t for every process of pids that still exists.
func checkGone(t *testing.T, pids map[string]int) {
	t.Helper()
	if runtime.GOOS != "linux" {
		return
	}
	for name, pid := range pids {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			t.Errorf("%s (pid %d) still exists after Stop", name, pid)
		}
	}
}

// TestProgramsMissing checks that Launch refuses Programs that lack one
// the Options need, naming it, before it starts anything.
func TestProgramsMissing(t *testing.T) {
	progs := kube.Programs{APIServer: "/x/kube-apiserver", Etcd: "/x/etcd", Kubectl: "/x/kubectl"}
	_, err := kube.Launch(context.Background(), kube.Config{Dir: t.TempDir(), Programs: progs, Options: kube.Options{Metacontroller: true}})
	if err == nil || !strings.Contains(err.Error(), "Metacontroller") {
		t.Errorf("Launch without a Metacontroller program = %v, want an error naming Metacontroller", err)
	}
}
