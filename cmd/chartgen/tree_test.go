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

// TestLabelsTail checks a labels value's tail (addLabels): without the
// value the template renders byte for byte what it renders without the
// tail, and with it the labels end the map.
func TestLabelsTail(t *testing.T) {
	const obj = `{kind: PodMonitor, metadata: {labels: {app: x}, name: pm}, spec: {port: admin}}`
	emit := func(tail bool) string {
		t.Helper()
		var v map[string]any
		if err := yaml.Unmarshal([]byte(obj), &v); err != nil {
			t.Fatal(err)
		}
		tt := &templated{obj: object{kind: "PodMonitor", name: "pm", value: v}, node: fromValue(v)}
		if tail {
			if _, err := addLabels([]*templated{tt}, labelsValue{key: "extra", kinds: []string{"PodMonitor"}}); err != nil {
				t.Fatal(err)
			}
		}
		w := &emitter{cond: func([]string) string { return "true" }}
		if err := w.mapBody(tt.node, 0, false); err != nil {
			t.Fatal(err)
		}
		return w.b.String()
	}
	// Helm's toYaml and nindent.
	funcs := template.FuncMap{
		"toYaml": func(v any) string {
			out, err := yaml.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			return strings.TrimSuffix(string(out), "\n")
		},
		"nindent": func(n int, s string) string {
			pad := strings.Repeat(" ", n)
			return "\n" + pad + strings.ReplaceAll(s, "\n", "\n"+pad)
		},
	}
	render := func(text string, extra map[string]any) string {
		t.Helper()
		tmpl, err := template.New("t").Funcs(funcs).Parse(text)
		if err != nil {
			t.Fatalf("%v\n%s", err, text)
		}
		var out strings.Builder
		if err := tmpl.Execute(&out, map[string]any{"Values": map[string]any{"extra": extra}}); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	plain := render(emit(false), nil)
	tests := []struct {
		name  string
		extra map[string]any
		want  string
	}{
		{name: "no value", extra: nil, want: plain},
		{name: "an empty value", extra: map[string]any{}, want: plain},
		{name: "labels", extra: map[string]any{"release": "kps", "team": "cache"},
			want: "kind: PodMonitor\nmetadata:\n  labels:\n    app: x\n    release: kps\n    team: cache\n  name: pm\nspec:\n  port: admin\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := render(emit(true), tt.extra); got != tt.want {
				t.Errorf("rendered:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

// TestFindIn checks that a value's path sees what its component adds to
// a base object, and find (the base alone) does not.
func TestFindIn(t *testing.T) {
	n, err := build(`rules: [{from: metacontroller}]`, `rules: [{from: metacontroller}, {from: monitoring}]`, `rules: [{from: metacontroller}]`, `rules: [{from: metacontroller}, {from: monitoring}]`)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		component string
		path      []string
		want      any // the scalar found; nil: not found
	}{
		{name: "the base's item", path: []string{"rules", "0", "from"}, want: "metacontroller"},
		{name: "the component's item, from the base", path: []string{"rules", "1", "from"}},
		{name: "the component's item, from the component", component: "a", path: []string{"rules", "1", "from"}, want: "monitoring"},
		{name: "another component's view", component: "b", path: []string{"rules", "1", "from"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := n.findIn(tt.component, tt.path...)
			switch {
			case tt.want == nil && err == nil:
				t.Errorf("found %v, want nothing", got.scalar)
			case tt.want != nil && err != nil:
				t.Errorf("%v, want %v", err, tt.want)
			case tt.want != nil && got.scalar != tt.want:
				t.Errorf("found %v, want %v", got.scalar, tt.want)
			}
		})
	}
}
