package testutil

import (
	"time"

	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/slots"
)

// ManagedKinds are the children map keys of every kind the
// CompositeController may manage, the optional ones included.
var ManagedKinds = []string{
	"Deployment.apps/v1",
	"Service.v1",
	"PodDisruptionBudget.policy/v1",
	"ServiceMonitor.monitoring.coreos.com/v1",
	"NetworkPolicy.networking.k8s.io/v1",
	"ServiceAccount.v1",
	"Role.rbac.authorization.k8s.io/v1",
	"RoleBinding.rbac.authorization.k8s.io/v1",
	"ConfigMap.v1",
	"EndpointSlice.discovery.k8s.io/v1",
}

// FirstSync is the first sync request Metacontroller sends for parent (a
// Memcached as a generic object): nothing observed yet, every kind managed.
func FirstSync(parent map[string]any) map[string]any {
	children := map[string]any{}
	for _, k := range ManagedKinds {
		children[k] = map[string]any{}
	}
	return map[string]any{
		"controller": map[string]any{},
		"parent":     parent,
		"children":   children,
		"related":    map[string]any{"Pod.v1": map[string]any{}},
		"finalizing": false,
	}
}

// BigCapture is the capture BigRequest grows: hook v2, five ready Pods.
const BigCapture = "v2/0016-sync.json"

// podNameAlphabet is the alphabet of the random suffixes Kubernetes gives
// generated names.
const podNameAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// BigRequest grows BigCapture to n related Pods, all ready, by cloning one
// of its real Pods (managedFields and all, the full shape Metacontroller
// sends) under unique names, UIDs and IPs; for n below the capture's count
// it keeps the first n Pods by key. The parent's status holds the slot
// table of those Pods, as a converged Memcached's does. The spec asks for n Pods, or the most
// spec.size allows if n is more, so that the spec stays valid and every size
// takes the same path through the hook.
func BigRequest(tb testing.TB, n int) []byte {
	tb.Helper()
	req := DecodeObject(tb, LoadCapture(tb, BigCapture).Request)
	pods := GetObject(req, "related", "Pod.v1")
	if len(pods) == 0 || n < 1 {
		tb.Fatalf("%s has %d Pods; want at least 1, and n (%d) at least 1", BigCapture, len(pods), n)
	}
	for _, key := range slices.Sorted(maps.Keys(pods))[min(n, len(pods)):] {
		delete(pods, key)
	}
	template := MustMarshal(tb, pods[slices.Sorted(maps.Keys(pods))[0]])
	tmpl := DecodeObject(tb, template)
	generateName := GetString(tmpl, "metadata", "generateName")
	oldIP := GetString(tmpl, "status", "podIP")
	if generateName == "" || oldIP == "" {
		tb.Fatalf("%s: the template Pod has no generateName or podIP", BigCapture)
	}
	for i := 0; len(pods) < n; i++ {
		p := DecodeObject(tb, template)
		name := generateName + podSuffix(i)
		ip := fmt.Sprintf("10.64.%d.%d", i/250, i%250+1)
		meta := GetObject(p, "metadata")
		meta["name"] = name
		meta["uid"] = fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
		meta["resourceVersion"] = fmt.Sprint(10000 + i)
		status := GetObject(p, "status")
		status["podIP"] = ip
		status["podIPs"] = []any{map[string]any{"ip": ip}}
		// The kubelet's managedFields entry names the IP in a key.
		fields, _ := meta["managedFields"].([]any)
		for _, f := range fields {
			podIPs := GetObject(f, "fieldsV1", "f:status", "f:podIPs")
			oldKey := `k:{"ip":"` + oldIP + `"}`
			if v, ok := podIPs[oldKey]; ok {
				delete(podIPs, oldKey)
				podIPs[`k:{"ip":"`+ip+`"}`] = v
			}
		}
		key := GetString(meta, "namespace") + "/" + name
		if _, dup := pods[key]; dup {
			tb.Fatalf("Pod %s made twice", key)
		}
		pods[key] = p
	}
	GetObject(req, "parent", "spec")["size"] = min(n, maxSize())
	// A converged Memcached's status holds the slot table the last sync
	// wrote: the table every sync starts from.
	var list []slots.Pod
	for _, p := range pods {
		list = append(list, slots.Pod{Name: GetString(p, "metadata", "name"), IP: GetString(p, "status", "podIP"), Ready: true})
	}
	size := int32(min(n, maxSize()))
	table := slots.Assign(v1alpha1.SlotTable{}, size, list, time.Unix(1795300000, 0)).Slots
	parent := GetObject(req, "parent")
	st, _ := parent["status"].(map[string]any)
	if st == nil {
		st = map[string]any{}
		parent["status"] = st
	}
	st["slotTable"] = v1alpha1.SlotTable{Version: 1795300000, Slots: table}
	body, err := json.Marshal(req)
	if err != nil {
		tb.Fatal(err)
	}
	return body
}

// maxSize is the most spec.size allows.
func maxSize() int {
	for _, s := range v1alpha1.Settings {
		if is, ok := s.(v1alpha1.IntSetting); ok && is.Path == "size" {
			return int(is.Max)
		}
	}
	panic("no size setting")
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
