package memcached_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/sync/metacontroller"
	"github.com/example/memcached-operator/test/testutil"
)

// FuzzSync feeds the hooks' decoding and logic with mutations of every
// captured request (sync, finalize and customize bodies alike). Whatever
// the bytes: nothing panics; a refused body is a *metacontroller.Error, the
// kind the HTTP layer answers 400; and an accepted one gets an answer that
// passes hook v2's strict decoding, with a status and a children list
// whose every child names its kind, apiVersion and name.
//
// make test runs it for a few seconds; make fuzz for as long as you like.
func FuzzSync(f *testing.F) {
	for _, rel := range testutil.CaptureNames(f) {
		f.Add([]byte(testutil.LoadCapture(f, rel).Request))
	}
	// A Memcached with zones, keepWarm and a refill under way: no capture
	// has one.
	zones := []string{"a", "b"}
	z := zonedFixture(`{"size":2,"zones":{"names":["a","b"]},"rollout":{"keepWarm":true}}`, zones, 2, []v1alpha1.ZoneStatus{
		{Name: "a", SlotTable: v1alpha1.SlotTable{Version: 1, Slots: []v1alpha1.Slot{{Slot: 0, Pod: "a-0", IP: "10.1.0.1", State: v1alpha1.SlotServing}, {Slot: 1, State: v1alpha1.SlotEmpty}}}},
		{Name: "b", SlotTable: v1alpha1.SlotTable{Version: 1, Slots: []v1alpha1.Slot{{Slot: 0, Pod: "b-0", IP: "10.2.0.1", State: v1alpha1.SlotServing}, {Slot: 1, Pod: "b-1", IP: "10.2.0.2", State: v1alpha1.SlotServing}}}},
	})
	one := int32(1)
	z.handoffs = []v1alpha1.Handoff{{Pod: "b-1", IP: "10.2.0.2", Reason: v1alpha1.HandoffRefill, Zone: "a", Slot: &one, To: "a-1", ToIP: "10.1.0.2"}}
	f.Add(z.body(f))
	f.Fuzz(func(t *testing.T, body []byte) {
		if req, err := metacontroller.DecodeCustomizeRequest(body); err == nil {
			resp, err := memcached.Customize(req)
			if err == nil {
				b := encodeAnswer(t, resp)
				var a struct {
					RelatedResources *[]json.RawMessage `json:"relatedResources"`
				}
				testutil.StrictDecode(t, b, &a)
				if a.RelatedResources == nil || len(*a.RelatedResources) != 2 {
					t.Fatalf("customize answer without its two rules (memcached's Pods, the proxies'): %s", b)
				}
			} else {
				checkRequestError(t, err)
			}
		} else {
			checkRequestError(t, err)
		}

		req, err := metacontroller.DecodeSyncRequest(body)
		if err != nil {
			checkRequestError(t, err)
			return
		}
		answer, err := memcached.Sync(req, fixedNow, hookOptions)
		if err != nil {
			checkRequestError(t, err)
			return
		}
		b := encodeAnswer(t, answer.Response)
		var a struct {
			Status             json.RawMessage    `json:"status"`
			Children           *[]json.RawMessage `json:"children"`
			ResyncAfterSeconds *float64           `json:"resyncAfterSeconds"`
			Finalized          *bool              `json:"finalized"`
		}
		testutil.StrictDecode(t, b, &a)
		if a.Children == nil {
			t.Fatalf("answer's children is null or missing, which deletes every child: %.500s", b)
		}
		if len(a.Status) == 0 || bytes.Equal(a.Status, []byte("null")) {
			t.Fatalf("answer has no status: %.500s", b)
		}
		for i, c := range *a.Children {
			var child struct {
				Kind       string `json:"kind"`
				APIVersion string `json:"apiVersion"`
				Metadata   struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(c, &child); err != nil {
				t.Fatalf("children[%d]: %v", i, err)
			}
			if child.Kind == "" || child.APIVersion == "" || child.Metadata.Name == "" {
				t.Fatalf("children[%d] lacks kind, apiVersion or metadata.name, which fails the whole call: %.300s", i, c)
			}
		}
	})
}

// encodeAnswer encodes an answer as the HTTP layer does, and checks that it
// is valid UTF-8 JSON.
func encodeAnswer(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encoding the answer: %v", err)
	}
	if !utf8.Valid(b) {
		t.Fatalf("answer is not valid UTF-8: %.300q", b)
	}
	return b
}

// checkRequestError fails the test unless err is a *metacontroller.Error with
// a message: the only error the HTTP layer answers 400 rather than 500.
func checkRequestError(t *testing.T, err error) {
	t.Helper()
	var re *metacontroller.Error
	if !errors.As(err, &re) || strings.TrimSpace(re.Msg) == "" {
		t.Fatalf("error %v (%T) is not a *metacontroller.Error with a message", err, err)
	}
}
