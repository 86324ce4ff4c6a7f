package memcached_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/sync/metacontroller"
	"github.com/example/memcached-operator/test/testutil"
)

// decodeCorpus is every request body the decoder must read exactly as
// encoding/json reads it: every capture, the captures with all child kinds,
// a grown request, and fixtures that set every field of the small Pod type.
func decodeCorpus(t *testing.T) map[string][]byte {
	t.Helper()
	corpus := map[string][]byte{}
	for _, rel := range testutil.CaptureNames(t) {
		c := testutil.LoadCapture(t, rel)
		corpus[rel] = c.Request
		if c.Hook() != "customize" {
			corpus["all kinds "+rel] = withAllKinds(t, c.Request)
		}
	}
	corpus["100 Pods"] = testutil.BigRequest(t, 100)
	troubled := []pod{
		{name: "waiting", waiting: "CrashLoopBackOff", ip: "10.1.1.1"},
		{name: "terminated", terminated: "OOMKilled", ip: "10.1.1.2"},
		{name: "last-terminated", ready: true, lastTerminated: "OOMKilled", ip: "10.1.1.3"},
		{name: "unschedulable", unschedulable: true, phase: "Pending"},
		{name: "deleting", ready: true, deleting: true, ip: "10.1.1.4"},
		{name: "elsewhere", namespace: "other", ready: true, ip: "10.1.1.5"},
		{name: "unlabelled", labels: map[string]string{}, ready: true, ip: "10.1.1.6"},
		{name: "failed", phase: "Failed"},
	}
	corpus["troubled Pods"] = fixture{pods: append(readyPods("p", 2), troubled...), deployment: convergedDeploy(3)}.body(t)
	corpus["finalizing"] = fixture{pods: readyPods("p", 1), finalizing: true}.body(t)
	return corpus
}

// referenceRequest is a sync request as encoding/json reads it: the
// reference the fast decoder must agree with.
type referenceRequest struct {
	Parent   *v1alpha1.Memcached                        `json:"parent"`
	Children map[string]map[string]metacontroller.Child `json:"children"`
	Related  struct {
		Pods map[string]metacontroller.Pod `json:"Pod.v1"`
	} `json:"related"`
	Finalizing bool `json:"finalizing"`
}

// request is what DecodeSyncRequest must give for it: the parent's
// managedFields skipped, and of its status only what the hook carries
// forward (the conditions, the slot table, the configuration endpoint).
func (r referenceRequest) request() *metacontroller.SyncRequest {
	out := &metacontroller.SyncRequest{Children: r.Children, Pods: r.Related.Pods, Finalizing: r.Finalizing}
	if r.Parent != nil {
		p := *r.Parent
		p.ManagedFields = nil
		p.Status = v1alpha1.MemcachedStatus{Conditions: p.Status.Conditions, SlotTable: p.Status.SlotTable, Handoffs: p.Status.Handoffs, ConfigurationEndpoint: p.Status.ConfigurationEndpoint, ProxyEndpoint: p.Status.ProxyEndpoint}
		out.Parent = &metacontroller.Parent{Memcached: p}
	}
	return out
}

// TestDecodeRequestAgreesWithEncodingJSON checks that DecodeSyncRequest and
// DecodeCustomizeRequest read every request of the corpus exactly as
// encoding/json reads it into the same types (but for what they skip: the
// parent's managedFields and the status beside what it carries forward,
// which the hook never reads), and that the answers are the same bytes: the fast
// decoder changes no answer.
func TestDecodeRequestAgreesWithEncodingJSON(t *testing.T) {
	for name, body := range decodeCorpus(t) {
		t.Run(name, func(t *testing.T) {
			var ref referenceRequest
			if err := json.Unmarshal(body, &ref); err != nil {
				t.Fatal(err)
			}
			want := ref.request()
			got, err := metacontroller.DecodeSyncRequest(body)
			if err != nil {
				t.Fatalf("DecodeSyncRequest: %v", err)
			}
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("DecodeSyncRequest differs from encoding/json (-want +got):\n%s", diff)
			}

			gotC, err := metacontroller.DecodeCustomizeRequest(body)
			if err != nil {
				t.Fatalf("DecodeCustomizeRequest: %v", err)
			}
			if diff := cmp.Diff(&metacontroller.CustomizeRequest{Parent: want.Parent}, gotC, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("DecodeCustomizeRequest differs from encoding/json (-want +got):\n%s", diff)
			}

			wantAnswer, wantErr := memcached.Sync(want, fixedNow, hookOptions)
			gotAnswer, gotErr := memcached.Sync(got, fixedNow, hookOptions)
			if fmt.Sprint(wantErr) != fmt.Sprint(gotErr) {
				t.Fatalf("Sync errors differ: encoding/json's request gives %v, DecodeSyncRequest's %v", wantErr, gotErr)
			}
			if wantErr == nil && !bytes.Equal(testutil.MustMarshal(t, wantAnswer.Response), testutil.MustMarshal(t, gotAnswer.Response)) {
				t.Errorf("answers differ:\n%s\n%s", testutil.Truncate(testutil.MustMarshal(t, wantAnswer.Response)), testutil.Truncate(testutil.MustMarshal(t, gotAnswer.Response)))
			}
		})
	}
}
