package sync_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/memcached-operator/sync"
)

// decodeCorpus is every request body the decoder must read exactly as
// encoding/json reads it: every capture, the captures with all child kinds,
// a grown request, and fixtures that set every field of the small Pod type.
func decodeCorpus(t *testing.T) map[string][]byte {
	t.Helper()
	corpus := map[string][]byte{}
	for _, rel := range captureFiles(t) {
		c := loadCapture(t, rel)
		corpus[rel] = c.Request
		if c.hook() != "customize" {
			corpus["all kinds "+rel] = withAllKinds(t, c.Request)
		}
	}
	corpus["100 Pods"] = bigRequest(t, bigCapture, 100)
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

// ignoreManagedFields leaves out of a comparison the parent's managedFields,
// which DecodeRequest skips.
var ignoreManagedFields = cmpopts.IgnoreFields(metav1.ObjectMeta{}, "ManagedFields")

// TestDecodeRequestAgreesWithEncodingJSON checks that DecodeRequest and
// DecodeCustomizeRequest read every request of the corpus exactly as
// encoding/json reads it into the same types (but for the parent's
// managedFields, which they skip: the hook never reads them), and that the
// answers are the same bytes: the fast decoder changes no answer.
func TestDecodeRequestAgreesWithEncodingJSON(t *testing.T) {
	for name, body := range decodeCorpus(t) {
		t.Run(name, func(t *testing.T) {
			var want sync.Request
			if err := json.Unmarshal(body, &want); err != nil {
				t.Fatal(err)
			}
			got, err := sync.DecodeRequest(body)
			if err != nil {
				t.Fatalf("DecodeRequest: %v", err)
			}
			if diff := cmp.Diff(&want, got, ignoreManagedFields); diff != "" {
				t.Fatalf("DecodeRequest differs from encoding/json (-want +got):\n%s", diff)
			}

			var wantC sync.CustomizeRequest
			if err := json.Unmarshal(body, &wantC); err != nil {
				t.Fatal(err)
			}
			gotC, err := sync.DecodeCustomizeRequest(body)
			if err != nil {
				t.Fatalf("DecodeCustomizeRequest: %v", err)
			}
			if diff := cmp.Diff(&wantC, gotC, ignoreManagedFields); diff != "" {
				t.Fatalf("DecodeCustomizeRequest differs from encoding/json (-want +got):\n%s", diff)
			}

			wantAnswer, wantErr := sync.Sync(&want, fixedNow)
			gotAnswer, gotErr := sync.Sync(got, fixedNow)
			if fmt.Sprint(wantErr) != fmt.Sprint(gotErr) {
				t.Fatalf("Sync errors differ: encoding/json's request gives %v, DecodeRequest's %v", wantErr, gotErr)
			}
			if wantErr == nil && !bytes.Equal(mustMarshal(t, wantAnswer), mustMarshal(t, gotAnswer)) {
				t.Errorf("answers differ:\n%s\n%s", truncate(mustMarshal(t, wantAnswer)), truncate(mustMarshal(t, gotAnswer)))
			}
		})
	}
}

// TestDecodeRequestRules checks what DecodeRequest accepts and refuses, and
// that every refusal is a *sync.RequestError saying what and where. Where
// its rules differ from encoding/json's (duplicate names, invalid UTF-8,
// case), the want says which way and why.
func TestDecodeRequestRules(t *testing.T) {
	var compact bytes.Buffer
	if err := json.Compact(&compact, captureBody(t, "v2/0005-sync.json", "sync")); err != nil {
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
		check   func(t *testing.T, r *sync.Request)
	}{
		{name: "capture", body: valid, check: func(t *testing.T, r *sync.Request) {
			if r.Parent == nil || len(r.Related.Pods) != 3 {
				t.Errorf("parent %v, %d Pods; want a parent and 3 Pods", r.Parent, len(r.Related.Pods))
			}
		}},
		{name: "null is an empty request", body: `null`, check: func(t *testing.T, r *sync.Request) {
			if r.Parent != nil || r.Children != nil {
				t.Errorf("got %+v, want an empty request", r)
			}
		}},
		{name: "white space around the object", body: " \n" + valid + "\n\t "},
		{name: "unknown members are skipped", body: `{"controller":{"a":[1,{"b":null}]},"extra":[true],"parent":null}`},
		// Case counts, as it does for Metacontroller: "Parent" is not the
		// parent (encoding/json would take it).
		{name: "wrongly cased field is not the field", body: strings.Replace(valid, `"parent":`, `"Parent":`, 1), check: func(t *testing.T, r *sync.Request) {
			if r.Parent != nil {
				t.Error(`"Parent" was read as "parent"`)
			}
		}},
		{name: "array", body: `[]`, wantErr: []string{"malformed JSON request", "got a JSON array, want an object"}},
		{name: "string", body: `"x"`, wantErr: []string{"got a JSON string, want an object"}},
		{name: "number", body: `42`, wantErr: []string{"got a JSON number, want an object"}},
		{name: "truncated", body: valid[:1000], wantErr: []string{"unexpected end of JSON input", "of 1000)"}},
		{name: "trailing data", body: valid + "}", wantErr: []string{fmt.Sprintf("(at byte %d of %d)", len(valid), len(valid)+1)}},
		{name: "two values", body: `{} {}`, wantErr: []string{"after the top-level value"}},
		{name: "syntax error", body: `{"parent": {"kind": tru}}`, wantErr: []string{"invalid", `"parent.kind"`, "(at byte 23 of 25)"}},
		{name: "finalizing is a string", body: `{"finalizing":"yes"}`, wantErr: []string{`field "finalizing": got a JSON string, want bool`}},
		{name: "children is a list", body: `{"children":[]}`, wantErr: []string{`field "children": got a JSON array`}},
		{name: "related is a string", body: `{"related":"x"}`, wantErr: []string{`field "related": got a JSON string, want an object`}},
		{name: "Pods is a list", body: `{"related":{"Pod.v1":[]}}`, wantErr: []string{`field "related.Pod.v1": got a JSON array, want an object`}},
		{name: "Pod phase is a number", body: inPod(`"phase":1`), wantErr: []string{`field "related.Pod.v1.`, `.status.phase": got a JSON number, want a string`}},
		{name: "Pod conditions is an object", body: inPod(`"conditions":{}`), wantErr: []string{`.status.conditions": got a JSON object, want an array`}},
		{name: "container ready is a string", body: inPod(`"containerStatuses":[{"ready":"yes"}]`), wantErr: []string{`.status.containerStatuses.0.ready": got a JSON string, want a bool`}},
		{name: "parent generation is a string", body: `{"parent":{"metadata":{"generation":"1"}}}`, wantErr: []string{`field "parent.metadata.generation": got a JSON string, want int64`}},
		{name: "bad deletionTimestamp", body: `{"related":{"Pod.v1":{"a/b":{"metadata":{"deletionTimestamp":"yesterday"}}}}}`, wantErr: []string{`field "related.Pod.v1.a/b.metadata.deletionTimestamp"`, "yesterday"}},
		// Duplicate names: encoding/json takes the last; the hook refuses,
		// wherever they are, read or skipped. Metacontroller never sends
		// them; a body that has them could mean two things.
		{name: "duplicate top-level name", body: `{"parent":null,"parent":null}`, wantErr: []string{"duplicate object member name", `"parent"`}},
		{name: "duplicate name in a Pod", body: inPod(`"phase":"Failed"`), wantErr: []string{"duplicate object member name", `.status.phase"`}},
		{name: "duplicate name in skipped managedFields", body: inPods(`"fieldsType":"FieldsV1"`, `"fieldsType":"FieldsV1","fieldsType":"FieldsV1"`), wantErr: []string{"duplicate object member name", `.metadata.managedFields.0.fieldsType"`}},
		// Invalid UTF-8: encoding/json replaces it with U+FFFD; the hook
		// refuses it, in read and skipped parts alike. Metacontroller
		// (Go's encoding/json) never sends it.
		{name: "invalid UTF-8 in a Pod name", body: inPods(`"name":"cache-a-`, "\"name\":\"cache-a-\xff"), wantErr: []string{"invalid UTF-8"}},
		{name: "invalid UTF-8 in skipped managedFields", body: inPods(`"fieldsType":"FieldsV1"`, "\"fieldsType\":\"Fields\xffV1\""), wantErr: []string{"invalid UTF-8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := sync.DecodeRequest([]byte(tt.body))
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("DecodeRequest: %v", err)
				}
				if tt.check != nil {
					tt.check(t, r)
				}
				return
			}
			if err == nil {
				t.Fatalf("DecodeRequest succeeded, want an error with %q", tt.wantErr)
			}
			t.Logf("error: %v", err)
			var re *sync.RequestError
			if !errors.As(err, &re) {
				t.Fatalf("error %v (%T) is not a *sync.RequestError", err, err)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			// The customize decoder refuses a malformed body the same way.
			if !strings.Contains(tt.body, `"related"`) && !strings.Contains(tt.body, `"finalizing"`) && !strings.Contains(tt.body, `"children"`) {
				if _, err := sync.DecodeCustomizeRequest([]byte(tt.body)); err == nil {
					t.Errorf("DecodeCustomizeRequest succeeded, want an error")
				}
			}
		})
	}
}
