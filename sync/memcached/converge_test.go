package memcached_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/example/memcached-operator/test/testutil"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestConvergence feeds each answer back as Metacontroller would (children
// observed with their last-applied annotation, status as the parent's) and
// answers again, an hour later each time. The children must never change,
// and from the second answer on the status must not change either, byte for
// byte: a status that changes on every call makes Metacontroller write it,
// and be called again, forever.
func TestConvergence(t *testing.T) {
	tests := []struct {
		name string
		body func(t *testing.T) []byte
	}{
		{"v1 first sync", func(t *testing.T) []byte { return testutil.CaptureBody(t, "v1/0002-sync.json", "sync") }},
		{"v1 rolling out", func(t *testing.T) []byte { return testutil.CaptureBody(t, "v1/0027-sync.json", "sync") }},
		{"v2 first sync", func(t *testing.T) []byte { return testutil.CaptureBody(t, "v2/0002-sync.json", "sync") }},
		{"v2 scaling up", func(t *testing.T) []byte { return testutil.CaptureBody(t, "v2/0012-sync.json", "sync") }},
		{"v2 terminating Pods", func(t *testing.T) []byte { return testutil.CaptureBody(t, "v2/0021-sync.json", "sync") }},
		{"v2 converged", func(t *testing.T) []byte { return testutil.CaptureBody(t, "v2/0040-sync.json", "sync") }},
		{"all kinds, first sync", func(t *testing.T) []byte {
			return withAllKinds(t, testutil.CaptureBody(t, "v2/0002-sync.json", "sync"))
		}},
		{"all kinds, converged", func(t *testing.T) []byte {
			return withAllKinds(t, testutil.CaptureBody(t, "v2/0040-sync.json", "sync"))
		}},
		{"all kinds, size 0", func(t *testing.T) []byte {
			return withSpec(t, withAllKinds(t, testutil.CaptureBody(t, "v2/0040-sync.json", "sync")), `{"size":0}`)
		}},
		{"all kinds, metrics and every option", func(t *testing.T) []byte {
			return withSpec(t, withAllKinds(t, testutil.CaptureBody(t, "v2/0040-sync.json", "sync")), `{
				"size": 3, "image": "memcached:1.6.39",
				"memcached": {"maxMemoryMB": 256, "maxConnections": 4096, "threads": 8, "maxItemSize": "2Mi", "verbosity": 1, "extraArgs": ["-o", "modern"]},
				"resources": {"limits": {"cpu": "2"}},
				"podLabels": {"team": "a"}, "podAnnotations": {"note": "x"},
				"nodeSelector": {"disk": "ssd"}, "priorityClassName": "high",
				"metrics": {"enabled": true}}`)
		}},
		{"invalid spec", func(t *testing.T) []byte {
			return withSpec(t, testutil.CaptureBody(t, "v2/0040-sync.json", "sync"), `{"size":-1}`)
		}},
		{"fixture with Pods of every kind", func(t *testing.T) []byte {
			return fixture{
				spec:       `{"size":3}`,
				deployment: convergedDeploy(3),
				pods: []pod{
					{name: "a", ready: true, ip: "10.1.0.1"},
					{name: "b", waiting: "CrashLoopBackOff", lastTerminated: "OOMKilled", ip: "10.1.0.2"},
					{name: "c", phase: "Pending", unschedulable: true},
					{name: "d", ready: true, ip: "10.1.0.4", deleting: true},
				},
			}.body(t)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := tt.body(t)
			now := fixedNow
			var answers []syncAnswer
			for round := range 4 {
				a := parseAnswer(t, callHook(t, "sync", body, now))
				answers = append(answers, a)
				if round > 0 {
					prev := answers[round-1]
					if !bytes.Equal(childrenBytes(t, a), childrenBytes(t, prev)) {
						t.Errorf("round %d: children changed:\n%s", round, testutil.JSONDiff(t, childrenBytes(t, a), childrenBytes(t, prev)))
					}
				}
				if round > 1 {
					prev := answers[round-1]
					if !bytes.Equal(a.statusRaw, prev.statusRaw) {
						t.Errorf("round %d: status changed (-got +previous):\n%s", round, testutil.JSONDiff(t, a.statusRaw, prev.statusRaw))
					}
				}
				body = nextRequest(t, body, a.raw)
				now = now.Add(time.Hour)
			}

			// A condition whose status never changed keeps the first
			// answer's lastTransitionTime.
			first, last := answers[0], answers[len(answers)-1]
			for _, c := range last.status.Conditions {
				if old := first.condition(t, c.Type); old.Status == c.Status && !old.LastTransitionTime.Equal(&c.LastTransitionTime) {
					t.Errorf("%s stayed %s but its lastTransitionTime moved from %v to %v", c.Type, c.Status, old.LastTransitionTime, c.LastTransitionTime)
				}
			}
		})
	}
}

// childrenBytes re-encodes an answer's children compactly, as they were
// encoded.
func childrenBytes(t *testing.T, a syncAnswer) []byte {
	t.Helper()
	return testutil.MustMarshal(t, a.childrenRaw)
}

// TestNextRequestKeepsWhatMetacontrollerRecords checks the convergence
// helper itself: an observed child carries its last-applied configuration,
// keyed namespace/name, and the parent's status is the answer's.
func TestNextRequestKeepsWhatMetacontrollerRecords(t *testing.T) {
	body := withAllKinds(t, testutil.CaptureBody(t, "v2/0040-sync.json", "sync"))
	answer := callHook(t, "sync", body, fixedNow)
	next := testutil.DecodeObject(t, nextRequest(t, body, answer))
	a := parseAnswer(t, answer)

	var gotKeys []string
	for kind, objs := range testutil.GetObject(next, "children") {
		for key := range objs.(map[string]any) {
			gotKeys = append(gotKeys, kind+" "+key)
		}
	}
	wantKeys := []string{
		"Deployment.apps/v1 cache/cache-a",
		"NetworkPolicy.networking.k8s.io/v1 cache/cache-a",
		"PodDisruptionBudget.policy/v1 cache/cache-a",
		"Service.v1 cache/cache-a",
	}
	slices.Sort(gotKeys)
	if diff := cmp.Diff(gotKeys, wantKeys); diff != "" {
		t.Errorf("observed children (-got +want):\n%s", diff)
	}
	d := testutil.GetObject(next, "children", "Deployment.apps/v1", "cache/cache-a")
	var applied map[string]any
	if err := json.Unmarshal([]byte(testutil.GetString(d, "metadata", "annotations", lastApplied)), &applied); err != nil {
		t.Fatalf("last-applied annotation: %v", err)
	}
	if testutil.GetString(applied, "metadata", "labels", "controller-uid") == "" {
		t.Error("last-applied configuration has no controller-uid label")
	}
	if _, ok := testutil.Get(d, "status", "observedGeneration"); !ok {
		t.Error("observed Deployment lost the status its controller reported")
	}
	var st struct {
		Conditions []metav1.Condition `json:"conditions"`
	}
	if err := json.Unmarshal(testutil.MustMarshal(t, testutil.GetObject(next, "parent", "status")), &st); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(st.Conditions, a.status.Conditions); diff != "" {
		t.Errorf("parent status conditions (-got +want):\n%s", diff)
	}
}
