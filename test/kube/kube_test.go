package kube_test

import (
	"strings"
	"testing"

	"github.com/example/memcached-operator/test/kube"
)

// TestStart starts a cluster and proves kubectl can talk to it.
func TestStart(t *testing.T) {
	c := kube.Start(t)

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
	c := kube.Shared(t)
	t.Run("again", func(t *testing.T) {
		if c2 := kube.Shared(t); c2 != c {
			t.Errorf("second Shared call returned %p, want the first cluster %p", c2, c)
		}
		stdout, stderr, err := c.Kubectl("get", "--raw", "/readyz")
		if err != nil || strings.TrimSpace(stdout) != "ok" {
			t.Errorf("kubectl get --raw /readyz = %q, %v; stderr: %s", stdout, err, stderr)
		}
	})
}
