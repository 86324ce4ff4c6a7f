package sync_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/example/memcached-operator/sync"
)

// bigCapture is the capture bigRequest grows: hook v2, five ready Pods.
const bigCapture = "v2/0016-sync.json"

// podNameAlphabet is the alphabet of the random suffixes Kubernetes gives
// generated names.
const podNameAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// bigRequest grows a captured hook v2 sync request to n related Pods, all
// ready, by cloning one of its real Pods (managedFields and all, the full
// shape Metacontroller sends) under unique names, UIDs and IPs; for n below
// the capture's count it keeps the first n Pods by key. The spec asks for n
// Pods, or sync.MaxSize if n is more, so that the spec stays valid and every
// size takes the same path through the hook. It returns the request body.
func bigRequest(tb testing.TB, rel string, n int) []byte {
	tb.Helper()
	c := loadCapture(tb, rel)
	var req map[string]any
	if err := json.Unmarshal(c.Request, &req); err != nil {
		tb.Fatal(err)
	}
	pods, _ := req["related"].(map[string]any)[sync.PodKey].(map[string]any)
	if len(pods) == 0 || n < 1 {
		tb.Fatalf("%s has %d Pods; want at least 1, and n (%d) at least 1", rel, len(pods), n)
	}
	for _, key := range slices.Sorted(maps.Keys(pods))[min(n, len(pods)):] {
		delete(pods, key)
	}
	template, err := json.Marshal(pods[slices.Sorted(maps.Keys(pods))[0]])
	if err != nil {
		tb.Fatal(err)
	}
	var tmpl map[string]any
	if err := json.Unmarshal(template, &tmpl); err != nil {
		tb.Fatal(err)
	}
	generateName := getString(tmpl, "metadata", "generateName")
	oldIP := getString(tmpl, "status", "podIP")
	if generateName == "" || oldIP == "" {
		tb.Fatalf("%s: the template Pod has no generateName or podIP", rel)
	}

	for i := 0; len(pods) < n; i++ {
		var p map[string]any
		if err := json.Unmarshal(template, &p); err != nil {
			tb.Fatal(err)
		}
		name := generateName + podSuffix(i)
		ip := fmt.Sprintf("10.64.%d.%d", i/250, i%250+1)
		meta := getObject(p, "metadata")
		meta["name"] = name
		meta["uid"] = fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
		meta["resourceVersion"] = fmt.Sprint(10000 + i)
		status := getObject(p, "status")
		status["podIP"] = ip
		status["podIPs"] = []any{map[string]any{"ip": ip}}
		// The kubelet's managedFields entry names the IP in a key.
		fields, _ := meta["managedFields"].([]any)
		for _, f := range fields {
			podIPs := getObject(f, "fieldsV1", "f:status", "f:podIPs")
			oldKey := `k:{"ip":"` + oldIP + `"}`
			if v, ok := podIPs[oldKey]; ok {
				delete(podIPs, oldKey)
				podIPs[`k:{"ip":"`+ip+`"}`] = v
			}
		}
		key := getString(meta, "namespace") + "/" + name
		if _, dup := pods[key]; dup {
			tb.Fatalf("Pod %s made twice", key)
		}
		pods[key] = p
	}
	getObject(req, "parent", "spec")["size"] = min(n, sync.MaxSize)
	body, err := json.Marshal(req)
	if err != nil {
		tb.Fatal(err)
	}
	return body
}

// podSuffix is the i-th five-character suffix of a generated Pod name.
func podSuffix(i int) string {
	b := make([]byte, 5)
	for j := len(b) - 1; j >= 0; j-- {
		b[j] = podNameAlphabet[i%len(podNameAlphabet)]
		i /= len(podNameAlphabet)
	}
	return string(b)
}

// TestThousandPods answers a request with 1,000 real-shaped Pods: every one
// is a node, sorted, and an endpoint. It logs the request's size, which the
// HTTP layer's request size limit must allow.
func TestThousandPods(t *testing.T) {
	const n = 1000
	body := bigRequest(t, bigCapture, n)
	t.Logf("a sync request with %d Pods is %d bytes (%.1f MiB)", n, len(body), float64(len(body))/(1<<20))

	var names []string
	for key := range getObject(decodeObject(t, body), "related", sync.PodKey) {
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
