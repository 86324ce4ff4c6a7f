package main

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// A node is one value of a rendered object, with what each component does
// to it. The base rendering gives every node; a component can add map
// entries and list items (present only while it is enabled) and replace
// scalars (overrides). Enabling several components then gives what
// kustomize gives when it applies them in the same order, as long as each
// component's change is an addition or a replacement of that kind, which is
// all chartgen accepts: anything else (a removal, a map turned into a
// scalar) is an error, not a guess.
type node struct {
	kind nodeKind
	// scalar is a scalarNode's value: the base's, or for a value only a
	// component adds, that of the first component that adds it.
	scalar any
	// entries are a mapNode's keys, sorted.
	entries []*entry
	// items are a listNode's items: the base's first, then the ones
	// components append, in component order.
	items []*item
	// overrides replace the node's value while their component is
	// enabled; the last enabled one wins, as the last patch applied does.
	overrides []override
	// tmpl, when set, is the template expression written instead of the
	// scalar (a value of the chart, or the release's namespace).
	tmpl string
	// block, when set, is a template action written on the line after
	// "key:" that renders the whole value, with %d standing for its
	// indentation.
	block string
	// tail, when set, are template lines written after a map's entries,
	// at their indentation, with %d standing for it: entries a value
	// adds (labels), which render as nothing while it is empty.
	tail []string
}

type nodeKind int

const (
	scalarNode nodeKind = iota
	mapNode
	listNode
)

// entry is a map key and its value, present always (when is empty) or while
// any component in when is enabled.
type entry struct {
	key  string
	when []string
	val  *node
}

// item is a list item, present always (when is empty) or while any
// component in when is enabled.
type item struct {
	when []string
	val  *node
}

// override is the value a node takes while the component when is enabled.
type override struct {
	when string
	val  *node
}

// fromValue is the node of a decoded YAML value (maps, lists, scalars),
// with nothing conditional in it.
func fromValue(v any) *node {
	switch v := v.(type) {
	case map[string]any:
		n := &node{kind: mapNode}
		for _, k := range sortedKeys(v) {
			n.entries = append(n.entries, &entry{key: k, val: fromValue(v[k])})
		}
		return n
	case []any:
		n := &node{kind: listNode}
		for _, x := range v {
			n.items = append(n.items, &item{val: fromValue(x)})
		}
		return n
	default:
		return &node{kind: scalarNode, scalar: v}
	}
}

// value is the plain value of a node that has nothing conditional in it.
func (n *node) value() any {
	switch n.kind {
	case mapNode:
		m := make(map[string]any, len(n.entries))
		for _, e := range n.entries {
			m[e.key] = e.val.value()
		}
		return m
	case listNode:
		l := make([]any, 0, len(n.items))
		for _, it := range n.items {
			l = append(l, it.val.value())
		}
		return l
	default:
		return n.scalar
	}
}

// plain reports whether n and everything in it is the same whatever the
// values are, so that it can be written as plain YAML.
func (n *node) plain() bool {
	if len(n.overrides) > 0 || n.tmpl != "" || n.block != "" || len(n.tail) > 0 {
		return false
	}
	for _, e := range n.entries {
		if len(e.when) > 0 || !e.val.plain() {
			return false
		}
	}
	for _, it := range n.items {
		if len(it.when) > 0 || !it.val.plain() {
			return false
		}
	}
	return true
}

func (n *node) entry(key string) *entry {
	for _, e := range n.entries {
		if e.key == key {
			return e
		}
	}
	return nil
}

// insert adds e in key order.
func (n *node) insert(e *entry) {
	i, _ := slices.BinarySearchFunc(n.entries, e.key, func(e *entry, k string) int { return strings.Compare(e.key, k) })
	n.entries = slices.Insert(n.entries, i, e)
}

// apply records in n, the node of the base value base, what component c
// changes in it: c's rendering of the same value is v.
func (n *node) apply(base, v any, c, path string) error {
	switch b := base.(type) {
	case map[string]any:
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: %s turns a map into %s", path, c, describe(v))
		}
		for _, k := range sortedKeys(b) {
			if _, ok := m[k]; !ok {
				return fmt.Errorf("%s: %s removes %q, which a chart value cannot express", path, c, k)
			}
		}
		for _, k := range sortedKeys(m) {
			var err error
			if bv, inBase := b[k]; inBase {
				err = n.entry(k).val.apply(bv, m[k], c, path+"."+k)
			} else {
				err = n.addKey(k, m[k], c, path)
			}
			if err != nil {
				return err
			}
		}
		return nil
	case []any:
		l, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s: %s turns a list into %s", path, c, describe(v))
		}
		if len(l) < len(b) {
			return fmt.Errorf("%s: %s removes list items, which a chart value cannot express", path, c)
		}
		// The base's items are where they are in c's list, after those
		// c puts before them (a strategic merge patch puts new items of
		// a list merged by key first) and before those c appends.
		at := offset(b, l)
		if at < 0 {
			return fmt.Errorf("%s: %s changes the list's items in a way chartgen cannot follow (neither adding before nor after them)", path, c)
		}
		baseItems := n.baseItems()
		for i := range b {
			if err := baseItems[i].val.apply(b[i], l[at+i], c, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
		var front []*item
		for _, x := range l[:at] {
			front = append(front, &item{when: []string{c}, val: fromValue(x)})
		}
		n.items = append(front, n.items...)
		for _, x := range l[at+len(b):] {
			n.items = append(n.items, &item{when: []string{c}, val: fromValue(x)})
		}
		return nil
	default:
		if reflect.DeepEqual(base, v) {
			return nil
		}
		if !isScalar(v) {
			return fmt.Errorf("%s: %s turns a scalar into %s", path, c, describe(v))
		}
		n.overrides = append(n.overrides, override{when: c, val: fromValue(v)})
		return nil
	}
}

// baseItems are a list's items that are always there: those of the base.
func (n *node) baseItems() []*item {
	var items []*item
	for _, it := range n.items {
		if len(it.when) == 0 {
			items = append(items, it)
		}
	}
	return items
}

// offset is where the base list b sits in l, a component's rendering of
// it: the first position from which each of b's items is at the same
// place in l, equal or the same item changed (a map with the same name),
// or -1. When l is as long as b, nothing moved.
func offset(b, l []any) int {
	if len(l) == len(b) {
		return 0
	}
	for at := 0; at+len(b) <= len(l); at++ {
		ok := true
		for i := range b {
			if !sameItem(b[i], l[at+i]) {
				ok = false
				break
			}
		}
		if ok {
			return at
		}
	}
	return -1
}

// sameItem reports whether two list items are the same one, maybe
// changed: equal, or maps with the same name.
func sameItem(x, y any) bool {
	if reflect.DeepEqual(x, y) {
		return true
	}
	mx, okx := x.(map[string]any)
	my, oky := y.(map[string]any)
	return okx && oky && mx["name"] != nil && reflect.DeepEqual(mx["name"], my["name"])
}

// eval is n's value while the components on says are enabled: what the
// chart renders then.
func (n *node) eval(on func(string) bool) any {
	for i := len(n.overrides) - 1; i >= 0; i-- {
		if on(n.overrides[i].when) {
			return n.overrides[i].val.eval(on)
		}
	}
	present := func(when []string) bool {
		return len(when) == 0 || slices.ContainsFunc(when, on)
	}
	switch n.kind {
	case mapNode:
		m := map[string]any{}
		for _, e := range n.entries {
			if present(e.when) {
				m[e.key] = e.val.eval(on)
			}
		}
		return m
	case listNode:
		l := []any{}
		for _, it := range n.items {
			if present(it.when) {
				l = append(l, it.val.eval(on))
			}
		}
		return l
	default:
		return n.scalar
	}
}

// order puts the items of every list in n in the order they have in all,
// the build with every component enabled (kustomize puts the items a
// component adds after the base's, or before them, each component in
// turn), and fails unless n, every component enabled, then gives all.
func (n *node) order(all any, path string) error {
	every := func(string) bool { return true }
	for i := len(n.overrides) - 1; i >= 0; i-- {
		// The last override is the value then: a scalar.
		return compareValue(n.overrides[i].val.eval(every), all, path)
	}
	switch n.kind {
	case mapNode:
		m, ok := all.(map[string]any)
		if !ok || len(m) != len(n.entries) {
			return compareValue(n.eval(every), all, path)
		}
		for _, e := range n.entries {
			v, ok := m[e.key]
			if !ok {
				return compareValue(n.eval(every), all, path)
			}
			if err := e.val.order(v, path+"."+e.key); err != nil {
				return err
			}
		}
		return nil
	case listNode:
		l, ok := all.([]any)
		if !ok || len(l) != len(n.items) {
			return compareValue(n.eval(every), all, path)
		}
		// Each item is the first unused one of all that is equal or, for
		// a map, has the same name: lists inside it are not in order yet.
		at := make(map[*item]int, len(n.items))
		used := make([]bool, len(l))
		for _, it := range n.items {
			v := it.val.eval(every)
			j := -1
			for k, x := range l {
				if !used[k] && sameItem(v, x) {
					j = k
					break
				}
			}
			if j < 0 {
				return compareValue(n.eval(every), all, path)
			}
			used[j] = true
			at[it] = j
		}
		slices.SortStableFunc(n.items, func(a, b *item) int { return at[a] - at[b] })
		for i, it := range n.items {
			if err := it.val.order(l[i], path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
		return nil
	default:
		return compareValue(n.scalar, all, path)
	}
}

func compareValue(got, want any, path string) error {
	if reflect.DeepEqual(got, want) {
		return nil
	}
	return fmt.Errorf("%s: with every component, kustomize builds %.300v but the components one at a time give %.300v: they change it together in a way chartgen cannot express", path, want, got)
}

// add records that component c also adds e, which earlier components
// added, with the value v.
func (e *entry) add(v any, c, path string) error {
	before := e.when
	e.when = append(slices.Clone(e.when), c)
	return e.val.merge(before, v, c, path)
}

// addKey records that component c adds the key k, with the value v, to
// the map node n at path: to the entry that earlier components added, or
// as an entry of c's alone.
func (n *node) addKey(k string, v any, c, path string) error {
	if e := n.entry(k); e != nil {
		return e.add(v, c, path+"."+k)
	}
	n.insert(&entry{key: k, when: []string{c}, val: fromValue(v)})
	return nil
}

// merge records that component c adds v where the components before (and
// only they) added n: what they added stays theirs, and what c adds is
// c's. A list gets c's items after theirs, as a patch appends them.
func (n *node) merge(before []string, v any, c, path string) error {
	switch n.kind {
	case mapNode:
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: %s adds %s where another component adds a map", path, c, describe(v))
		}
		for _, e := range n.entries {
			if len(e.when) == 0 {
				e.when = slices.Clone(before)
			}
		}
		for _, k := range sortedKeys(m) {
			if err := n.addKey(k, m[k], c, path); err != nil {
				return err
			}
		}
		return nil
	case listNode:
		l, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s: %s adds %s where another component adds a list", path, c, describe(v))
		}
		for _, it := range n.items {
			if len(it.when) == 0 {
				it.when = slices.Clone(before)
			}
		}
		for _, x := range l {
			n.items = append(n.items, &item{when: []string{c}, val: fromValue(x)})
		}
		return nil
	default:
		if !isScalar(v) {
			return fmt.Errorf("%s: %s adds %s where another component adds a scalar", path, c, describe(v))
		}
		if len(n.overrides) == 0 && reflect.DeepEqual(n.scalar, v) {
			return nil
		}
		n.overrides = append(n.overrides, override{when: c, val: fromValue(v)})
		return nil
	}
}

// find returns the base node at path below n: each step is a map key, a
// list index, or name=value for the list item whose map has that entry.
func (n *node) find(path ...string) (*node, error) { return n.findIn("", path...) }

// findIn is find, where the steps also see the map entries and list items
// that component c (if not "") adds.
func (n *node) findIn(c string, path ...string) (*node, error) {
	visible := func(when []string) bool { return len(when) == 0 || c != "" && slices.Equal(when, []string{c}) }
	cur := n
	for i, step := range path {
		var next *node
		switch cur.kind {
		case mapNode:
			if e := cur.entry(step); e != nil && visible(e.when) {
				next = e.val
			}
		case listNode:
			var items []*item
			for _, it := range cur.items {
				if visible(it.when) {
					items = append(items, it)
				}
			}
			if k, want, ok := strings.Cut(step, "="); ok {
				for _, it := range items {
					if it.val.kind != mapNode {
						continue
					}
					if e := it.val.entry(k); e != nil && e.val.kind == scalarNode && e.val.scalar == want {
						next = it.val
						break
					}
				}
			} else if idx, err := strconv.Atoi(step); err == nil && idx >= 0 && idx < len(items) {
				next = items[idx].val
			}
		}
		if next == nil {
			return nil, fmt.Errorf("no %s", strings.Join(path[:i+1], "."))
		}
		cur = next
	}
	return cur, nil
}

// walk calls f on n and every node in it, overrides included.
func (n *node) walk(f func(key string, n *node)) {
	n.walkKey("", f)
}

func (n *node) walkKey(key string, f func(key string, n *node)) {
	f(key, n)
	for _, o := range n.overrides {
		o.val.walkKey(key, f)
	}
	for _, e := range n.entries {
		e.val.walkKey(e.key, f)
	}
	for _, it := range n.items {
		it.val.walkKey("", f)
	}
}

func isScalar(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return false
	}
	return true
}

func describe(v any) string {
	switch v.(type) {
	case map[string]any:
		return "a map"
	case []any:
		return "a list"
	case nil:
		return "null"
	}
	return fmt.Sprintf("the scalar %v", v)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
