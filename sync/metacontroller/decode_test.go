package metacontroller_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/example/memcached-operator/sync/metacontroller"
	"github.com/example/memcached-operator/test/testutil"
)

// TestDecodeSyncRequestRules checks what DecodeSyncRequest accepts and refuses, and
// that every refusal is a *metacontroller.Error saying what and where. Where
// its rules differ from encoding/json's (duplicate names, invalid UTF-8,
// case), the want says which way and why.
func TestDecodeSyncRequestRules(t *testing.T) {
	var compact bytes.Buffer
	if err := json.Compact(&compact, testutil.CaptureBody(t, "v2/0005-sync.json", "sync")); err != nil {
		t.Fatal(err)
	}
	valid := compact.String()
	// inPod puts raw JSON as the first member of the first Pod's status.
	inPod := func(member string) string {
		i := strings.Index(valid, `"status":{`)
		j := strings.Index(valid, `"Pod.v1":`)
		k := j + strings.Index(valid[j:], `"status":{`)
		if i < 0 || j < 0 || k < j {
			t.Fatal("capture v2/0005 has no Pod status")
		}
		k += len(`"status":{`)
		return valid[:k] + member + "," + valid[k:]
	}
	// inPods replaces the first old after the start of the Pods by new.
	inPods := func(old, new string) string {
		j := strings.Index(valid, `"Pod.v1":`)
		if j < 0 || !strings.Contains(valid[j:], old) {
			t.Fatalf("capture v2/0005 has no %s in its Pods", old)
		}
		return valid[:j] + strings.Replace(valid[j:], old, new, 1)
	}
	tests := []struct {
		name string
		body string
		// wantErr are substrings of the error; none means it decodes.
		wantErr []string
		check   func(t *testing.T, r *metacontroller.SyncRequest)
	}{
		{name: "capture", body: valid, check: func(t *testing.T, r *metacontroller.SyncRequest) {
			if r.Parent == nil || len(r.Pods) != 3 {
				t.Errorf("parent %v, %d Pods; want a parent and 3 Pods", r.Parent, len(r.Pods))
			}
		}},
		{name: "null is an empty request", body: `null`, check: func(t *testing.T, r *metacontroller.SyncRequest) {
			if r.Parent != nil || r.Children != nil {
				t.Errorf("got %+v, want an empty request", r)
			}
		}},
		{name: "white space around the object", body: " \n" + valid + "\n\t "},
		{name: "unknown members are skipped", body: `{"controller":{"a":[1,{"b":null}]},"extra":[true],"parent":null}`},
		// Case counts, as it does for Metacontroller: "Parent" is not the
		// parent (encoding/json would take it).
		{name: "wrongly cased field is not the field", body: strings.Replace(valid, `"parent":`, `"Parent":`, 1), check: func(t *testing.T, r *metacontroller.SyncRequest) {
			if r.Parent != nil {
				t.Error(`"Parent" was read as "parent"`)
			}
		}},
		{name: "array", body: `[]`, wantErr: []string{"got a JSON array, want an object"}},
		{name: "string", body: `"x"`, wantErr: []string{"got a JSON string, want an object"}},
		{name: "number", body: `42`, wantErr: []string{"got a JSON number, want an object"}},
		{name: "truncated", body: valid[:1000], wantErr: []string{"unexpected end of JSON input", "of 1000)"}},
		{name: "trailing data", body: valid + "}", wantErr: []string{fmt.Sprintf("(at byte %d of %d)", len(valid), len(valid)+1)}},
		{name: "two values", body: `{} {}`, wantErr: []string{"after the top-level value"}},
		{name: "syntax error", body: `{"parent": {"kind": tru}}`, wantErr: []string{"parent.kind: malformed JSON: invalid", "(at byte 23 of 25)"}},
		{name: "finalizing is a string", body: `{"finalizing":"yes"}`, wantErr: []string{`finalizing: got a JSON string, want a boolean`}},
		{name: "children is a list", body: `{"children":[]}`, wantErr: []string{`children: got a JSON array, want an object`}},
		{name: "related is a string", body: `{"related":"x"}`, wantErr: []string{`related: got a JSON string, want an object`}},
		{name: "Pods is a list", body: `{"related":{"Pod.v1":[]}}`, wantErr: []string{`related.Pod.v1: got a JSON array, want an object`}},
		{name: "Pod phase is a number", body: inPod(`"phase":1`), wantErr: []string{`related.Pod.v1.`, `.status.phase: got a JSON number, want a string`}},
		{name: "Pod conditions is an object", body: inPod(`"conditions":{}`), wantErr: []string{`.status.conditions: got a JSON object, want an array`}},
		{name: "container ready is a string", body: inPod(`"containerStatuses":[{"ready":"yes"}]`), wantErr: []string{`.status.containerStatuses[0].ready: got a JSON string, want a boolean`}},
		{name: "parent generation is a string", body: `{"parent":{"metadata":{"generation":"1"}}}`, wantErr: []string{`parent.metadata.generation: got a JSON string, want an integer`}},
		{name: "bad deletionTimestamp", body: `{"related":{"Pod.v1":{"a/b":{"metadata":{"deletionTimestamp":"yesterday"}}}}}`, wantErr: []string{`related.Pod.v1.a/b.metadata.deletionTimestamp: got a JSON string, want a time`, `"yesterday"`}},
		// Duplicate names: encoding/json takes the last; the hook refuses,
		// wherever they are, read or skipped. Metacontroller never sends
		// them; a body that has them could mean two things.
		{name: "duplicate top-level name", body: `{"parent":null,"parent":null}`, wantErr: []string{"parent: malformed JSON: duplicate object member name"}},
		{name: "duplicate name in a Pod", body: inPod(`"phase":"Failed"`), wantErr: []string{".status.phase: malformed JSON: duplicate object member name"}},
		{name: "duplicate name in skipped managedFields", body: inPods(`"fieldsType":"FieldsV1"`, `"fieldsType":"FieldsV1","fieldsType":"FieldsV1"`), wantErr: []string{".metadata.managedFields[0].fieldsType: malformed JSON: duplicate object member name"}},
		// Invalid UTF-8: encoding/json replaces it with U+FFFD; the hook
		// refuses it, in read and skipped parts alike. Metacontroller
		// (Go's encoding/json) never sends it.
		{name: "invalid UTF-8 in a Pod name", body: inPods(`"name":"cache-a-`, "\"name\":\"cache-a-\xff"), wantErr: []string{"invalid UTF-8"}},
		{name: "invalid UTF-8 in skipped managedFields", body: inPods(`"fieldsType":"FieldsV1"`, "\"fieldsType\":\"Fields\xffV1\""), wantErr: []string{"invalid UTF-8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := metacontroller.DecodeSyncRequest([]byte(tt.body))
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("DecodeSyncRequest: %v", err)
				}
				if tt.check != nil {
					tt.check(t, r)
				}
				return
			}
			if err == nil {
				t.Fatalf("DecodeSyncRequest succeeded, want an error with %q", tt.wantErr)
			}
			t.Logf("error: %v", err)
			var re *metacontroller.Error
			if !errors.As(err, &re) {
				t.Fatalf("error %v (%T) is not a *metacontroller.Error", err, err)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			// The customize decoder refuses a malformed body the same way.
			if !strings.Contains(tt.body, `"related"`) && !strings.Contains(tt.body, `"finalizing"`) && !strings.Contains(tt.body, `"children"`) {
				if _, err := metacontroller.DecodeCustomizeRequest([]byte(tt.body)); err == nil {
					t.Errorf("DecodeCustomizeRequest succeeded, want an error")
				}
			}
		})
	}
}

func TestDecodeMemcached(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		wantErr string
		check   func(t *testing.T, p *metacontroller.Parent)
	}{{
		name: "as kubectl prints it",
		body: `{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached",
			"metadata":{"name":"cache","namespace":"shop","managedFields":[{"manager":"kubectl"}]},
			"spec":{"size":2,"discovery":{"enabled":true}},
			"status":{"slotTable":{"version":17,"slots":[{"slot":0,"pod":"cache-a","ip":"10.0.0.1","state":"Serving"}]},
				"configurationEndpoint":"cache-discovery.shop.svc:11211","nodes":["cache-a"]}}`,
		check: func(t *testing.T, p *metacontroller.Parent) {
			if p.Name != "cache" || p.Namespace != "shop" || *p.Spec.Size != 2 || !p.Spec.Discovery.Enabled {
				t.Errorf("decoded %+v", p)
			}
			if tb := p.Status.SlotTable; tb.Version != 17 || len(tb.Slots) != 1 || tb.Slots[0].IP != "10.0.0.1" {
				t.Errorf("slot table %+v", tb)
			}
			if p.Status.ConfigurationEndpoint != "cache-discovery.shop.svc:11211" {
				t.Errorf("configurationEndpoint %q", p.Status.ConfigurationEndpoint)
			}
		},
	}, {
		name: "a slot table that does not decode is left out, the rest kept",
		body: `{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":"c"},
			"status":{"slotTable":{"version":"seven","slots":[]},"conditions":[{"type":"Available","status":"True","reason":"R","message":"","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`,
		check: func(t *testing.T, p *metacontroller.Parent) {
			if p.Status.SlotTable.Version != 0 || len(p.Status.Conditions) != 1 {
				t.Errorf("status %+v", p.Status)
			}
		},
	}, {
		// Slots out of order or with a gap are the readers' to refuse
		// (contract.Ordered): the wire reads them as they are.
		name: "a slot table with a slot out of range, a fraction, or a list where an object goes: left out",
		body: `{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":"c"},"status":{"slotTable":{"version":3,"slots":[{"slot":4294967296}]}}}`,
		check: func(t *testing.T, p *metacontroller.Parent) {
			for _, table := range []string{`{"version":3,"slots":[{"slot":1.5}]}`, `{"version":3,"slots":{"slot":1}}`, `{"version":3,"slots":[{"slot":1,"pod":7}]}`} {
				q, err := metacontroller.DecodeMemcached([]byte(`{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":"c"},"status":{"slotTable":` + table + `}}`))
				if err != nil || q.Status.SlotTable.Version != 0 || q.Status.SlotTable.Slots != nil {
					t.Errorf("slot table %s: %+v, %v; want it left out", table, q, err)
				}
			}
			if p.Status.SlotTable.Version != 0 || p.Status.SlotTable.Slots != nil {
				t.Errorf("slot table %+v, want it left out", p.Status.SlotTable)
			}
		},
	}, {
		name: "a slot table's unknown fields are skipped",
		body: `{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":"c"},"status":{"slotTable":{"version":3,"new":{"x":[1]},"slots":[{"slot":0,"pod":"a","ip":"10.0.0.1","state":"Serving","since":"now"}]}}}`,
		check: func(t *testing.T, p *metacontroller.Parent) {
			if tb := p.Status.SlotTable; tb.Version != 3 || len(tb.Slots) != 1 || tb.Slots[0].Pod != "a" || tb.Slots[0].State != "Serving" {
				t.Errorf("slot table %+v", tb)
			}
		},
	}, {
		name: "a spec that is no Memcached spec is no error",
		body: `{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":"c"},"spec":{"size":"two"}}`,
		check: func(t *testing.T, p *metacontroller.Parent) {
			if p.SpecError == nil {
				t.Error("no SpecError")
			}
		},
	}, {
		name:    "another kind",
		body:    `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`,
		wantErr: `got apiVersion "v1" and kind "ConfigMap"`,
	}, {
		name:    "null",
		body:    `null`,
		wantErr: "got null",
	}, {
		name:    "not JSON",
		body:    `{"apiVersion":`,
		wantErr: "unexpected end",
	}, {
		name:    "trailing data",
		body:    `{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached"} {}`,
		wantErr: "after the top-level value",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := metacontroller.DecodeMemcached([]byte(tt.body))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, p)
		})
	}
}
