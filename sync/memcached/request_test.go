package memcached_test

import (
	"strings"
	"testing"

	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/test/testutil"
)

// TestRequestErrors checks that a request the hook cannot answer safely is
// refused with a *metacontroller.Error naming the problem, rather than
// answered: any 200 would let Metacontroller delete children.
func TestRequestErrors(t *testing.T) {
	tests := []struct {
		name string
		// change edits the decoded v2 capture 0040.
		change    func(req map[string]any)
		hooks     []string
		wantInMsg string
	}{
		{
			name:      "no parent",
			change:    func(req map[string]any) { delete(req, "parent") },
			hooks:     []string{"customize", "sync", "finalize"},
			wantInMsg: "parent: missing",
		},
		{
			name:      "null parent",
			change:    func(req map[string]any) { req["parent"] = nil },
			hooks:     []string{"customize", "sync", "finalize"},
			wantInMsg: "parent: missing",
		},
		{
			name:      "parent of another kind",
			change:    func(req map[string]any) { testutil.GetObject(req, "parent")["kind"] = "Redis" },
			hooks:     []string{"customize", "sync", "finalize"},
			wantInMsg: "Redis",
		},
		{
			name:      "parent of another apiVersion",
			change:    func(req map[string]any) { testutil.GetObject(req, "parent")["apiVersion"] = "cache.example.com/v1" },
			hooks:     []string{"customize", "sync", "finalize"},
			wantInMsg: "cache.example.com/v1",
		},
		{
			name:      "parent without a name",
			change:    func(req map[string]any) { delete(testutil.GetObject(req, "parent", "metadata"), "name") },
			hooks:     []string{"customize", "sync"},
			wantInMsg: "metadata.name",
		},
		{
			name:      "parent without a namespace",
			change:    func(req map[string]any) { delete(testutil.GetObject(req, "parent", "metadata"), "namespace") },
			hooks:     []string{"customize", "sync"},
			wantInMsg: "namespace",
		},
		{
			name:      "no children map",
			change:    func(req map[string]any) { delete(req, "children") },
			hooks:     []string{"sync", "finalize"},
			wantInMsg: "children",
		},
		{
			name:      "null children map",
			change:    func(req map[string]any) { req["children"] = nil },
			hooks:     []string{"sync", "finalize"},
			wantInMsg: "children",
		},
		{
			name:      "children without Deployments",
			change:    func(req map[string]any) { delete(testutil.GetObject(req, "children"), memcached.DeploymentKey) },
			hooks:     []string{"sync", "finalize"},
			wantInMsg: memcached.DeploymentKey,
		},
		{
			name: "children with only other kinds",
			change: func(req map[string]any) {
				req["children"] = map[string]any{memcached.ServiceKey: map[string]any{}, memcached.PDBKey: map[string]any{}}
			},
			hooks:     []string{"sync"},
			wantInMsg: memcached.DeploymentKey,
		},
	}
	for _, tt := range tests {
		for _, hook := range tt.hooks {
			t.Run(tt.name+"/"+hook, func(t *testing.T) {
				req := testutil.DecodeObject(t, testutil.CaptureBody(t, "v2/0040-sync.json", "sync"))
				tt.change(req)
				out, err := tryHook(hook, testutil.MustMarshal(t, req), fixedNow)
				if err == nil {
					t.Fatalf("got answer %s, want an error", testutil.Truncate(out))
				}
				re := requestError(t, err)
				if !strings.Contains(re.Error(), tt.wantInMsg) {
					t.Errorf("error %q does not name %q", re.Error(), tt.wantInMsg)
				}
			})
		}
	}
}
