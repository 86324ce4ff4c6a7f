package metacontroller

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/test/testutil"
)

// podRequest is a sync request with one Pod per status and labels given
// (raw JSON; labels may be empty, for none), each status the Pod's whole
// status value.
func podRequest(labels string, statuses ...string) []byte {
	var b strings.Builder
	b.WriteString(`{"parent":null,"related":{"Pod.v1":{`)
	for i, st := range statuses {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"ns/p` + string(rune('a'+i)) + `":{"metadata":{"name":"p","namespace":"ns"`)
		if labels != "" {
			b.WriteString(`,"labels":` + labels)
		}
		b.WriteString(`},"spec":{"containers":[]},"status":` + st + `}`)
	}
	b.WriteString(`}}}`)
	return []byte(b.String())
}

// checkQuickAsWalk decodes body quickly and by the walk alone, and fails
// unless both give the same request or the same error, and unless the
// quick reader took it (or left it to the walk) as wantQuick says.
func checkQuickAsWalk(t *testing.T, body []byte, wantQuick bool) {
	t.Helper()
	checkQuickReaders(t, body, wantQuick, wantQuick)
}

// checkQuickReaders is checkQuickAsWalk, and also fails unless the whole
// request's quick reader took it (or left it to the decoder) as wantWhole
// says, for a request the walk takes; it takes none the walk refuses.
func checkQuickReaders(t *testing.T, body []byte, wantQuick, wantWhole bool) {
	t.Helper()
	quick, quickErr := decodeSyncRequest(body, false)
	if tookIt := !errors.Is(quickErr, errNotQuick); tookIt != wantQuick {
		t.Errorf("the quick reader took it: %v, want %v (%v)", tookIt, wantQuick, quickErr)
	}
	got, gotErr := DecodeSyncRequest(body)
	want, wantErr := decodeSyncRequest(body, true)
	if wantQuick && !reflect.DeepEqual(quick, want) {
		t.Errorf("quick read gives\n%+v\nwant (the walk's)\n%+v", quick, want)
	}
	// The whole request read quickly: every request the walk takes that
	// the quick reader takes, and nothing else.
	whole, tookWhole := quickSyncRequest(body)
	if tookWhole != (wantWhole && wantErr == nil) {
		t.Errorf("the quick reader took the whole request: %v, want %v (%v)", tookWhole, wantWhole && wantErr == nil, wantErr)
	}
	if tookWhole && (wantErr != nil || !reflect.DeepEqual(whole, want)) {
		t.Errorf("whole request read quickly gives\n%+v\nwant (the walk's)\n%+v, %v", whole, want, wantErr)
	}
	switch {
	case (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error():
		t.Errorf("error %v, want (the walk's) %v", gotErr, wantErr)
	case !reflect.DeepEqual(got, want):
		t.Errorf("got\n%+v\nwant (the walk's)\n%+v", got, want)
	}
}

// TestQuickStatus holds the quick reader of Pod statuses and labels
// (quick.go) to the walk: for every status it takes, the same Pod; for
// the others, the walk's answer, errors included.
func TestQuickStatus(t *testing.T) {
	ready := `{"phase":"Running","podIP":"10.0.0.1","conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-11-22T01:32:32Z","lastProbeTime":null}],` +
		`"containerStatuses":[{"name":"memcached","ready":true,"restartCount":0,"state":{"running":{"startedAt":"2026-11-22T01:32:32Z"}},"lastState":{}}]}`
	tests := []struct {
		name      string
		labels    string
		statuses  []string
		wantQuick bool
	}{
		{name: "ready", labels: `{"app":"memcached","pod-template-hash":"abc"}`, statuses: []string{ready}, wantQuick: true},
		{name: "Pods alike reuse strings", labels: `{"app":"memcached"}`, statuses: []string{ready, ready, ready}, wantQuick: true},
		{name: "Pods unlike", labels: `{"app":"memcached"}`, statuses: []string{ready, `{"phase":"Pending","conditions":[{"type":"PodScheduled","status":"False","reason":"Unschedulable"}]}`, ready}, wantQuick: true},
		{name: "white space everywhere", labels: " { \"a\" : \"b\" , \"c\" : null } ", statuses: []string{" { \"phase\" : \"Running\" ,\n\t\"conditions\" : [ { \"type\" : \"Ready\" , \"status\" : \"True\" } , null ] ,\r\"containerStatuses\" : [ ] } "}, wantQuick: true},
		{name: "nulls", labels: `null`, statuses: []string{`null`, `{"phase":null,"podIP":null,"conditions":null,"initContainerStatuses":null,"containerStatuses":[{"name":null,"ready":null,"state":null,"lastState":{"waiting":null,"terminated":null}}]}`}, wantQuick: true},
		{name: "empty", labels: `{}`, statuses: []string{`{}`, `{"conditions":[],"containerStatuses":[{}]}`}, wantQuick: true},
		{name: "escapes in values", labels: `{"a":"\u0062\n"}`, statuses: []string{`{"phase":"Run\"ning\\","conditions":[{"type":"Re\u0061dy","reason":"a\tb"}]}`}, wantQuick: true},
		{name: "waiting and terminated", statuses: []string{`{"containerStatuses":[{"name":"memcached","state":{"waiting":{"reason":"CrashLoopBackOff","message":"back-off \"10s\"\n"}},` +
			`"lastState":{"terminated":{"exitCode":137,"reason":"OOMKilled","signal":9,"message":"x"}}}],"initContainerStatuses":[{"name":"check","state":{"terminated":{"exitCode":1,"reason":"Error"}}}]}`}, wantQuick: true},
		{name: "unknown members of every kind", statuses: []string{`{"a":{"b":[1,2.5e3,-0.1,true,false,null,"}]\"{["]},"hostIP":"10.0.0.2","podIPs":[{"ip":"10.0.0.1"}],"conditions":[{"x":[{}],"type":"Ready"}]}`}, wantQuick: true},
		// Names with escapes are the walk's to unescape; values of the
		// wrong kind, the walk's to refuse.
		{name: "escaped name", statuses: []string{`{"ph\u0061se":"Running"}`}},
		{name: "escaped label name", labels: `{"\u0061pp":"memcached"}`, statuses: []string{ready}},
		{name: "status a string", statuses: []string{`"Running"`}},
		{name: "phase a number", statuses: []string{`{"phase":1}`}},
		{name: "conditions an object", statuses: []string{`{"conditions":{}}`}},
		{name: "a condition a list", statuses: []string{`{"conditions":[[]]}`}},
		{name: "ready a string", statuses: []string{`{"containerStatuses":[{"ready":"true"}]}`}},
		{name: "state a list", statuses: []string{`{"containerStatuses":[{"state":[]}]}`}},
		{name: "exit code a string", statuses: []string{`{"containerStatuses":[{"state":{"terminated":{"exitCode":"1"}}}]}`}},
		{name: "label a number", labels: `{"a":1}`, statuses: []string{ready}},
		{name: "labels a list", labels: `[]`, statuses: []string{ready}},
		// The scan, not the quick reader, refuses what is not JSON.
		{name: "duplicate name", statuses: []string{`{"phase":"Running","phase":"Failed"}`}},
		{name: "truncated", statuses: []string{`{"phase":"Run`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkQuickAsWalk(t, podRequest(tt.labels, tt.statuses...), tt.wantQuick)
		})
	}
	// The Pod's metadata is walked in both, but its strings are read
	// without a look ahead unless exact.
	metadata := []struct {
		name      string
		meta      string
		wantQuick bool
		// notWhole: the whole request's quick reader leaves it to the
		// decoder, though the status's took it.
		notWhole bool
	}{
		{name: "strings", meta: `{"name":"p","namespace":"ns","creationTimestamp":"2026-11-22T01:32:32Z"}`, wantQuick: true},
		{name: "nulls", meta: `{"name":null,"namespace":null,"creationTimestamp":null}`, wantQuick: true},
		{name: "name a number", meta: `{"name":1}`},
		{name: "namespace an object", meta: `{"namespace":{"a":1}}`},
		{name: "creationTimestamp a list", meta: `{"creationTimestamp":[]}`},
		{name: "name not JSON", meta: `{"name":"\q"}`},
		{name: "deleted", meta: `{"name":"p","deletionTimestamp":"2026-11-22T01:32:32Z","deletionGracePeriodSeconds":30}`, wantQuick: true},
		{name: "deletion nulls", meta: `{"deletionTimestamp":null,"deletionGracePeriodSeconds":null}`, wantQuick: true},
		{name: "deletionTimestamp not a time", meta: `{"deletionTimestamp":"soon"}`, wantQuick: true},
		{name: "deletionGracePeriodSeconds a string", meta: `{"deletionGracePeriodSeconds":"30"}`, wantQuick: true},
		{name: "unknown members", meta: `{"managedFields":[{"fieldsV1":{"f:metadata":{"k:{\"uid\":\"x\"}":{}}}}],"uid":"u","generation":1}`, wantQuick: true},
		{name: "escaped member name", meta: `{"n\u0061me":"p"}`, wantQuick: true, notWhole: true},
		// Not the Pod's strings: refused by the walk both share.
		{name: "not an object", meta: `[]`, wantQuick: true},
	}
	for _, tt := range metadata {
		t.Run("metadata "+tt.name, func(t *testing.T) {
			checkQuickReaders(t, []byte(`{"related":{"Pod.v1":{"ns/p":{"metadata":`+tt.meta+`,"status":{}}}}}`), tt.wantQuick, tt.wantQuick && !tt.notWhole)
		})
	}
	// The request around the Pods, which only the whole request's quick
	// reader reads itself.
	requests := []struct {
		name string
		body string
		// wantWhole: the whole request's quick reader takes it. (The
		// status's takes them all: none has a Pod status.)
		wantWhole bool
	}{
		{name: "null", body: `null`, wantWhole: true},
		{name: "empty", body: `{}`, wantWhole: true},
		{name: "white space around", body: " \n{ \"finalizing\" : true }\t", wantWhole: true},
		{name: "every member", body: `{"controller":{"metadata":{"name":"c"}},"parent":null,"children":{"Service.v1":{"ns/s":{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"a":[1]}}}},` +
			`"related":{"ConfigMap.v1":{"x":{}},"Pod.v1":{"ns/p":{"metadata":{"name":"p"}}}},"finalizing":false}`, wantWhole: true},
		{name: "nulls", body: `{"children":null,"related":null,"finalizing":null}`, wantWhole: true},
		{name: "no Pods", body: `{"related":{"Pod.v1":null}}`, wantWhole: true},
		{name: "Pods empty", body: `{"related":{"Pod.v1":{}}}`, wantWhole: true},
		{name: "a Pod null", body: `{"related":{"Pod.v1":{"ns/p":null}}}`, wantWhole: true},
		{name: "not an object", body: `[]`},
		{name: "finalizing a string", body: `{"finalizing":"yes"}`},
		{name: "related a list", body: `{"related":[]}`},
		{name: "Pods a list", body: `{"related":{"Pod.v1":[]}}`},
		{name: "a Pod a string", body: `{"related":{"Pod.v1":{"ns/p":"p"}}}`},
		{name: "children not an object", body: `{"children":1}`},
		{name: "parent not an object", body: `{"parent":[]}`},
		{name: "escaped Pod key", body: `{"related":{"Pod.v1":{"ns/\u0070":{}}}}`},
		{name: "escaped member name", body: `{"fin\u0061lizing":true}`},
		{name: "trailing value", body: `{} {}`},
		{name: "escaped surrogates", body: `{"controller":"\ud83d\ude00"}`},
	}
	for _, tt := range requests {
		t.Run("request "+tt.name, func(t *testing.T) {
			checkQuickReaders(t, []byte(tt.body), true, tt.wantWhole)
		})
	}
	t.Run("captures", func(t *testing.T) {
		for _, rel := range testutil.CaptureNames(t) {
			if body := testutil.LoadCapture(t, rel).Request; strings.Contains(rel, "sync") {
				checkQuickAsWalk(t, []byte(body), true)
			}
		}
	})
	t.Run("1,000 Pods", func(t *testing.T) {
		checkQuickAsWalk(t, testutil.BigRequest(t, 1000), true)
	})
}

// TestQuickSlotTable holds quickSlotTable to json.Unmarshal: every table
// it takes reads as json.Unmarshal reads it.
func TestQuickSlotTable(t *testing.T) {
	tests := []struct {
		name      string
		raw       string
		wantQuick bool
	}{
		{name: "the hook's", raw: `{"version":1795300000123,"slots":[{"slot":0,"pod":"a","ip":"10.0.0.1","state":"Serving"},{"slot":1,"state":"Empty"}],"waiting":["b"],"eventsUntil":"2026-11-22T01:32:32Z"}`, wantQuick: true},
		{name: "empty", raw: `{}`, wantQuick: true},
		{name: "nulls", raw: `{"version":null,"slots":[null,{"slot":null,"pod":null}],"waiting":null,"eventsUntil":null}`, wantQuick: true},
		{name: "empty lists", raw: `{"slots":[],"waiting":[]}`, wantQuick: true},
		{name: "negative and unknown", raw: `{"version":-5,"slots":[{"slot":-1,"x":{"y":[]}}],"other":1}`, wantQuick: true},
		{name: "escapes", raw: `{"slots":[{"pod":"\u0061\"b"}],"waiting":["\\"]}`, wantQuick: true},
		{name: "slot past int32", raw: `{"slots":[{"slot":2147483648}]}`},
		{name: "slot a fraction", raw: `{"slots":[{"slot":1.5}]}`},
		{name: "slot an exponent", raw: `{"slots":[{"slot":1e2}]}`},
		{name: "version past int64", raw: `{"version":9223372036854775808}`},
		{name: "slots an object", raw: `{"slots":{}}`},
		{name: "pod a number", raw: `{"slots":[{"pod":1}]}`},
		{name: "escaped name", raw: `{"slot\u0073":[]}`},
		{name: "eventsUntil not a time", raw: `{"eventsUntil":"soon"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got v1alpha1.SlotTable
			tookIt := quickSlotTable([]byte(tt.raw), &got)
			if tookIt != tt.wantQuick {
				t.Errorf("quickSlotTable took it: %v, want %v", tookIt, tt.wantQuick)
			}
			var want v1alpha1.SlotTable
			wantErr := jsonv2.Unmarshal([]byte(tt.raw), &want)
			if tookIt && (wantErr != nil || !reflect.DeepEqual(got, want)) {
				t.Errorf("got %+v, want (json.Unmarshal's) %+v, %v", got, want, wantErr)
			}
			gotTable, gotOK := decodeSlotTable([]byte(tt.raw))
			if gotOK != (wantErr == nil) || gotOK && !reflect.DeepEqual(gotTable, want) {
				t.Errorf("decodeSlotTable gives %+v, %v; want %+v, %v", gotTable, gotOK, want, wantErr == nil)
			}
		})
	}
}

// FuzzQuickStatus holds the quick reader to the walk on any request.
func FuzzQuickStatus(f *testing.F) {
	f.Add(podRequest(`{"a":"b"}`, `{"phase":"Running","conditions":[{"type":"Ready","status":"True"}],"containerStatuses":[{"name":"m","ready":true,"state":{"waiting":{"reason":"x"}}}]}`))
	f.Add(podRequest(`null`, `null`, `{"conditions":[null]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if !json.Valid(body) {
			return
		}
		quick, quickErr := decodeSyncRequest(body, false)
		want, wantErr := decodeSyncRequest(body, true)
		if whole, ok := quickSyncRequest(body); ok && (wantErr != nil || !reflect.DeepEqual(whole, want)) {
			t.Errorf("whole request read quickly: %+v\nwalk: %+v, %v", whole, want, wantErr)
		}
		if errors.Is(quickErr, errNotQuick) {
			return
		}
		if (quickErr == nil) != (wantErr == nil) || quickErr != nil && quickErr.Error() != wantErr.Error() || !reflect.DeepEqual(quick, want) {
			t.Errorf("quick: %+v, %v\nwalk: %+v, %v", quick, quickErr, want, wantErr)
		}
	})
}
