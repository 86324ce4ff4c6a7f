package memcached_test

import (
	"testing"

	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/test/testutil"
)

// TestFinalize checks the finalize hook: no children while any is observed,
// and no finalized field (false) until none is, then finalized true. It
// holds whatever the spec.
func TestFinalize(t *testing.T) {
	withChildren := func(t *testing.T) []byte { return testutil.CaptureBody(t, "v2/0042-finalize.json", "finalize") }
	tests := []struct {
		name          string
		body          func(t *testing.T) []byte
		wantFinalized bool
	}{
		{"captured, Deployment observed", withChildren, false},
		{"captured, nothing observed", func(t *testing.T) []byte { return testutil.CaptureBody(t, "v2/0043-finalize.json", "finalize") }, true},
		{"v1 captured, Deployment observed", func(t *testing.T) []byte { return testutil.CaptureBody(t, "v1/0033-finalize.json", "finalize") }, false},
		{"v1 captured, nothing observed", func(t *testing.T) []byte { return testutil.CaptureBody(t, "v1/0034-finalize.json", "finalize") }, true},
		{"Deployment gone, Service still observed", func(t *testing.T) []byte {
			body := withAllKinds(t, testutil.CaptureBody(t, "v2/0040-sync.json", "sync"))
			own := testutil.DecodeObject(t, nextRequest(t, body, callHook(t, "sync", body, fixedNow)))
			testutil.GetObject(own, "children")[memcached.DeploymentKey] = map[string]any{}
			return testutil.MustMarshal(t, own)
		}, false},
		{"invalid spec, Deployment observed", func(t *testing.T) []byte { return withSpec(t, withChildren(t), `{"size":-1}`) }, false},
		{"invalid spec, nothing observed", func(t *testing.T) []byte {
			return withSpec(t, testutil.CaptureBody(t, "v2/0043-finalize.json", "finalize"), `[]`)
		}, true},
		{"fixture, nothing observed, all kinds managed", func(t *testing.T) []byte {
			return fixture{spec: `{"size":3}`, pods: readyPods("p", 3), finalizing: true}.body(t)
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := tt.body(t)
			raw := callHook(t, "finalize", body, fixedNow)
			checkAnswer(t, "finalize", body, raw)
			a := parseAnswer(t, raw)
			if len(a.children) != 0 {
				t.Errorf("children = %v, want none", a.childKeys())
			}
			if a.finalized != tt.wantFinalized {
				t.Errorf("finalized = %v, want %v", a.finalized, tt.wantFinalized)
			}
			if a.hasFinalized && !a.finalized {
				t.Errorf("answer has \"finalized\": false, want the field left out")
			}
		})
	}
}

// TestFinalizingFlag checks that the finalizing field of the body is honoured
// too, not only the finalize path.
func TestFinalizingFlag(t *testing.T) {
	a := fixture{spec: `{"size":3}`, deployment: convergedDeploy(3), finalizing: true}.run(t, fixedNow)
	if len(a.children) != 0 || a.finalized {
		t.Errorf("children %v finalized %v, want none and false", a.childKeys(), a.finalized)
	}
}
