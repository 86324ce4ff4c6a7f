package main

import (
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// An emitter writes nodes as a Helm template: block-style YAML, keys in
// order, sequences not indented (as kubectl kustomize writes them), each
// conditional part between {{- if ... }} and {{- end }} lines at its own
// indentation. cond turns a node's components into the template condition.
type emitter struct {
	b    strings.Builder
	cond func(components []string) string
}

// line writes one line at indent.
func (w *emitter) line(indent int, s string) {
	w.b.WriteString(strings.Repeat(" ", indent))
	w.b.WriteString(s)
	w.b.WriteByte('\n')
}

// text writes YAML text, each line at indent, with every "{{" in it
// escaped so that the template writes it as it is.
func (w *emitter) text(indent int, s string) {
	for l := range strings.Lines(s) {
		l = strings.TrimSuffix(l, "\n")
		if l == "" {
			w.b.WriteByte('\n')
			continue
		}
		w.line(indent, escape(l))
	}
}

func escape(s string) string {
	return strings.ReplaceAll(s, "{{", `{{ "{{" }}`)
}

// open and close bracket what only some components make present.
func (w *emitter) open(indent int, when []string) {
	if len(when) > 0 {
		w.line(indent, "{{- if "+w.cond(when)+" }}")
	}
}

func (w *emitter) close(indent int, when []string) {
	if len(when) > 0 {
		w.line(indent, "{{- end }}")
	}
}

// mapBody writes a map's entries at indent. The entries that one
// component alone adds or replaces go in one if/else block, where the
// first of them is (or, in a list item, after the others, so that the
// item's dash starts with a key that is always there): a reader then sees
// at once what the component changes here.
func (w *emitter) mapBody(n *node, indent int, inItem bool) error {
	groups := map[string][]*entry{}
	for _, e := range n.entries {
		if c := soleComponent(e); c != "" {
			groups[c] = append(groups[c], e)
		}
	}
	var done []string
	write := func(c string) error {
		if slices.Contains(done, c) {
			return nil
		}
		done = append(done, c)
		return w.group(c, groups[c], indent)
	}
	for _, e := range n.entries {
		c := soleComponent(e)
		if c == "" {
			w.open(indent, e.when)
			if err := w.entry(e.key, e.val, indent); err != nil {
				return err
			}
			w.close(indent, e.when)
			continue
		}
		if !inItem {
			if err := write(c); err != nil {
				return err
			}
		}
	}
	if inItem {
		for _, e := range n.entries {
			if c := soleComponent(e); c != "" {
				if err := write(c); err != nil {
					return err
				}
			}
		}
	}
	for _, l := range n.tail {
		w.line(indent, strings.ReplaceAll(l, "%d", fmt.Sprint(indent)))
	}
	return nil
}

// soleComponent is the component that alone decides an entry: it adds the
// entry, or replaces its value, and nothing else does. "" when there is
// none or more than one.
func soleComponent(e *entry) string {
	switch {
	case len(e.when) == 1 && len(e.val.overrides) == 0:
		return e.when[0]
	case len(e.when) == 0 && len(e.val.overrides) == 1:
		return e.val.overrides[0].when
	}
	return ""
}

// group writes entries that component c alone decides: as they are while
// c is enabled, then, after {{- else }}, as they are while it is not (if
// any is there then).
func (w *emitter) group(c string, entries []*entry, indent int) error {
	w.line(indent, "{{- if "+w.cond([]string{c})+" }}")
	var otherwise []*entry
	for _, e := range entries {
		val := e.val
		if len(e.when) == 0 {
			otherwise = append(otherwise, e)
			val = e.val.overrides[0].val
		}
		if err := w.entry(e.key, val, indent); err != nil {
			return err
		}
	}
	if len(otherwise) > 0 {
		w.line(indent, "{{- else }}")
		for _, e := range otherwise {
			base := *e.val
			base.overrides = nil
			if err := w.entry(e.key, &base, indent); err != nil {
				return err
			}
		}
	}
	w.line(indent, "{{- end }}")
	return nil
}

// entry writes "key: value" at indent.
func (w *emitter) entry(key string, n *node, indent int) error {
	return w.overridden(n, indent, func(n *node) error { return w.entryValue(key, n, indent) })
}

// overridden writes n with write, between the conditions of its
// overrides: the last one first, as the last enabled one wins.
func (w *emitter) overridden(n *node, indent int, write func(*node) error) error {
	if len(n.overrides) == 0 {
		return write(n)
	}
	for i := len(n.overrides) - 1; i >= 0; i-- {
		o := n.overrides[i]
		verb := "else if"
		if i == len(n.overrides)-1 {
			verb = "if"
		}
		w.line(indent, "{{- "+verb+" "+w.cond([]string{o.when})+" }}")
		if err := write(o.val); err != nil {
			return err
		}
	}
	w.line(indent, "{{- else }}")
	base := *n
	base.overrides = nil
	if err := write(&base); err != nil {
		return err
	}
	w.line(indent, "{{- end }}")
	return nil
}

func (w *emitter) entryValue(key string, n *node, indent int) error {
	k, err := yamlScalar(key)
	if err != nil {
		return err
	}
	switch {
	case n.tmpl != "":
		w.line(indent, k+": "+n.tmpl)
	case n.block != "":
		w.line(indent, k+":")
		w.line(indent+2, fmt.Sprintf(n.block, indent+2))
	case n.plain():
		out, err := yaml.Marshal(map[string]any{key: n.value()})
		if err != nil {
			return err
		}
		w.text(indent, string(out))
	case n.kind == mapNode:
		w.line(indent, k+":")
		return w.mapBody(n, indent+2, false)
	case n.kind == listNode:
		w.line(indent, k+":")
		return w.listBody(n, indent)
	default:
		return fmt.Errorf("%s: nothing to write", key)
	}
	return nil
}

// listBody writes a list's items, their dashes at indent; consecutive
// items present under the same condition share one if block.
func (w *emitter) listBody(n *node, indent int) error {
	for i, it := range n.items {
		if i == 0 || !slices.Equal(n.items[i-1].when, it.when) {
			w.open(indent, it.when)
		}
		if err := w.overridden(it.val, indent, func(n *node) error { return w.item(n, indent) }); err != nil {
			return err
		}
		if i == len(n.items)-1 || !slices.Equal(n.items[i+1].when, it.when) {
			w.close(indent, it.when)
		}
	}
	return nil
}

// item writes "- value" at indent.
func (w *emitter) item(n *node, indent int) error {
	switch {
	case n.tmpl != "":
		w.line(indent, "- "+n.tmpl)
	case n.plain():
		out, err := yaml.Marshal([]any{n.value()})
		if err != nil {
			return err
		}
		w.text(indent, string(out))
	case n.kind == mapNode:
		// The body as it would be below a key, its first line then moved
		// up onto the dash.
		sub := &emitter{cond: w.cond}
		if err := sub.mapBody(n, indent+2, true); err != nil {
			return err
		}
		body := sub.b.String()
		pad := strings.Repeat(" ", indent+2)
		if rest, ok := strings.CutPrefix(body, pad); ok && !strings.HasPrefix(rest, "{{") {
			w.b.WriteString(strings.Repeat(" ", indent) + "- " + rest)
		} else {
			w.line(indent, "-")
			w.b.WriteString(body)
		}
	case n.kind == listNode:
		w.line(indent, "-")
		return w.listBody(n, indent+2)
	default:
		return fmt.Errorf("a list item with nothing to write")
	}
	return nil
}

// yamlScalar is v written as a one-line YAML scalar.
func yamlScalar(v any) (string, error) {
	out, err := yaml.Marshal(v)
	if err != nil {
		return "", err
	}
	s := strings.TrimSuffix(string(out), "\n")
	if strings.Contains(s, "\n") {
		return "", fmt.Errorf("%q is not a one-line scalar", v)
	}
	return escape(s), nil
}
