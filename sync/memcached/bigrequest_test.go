package memcached_test

import (
	"slices"
	"testing"

	"github.com/example/memcached-operator/sync/metacontroller"
	"github.com/example/memcached-operator/test/testutil"
)

// TestThousandPods answers a request with 1,000 real-shaped Pods: every one
// is a node, sorted, and an endpoint. It logs the request's size, which the
// HTTP layer's request size limit must allow.
func TestThousandPods(t *testing.T) {
	const n = 1000
	body := testutil.BigRequest(t, n)
	t.Logf("a sync request with %d Pods is %d bytes (%.1f MiB)", n, len(body), float64(len(body))/(1<<20))

	var names []string
	for key := range testutil.GetObject(testutil.DecodeObject(t, body), "related", metacontroller.PodKey) {
		names = append(names, key[len(testNamespace)+1:])
	}
	if len(names) != n {
		t.Fatalf("request has %d Pods, want %d", len(names), n)
	}
	slices.Sort(names)

	raw := callHook(t, "sync", body, fixedNow)
	t.Logf("its answer is %d bytes", len(raw))
	checkAnswer(t, "sync", body, raw)
	a := parseAnswer(t, raw)
	st := a.status
	if len(st.Nodes) != n || !slices.IsSorted(st.Nodes) || !slices.Equal(st.Nodes, names) {
		t.Errorf("status.nodes has %d names (sorted: %v), want the %d Pod names sorted", len(st.Nodes), slices.IsSorted(st.Nodes), n)
	}
	if len(st.Endpoints) != n || !slices.IsSorted(st.Endpoints) || len(slices.Compact(slices.Clone(st.Endpoints))) != n {
		t.Errorf("status.endpoints has %d entries, want %d distinct, sorted", len(st.Endpoints), n)
	}
	if st.Replicas != n || st.ReadyReplicas != n {
		t.Errorf("replicas/readyReplicas = %d/%d, want %d/%d", st.Replicas, st.ReadyReplicas, n, n)
	}
	wantReplicas(t, a, n)
	if c := a.condition(t, "Available"); c.Status != "True" {
		t.Errorf("Available = %s %s, want True", c.Status, c.Message)
	}
}
