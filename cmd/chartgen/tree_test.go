package main

import (
	"strings"
	"testing"
	"text/template"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// TestTemplate builds the node of a base value and of what components a
// and b make of it, alone and together (as kustomize would build them),
// writes it as a template, and renders the template for each combination
// of a and b: each must give what kustomize would.
func TestTemplate(t *testing.T) {
	tests := []struct {
		name string
		base string
		a, b string // each component alone
		all  string // both
		// want is what the chart renders, by enabled components; "" is
		// the base, "a+b" is all.
		want map[string]string
	}{
		{
			name: "appended list items",
			base: `args: [x]`,
			a:    `args: [x, a1, a2]`,
			b:    `args: [x, b1]`,
			all:  `args: [x, a1, a2, b1]`,
			want: map[string]string{"a": `args: [x, a1, a2]`, "b": `args: [x, b1]`},
		},
		{
			name: "items put first, as a strategic merge patch does",
			base: `volumes: [{name: m}]`,
			a:    `volumes: [{name: a}, {name: m}]`,
			b:    `volumes: [{name: b}, {name: m}]`,
			all:  `volumes: [{name: b}, {name: a}, {name: m}]`,
			want: map[string]string{"a": `volumes: [{name: a}, {name: m}]`, "b": `volumes: [{name: b}, {name: m}]`},
		},
		{
			name: "a key both add",
			base: `containers: [{name: hook}]`,
			a:    `{containers: [{name: hook, volumeMounts: [{name: a}]}], volumes: [{name: a}]}`,
			b:    `{containers: [{name: hook, volumeMounts: [{name: b}]}], volumes: [{name: b}]}`,
			all:  `{containers: [{name: hook, volumeMounts: [{name: b}, {name: a}]}], volumes: [{name: b}, {name: a}]}`,
			want: map[string]string{
				"a": `{containers: [{name: hook, volumeMounts: [{name: a}]}], volumes: [{name: a}]}`,
				"b": `{containers: [{name: hook, volumeMounts: [{name: b}]}], volumes: [{name: b}]}`,
			},
		},
		{
			name: "a scalar both replace: the last one wins",
			base: `{port: 80, protocol: http}`,
			a:    `{port: 443, protocol: https}`,
			b:    `{port: 8443, protocol: http}`,
			all:  `{port: 8443, protocol: https}`,
			want: map[string]string{"a": `{port: 443, protocol: https}`, "b": `{port: 8443, protocol: http}`},
		},
		{
			name: "a key added and a scalar replaced by one component",
			base: `httpGet: {path: /readyz, port: http}`,
			a:    `httpGet: {path: /readyz, port: https, scheme: HTTPS}`,
			b:    `httpGet: {path: /readyz, port: http}`,
			all:  `httpGet: {path: /readyz, port: https, scheme: HTTPS}`,
			want: map[string]string{"a": `httpGet: {path: /readyz, port: https, scheme: HTTPS}`, "b": `httpGet: {path: /readyz, port: http}`},
		},
		{
			name: "a list item changed in place",
			base: `ports: [{name: http, port: 80}]`,
			a:    `ports: [{name: https, port: 443}]`,
			b:    `ports: [{name: http, port: 80}, {name: metrics, port: 9090}]`,
			all:  `ports: [{name: https, port: 443}, {name: metrics, port: 9090}]`,
			want: map[string]string{"a": `ports: [{name: https, port: 443}]`, "b": `ports: [{name: http, port: 80}, {name: metrics, port: 9090}]`},
		},
		{
			name: "template delimiters in a value",
			base: `{msg: "{{ not a template }}", list: ["{{x}}"]}`,
			a:    `{msg: "{{ not a template }}", list: ["{{x}}", "{{y}}"]}`,
			b:    `{msg: "{{ not a template }}", list: ["{{x}}"]}`,
			all:  `{msg: "{{ not a template }}", list: ["{{x}}", "{{y}}"]}`,
			want: map[string]string{"a": `{msg: "{{ not a template }}", list: ["{{x}}", "{{y}}"]}`, "b": `{msg: "{{ not a template }}", list: ["{{x}}"]}`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := build(tt.base, tt.a, tt.b, tt.all)
			if err != nil {
				t.Fatal(err)
			}
			w := &emitter{cond: func(cs []string) string {
				if len(cs) == 1 {
					return ".Values." + cs[0] + ".enabled"
				}
				return "or .Values." + strings.Join(cs, ".enabled .Values.") + ".enabled"
			}}
			if err := w.mapBody(n, 0, false); err != nil {
				t.Fatal(err)
			}
			tmpl, err := template.New(tt.name).Parse(w.b.String())
			if err != nil {
				t.Fatalf("the template does not parse: %v\n%s", err, w.b.String())
			}
			want := map[string]string{"": tt.base, "a+b": tt.all}
			for k, v := range tt.want {
				want[k] = v
			}
			for combo, wantYAML := range want {
				var out strings.Builder
				on := func(c string) map[string]any { return map[string]any{"enabled": strings.Contains(combo, c)} }
				if err := tmpl.Execute(&out, map[string]any{"Values": map[string]any{"a": on("a"), "b": on("b")}}); err != nil {
					t.Fatalf("with %q: %v", combo, err)
				}
				got := decodeValue(t, out.String())
				if diff := cmp.Diff(decodeValue(t, wantYAML), got); diff != "" {
					t.Errorf("with %q enabled (-want +got):\n%s\ntemplate:\n%s", combo, diff, w.b.String())
				}
				if all := func(string) bool { return true }; combo == "a+b" {
					if diff := cmp.Diff(decodeValue(t, wantYAML), n.eval(all)); diff != "" {
						t.Errorf("eval with every component (-want +got):\n%s", diff)
					}
				}
			}
		})
	}
}

// TestTemplateRefuses checks that changes a chart value cannot express are
// errors that say what and where.
func TestTemplateRefuses(t *testing.T) {
	tests := []struct {
		name         string
		base, a, all string
		wantErr      string
	}{
		{name: "a removed key", base: `{keep: 1, drop: 2}`, a: `{keep: 1}`, all: `{keep: 1}`, wantErr: `a removes "drop"`},
		{name: "removed list items", base: `l: [1, 2]`, a: `l: [1]`, all: `l: [1]`, wantErr: ".l: a removes list items"},
		{name: "a map made a scalar", base: `m: {k: v}`, a: `m: 1`, all: `m: 1`, wantErr: ".m: a turns a map into the scalar 1"},
		{name: "a list reordered", base: `l: [1, 2]`, a: `l: [2, 1, 3]`, all: `l: [2, 1, 3]`, wantErr: ".l: a changes the list's items"},
		{
			name: "together, not what one at a time gives",
			base: `count: 1`, a: `count: 2`, all: `count: 3`,
			wantErr: ".count: with every component, kustomize builds 3 but the components one at a time give 2",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := build(tt.base, tt.a, tt.base, tt.all)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("got error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// build is the node of base with components a and b, as generate makes
// it from kustomize builds.
func build(base, a, b, all string) (*node, error) {
	var bv, av, cv, allv any
	for _, p := range []struct {
		s string
		v *any
	}{{base, &bv}, {a, &av}, {b, &cv}, {all, &allv}} {
		if err := yaml.Unmarshal([]byte(p.s), p.v); err != nil {
			return nil, err
		}
	}
	n := fromValue(bv)
	if err := n.apply(bv, av, "a", ""); err != nil {
		return nil, err
	}
	if err := n.apply(bv, cv, "b", ""); err != nil {
		return nil, err
	}
	if err := n.order(allv, ""); err != nil {
		return nil, err
	}
	return n, nil
}

func decodeValue(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%v:\n%s", err, s)
	}
	if v == nil {
		v = map[string]any{}
	}
	return v
}
