package integration

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// notKept lists every path that sent sets and stored does not hold as
// sent. The API server drops a field behind a feature gate that is off
// without an error (a dry run alone does not show it), so this is how the
// suite proves, on the oldest Kubernetes the README supports, that every
// field the hook writes takes effect. Admission may add to a list of
// tolerations (the not-ready and unreachable ones); what was sent must
// come first.
func notKept(path string, sent, stored any) []string {
	switch w := sent.(type) {
	case map[string]any:
		g, ok := stored.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: sent an object, stored %v", path, stored)}
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var out []string
		for _, k := range keys {
			if w[k] == nil {
				// null is nothing sent (API servers before 1.33 write a
				// template's creationTimestamp as null); the server may
				// fill it in.
				continue
			}
			gv, ok := g[k]
			if !ok {
				out = append(out, fmt.Sprintf("%s.%s: dropped (sent %v)", path, k, w[k]))
				continue
			}
			out = append(out, notKept(path+"."+k, w[k], gv)...)
		}
		return out
	case []any:
		g, ok := stored.([]any)
		if ok && strings.HasSuffix(path, ".tolerations") && len(g) > len(w) {
			g = g[:len(w)]
		}
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: sent %d items, stored %v", path, len(w), stored)}
		}
		var out []string
		for i := range w {
			out = append(out, notKept(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return out
	default:
		if !reflect.DeepEqual(sent, stored) {
			return []string{fmt.Sprintf("%s: sent %v, stored %v", path, sent, stored)}
		}
		return nil
	}
}

// TestNotKept checks notKept itself, without a cluster.
func TestNotKept(t *testing.T) {
	tests := []struct {
		name          string
		sent, stored  string
		wantLostPaths []string
	}{
		{"identical", `{"a":{"b":[1,2]}}`, `{"a":{"b":[1,2]}}`, nil},
		{"defaults added", `{"a":{}}`, `{"a":{"x":1},"y":2}`, nil},
		{"a field dropped", `{"spec":{"lifecycle":{"preStop":{"sleep":{"seconds":10}}}}}`, `{"spec":{"lifecycle":{"preStop":{}}}}`, []string{"x.spec.lifecycle.preStop.sleep"}},
		{"a value changed", `{"a":"1Mi"}`, `{"a":"1048576"}`, []string{"x.a"}},
		{"a null sent", `{"a":null}`, `{}`, nil},
		{"a null sent, filled in", `{"creationTimestamp":null}`, `{"creationTimestamp":"2026-11-23T12:03:55Z"}`, nil},
		{"tolerations appended by admission", `{"tolerations":[{"key":"k"}]}`, `{"tolerations":[{"key":"k"},{"key":"not-ready"}]}`, nil},
		{"another list grown", `{"args":["-m"]}`, `{"args":["-m","64"]}`, []string{"x.args"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sent, stored any
			mustUnmarshal(t, []byte(tt.sent), &sent)
			mustUnmarshal(t, []byte(tt.stored), &stored)
			var got []string
			for _, l := range notKept("x", sent, stored) {
				got = append(got, strings.SplitN(l, ":", 2)[0])
			}
			if !reflect.DeepEqual(got, tt.wantLostPaths) {
				t.Errorf("notKept = %q, want paths %q", got, tt.wantLostPaths)
			}
		})
	}
}
