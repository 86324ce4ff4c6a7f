package metacontroller

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"

	json "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
)

// Every request is decoded here, in one place and by one set of rules,
// because it is where the hook spends its time: a sync request for a
// 1,000-Pod Memcached is 4 to 5 MB of full Pod objects (managedFields and
// all) of which the hook reads a handful of fields. It uses the JSON v2
// implementation (github.com/go-json-experiment/json, a module, so no
// GOEXPERIMENT is needed anywhere) and walks the request with a
// jsontext.Decoder: the parent's metadata and spec, and the children, which
// are few, decode into their Go types; each Pod is walked by hand into the
// small Pod type; everything else (the controller, each Pod's spec and
// managedFields) is consumed whole by the decoder's validating scan, which
// materialises nothing. A sync request is first read another way, quicker
// still: scan (scan.go) validates it by the same rules, and the quick
// reader (quick.go) takes what the hook reads from the bytes scan
// approved; the decoder reads whatever either leaves to it, and so every
// request refused. BENCHMARKS.md has the figures that chose this.
//
// The rules are the API server's, stricter than encoding/json's; a
// Metacontroller (which encodes with Go's encoding/json) never breaks them:
//
//   - Field names match case-sensitively: "Parent" is not "parent", and in a
//     spec "SIZE" is not "size".
//   - A field the parent's spec does not have is an error, as with the API
//     server's strict field validation (the parent's other parts and the
//     children may carry anything).
//   - A duplicated object member name anywhere in the body is an error, not
//     "the last one wins": a request that could be read two ways is refused.
//   - Invalid UTF-8 anywhere in the body is an error, not silently replaced.
//   - A value of the wrong type is an error naming its JSON path and what
//     was expected.
//
// The hand walks are loops over an object's member names (object, array):
// the switch on the name stays in the walking function, where comparing
// name.String() with constants allocates nothing. A helper taking the step
// per member as a function was measured instead: it made a 1,000-Pod
// decode allocate 2.5 times as often, because each name then escapes as a
// string.

// DecodeSyncRequest decodes the body of a sync or finalize call. A JSON null
// body decodes to an empty request, which has no parent. It is read
// quickly (quickSyncRequest) where it can be, else by the decoder, the
// Pods' statuses quickly if they can be (decodeSyncRequest): all three
// give the same request, and only the decoder refuses one.
func DecodeSyncRequest(body []byte) (*SyncRequest, error) {
	if req, ok := quickSyncRequest(body); ok {
		return req, nil
	}
	req, err := decodeSyncRequest(body, false)
	if errors.Is(err, errNotQuick) {
		req, err = decodeSyncRequest(body, true)
	}
	return req, err
}

// decodeSyncRequest decodes a sync or finalize call, the Pods' statuses
// and labels read quickly (quick.go) unless exact.
func decodeSyncRequest(body []byte, exact bool) (*SyncRequest, error) {
	req := new(SyncRequest)
	err := decode(body, func(d *jsontext.Decoder) error {
		o := objectAt(d)
		for o.next() {
			switch o.name.String() {
			case "parent":
				o.err = decodeParent(d, &req.Parent)
			case "children":
				o.err = json.UnmarshalDecode(d, &req.Children)
			case "related":
				o.err = decodeRelated(d, req, exact)
			case "finalizing":
				req.Finalizing, o.err = readBool(d)
			default:
				o.err = skip(d)
			}
		}
		return o.err
	})
	if err != nil {
		return nil, err
	}
	return req, nil
}

// DecodeCustomizeRequest decodes the body of a customize call: only its
// parent is read.
func DecodeCustomizeRequest(body []byte) (*CustomizeRequest, error) {
	req := new(CustomizeRequest)
	err := decode(body, func(d *jsontext.Decoder) error {
		o := objectAt(d)
		for o.next() {
			if o.name.String() == "parent" {
				o.err = decodeParent(d, &req.Parent)
			} else {
				o.err = skip(d)
			}
		}
		return o.err
	})
	if err != nil {
		return nil, err
	}
	return req, nil
}

// DecodeMemcached decodes a Memcached object on its own, as `kubectl get
// memcached NAME -o json` prints it and a watch event carries it, by the
// rules a hook request's parent is decoded with: the agent reads the
// object it follows through here, so that it and the hook cannot read one
// object two ways. A spec that is not a Memcached spec is no error (see
// Parent.SpecError); anything else that is not a Memcached is.
func DecodeMemcached(body []byte) (*Parent, error) {
	var p *Parent
	err := decode(body, func(d *jsontext.Decoder) error { return decodeParent(d, &p) })
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, &Error{Msg: "got null, want a Memcached object"}
	}
	if p.APIVersion != v1alpha1.APIVersion || p.Kind != v1alpha1.Kind {
		return nil, &Error{Msg: fmt.Sprintf("got apiVersion %q and kind %q, want %q and %q", p.APIVersion, p.Kind, v1alpha1.APIVersion, v1alpha1.Kind)}
	}
	return p, nil
}

// decode runs walk over body with a pooled decoder, checks that nothing
// but white space follows the top-level value, and describes any error.
func decode(body []byte, walk func(*jsontext.Decoder) error) error {
	d := newDecoder(body)
	defer freeDecoder(d)
	err := walk(d)
	if err == nil {
		var tok jsontext.Token
		if tok, err = d.ReadToken(); err == io.EOF {
			return nil
		} else if err == nil {
			err = fmt.Errorf("unexpected %s after the top-level value", kindName(tok.Kind()))
		}
	}
	return describe(err, "", int64(len(body)), d.InputOffset())
}

// specOptions are the API server's rules for a spec: a field the type does
// not have is an error.
var specOptions = json.RejectUnknownMembers(true)

// parentOptions decode the parent's metadata without its managedFields,
// which the hook never reads: they are skipped with one scan instead of
// decoded entry by entry (timestamps parsed, fieldsV1 copied), the larger
// part of a small request's parent.
var parentOptions = json.WithUnmarshalers(json.UnmarshalFromFunc(func(d *jsontext.Decoder, _ *[]metav1.ManagedFieldsEntry) error {
	return skip(d)
}))

// decodeParent reads the parent, or leaves *p nil for a JSON null.
func decodeParent(d *jsontext.Decoder, pp **Parent) error {
	if d.PeekKind() == 'n' {
		_, err := d.ReadToken()
		return err
	}
	p := new(Parent)
	*pp = p
	o := objectAt(d)
	for o.next() {
		switch o.name.String() {
		case "apiVersion":
			p.APIVersion, o.err = readString(d)
		case "kind":
			p.Kind, o.err = readString(d)
		case "metadata":
			o.err = json.UnmarshalDecode(d, &p.ObjectMeta, parentOptions)
		case "spec":
			o.err = decodeSpec(d, p)
		case "status":
			o.err = decodeStatus(d, &p.Status)
		default:
			o.err = skip(d)
		}
	}
	return o.err
}

// decodeSpec reads the parent's spec by the API server's rules. A spec that
// is well-formed JSON but not a Memcached spec is no request error: it
// leaves the spec empty and says why in SpecError.
func decodeSpec(d *jsontext.Decoder, p *Parent) error {
	raw, err := d.ReadValue()
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, &p.Spec, specOptions); err != nil {
		p.Spec = v1alpha1.MemcachedSpec{}
		p.SpecError = describe(err, "spec", int64(len(raw)), 0)
		var sem *json.SemanticError
		if errors.As(err, &sem) {
			p.SpecError.Path = typedPath("spec", reflect.TypeFor[v1alpha1.MemcachedSpec](), sem.JSONPointer)
		}
	}
	return nil
}

// decodeStatus reads what the hook carries forward from the parent's
// status: the well-formed conditions, the slot table (each zone's too), the hand-offs and
// the endpoints and slot addresses clients are given. Whatever else the status holds, in whatever shape, is skipped,
// and so is a part that does not decode: a status written by an older hook
// or edited by hand, whatever its shape, cannot fail every call. (A slot
// table that does not decode is rebuilt from the Pods.)
func decodeStatus(d *jsontext.Decoder, st *v1alpha1.MemcachedStatus) error {
	if d.PeekKind() != '{' {
		return skip(d)
	}
	o := objectAt(d)
	for o.next() {
		switch name := o.name.String(); {
		case name == "conditions" && d.PeekKind() == '[':
			a := arrayAt(d)
			for a.next() {
				var raw jsontext.Value
				if raw, a.err = d.ReadValue(); a.err == nil {
					var c metav1.Condition
					if json.Unmarshal(raw, &c) == nil {
						st.Conditions = append(st.Conditions, c)
					}
				}
			}
			o.err = a.err
		case name == "slotTable" && d.PeekKind() == '{':
			var raw jsontext.Value
			if raw, o.err = d.ReadValue(); o.err == nil {
				if t, ok := decodeSlotTable(raw); ok {
					st.SlotTable = t
				}
			}
		case name == "zones" && d.PeekKind() == '[':
			a := arrayAt(d)
			for a.next() {
				var raw jsontext.Value
				if raw, a.err = d.ReadValue(); a.err == nil {
					if z, ok := decodeZone(raw); ok {
						st.Zones = append(st.Zones, z)
					}
				}
			}
			o.err = a.err
		case name == "handoffs" && d.PeekKind() == '[':
			var raw jsontext.Value
			if raw, o.err = d.ReadValue(); o.err == nil {
				var hs []v1alpha1.Handoff
				if json.Unmarshal(raw, &hs) == nil {
					st.Handoffs = hs
				}
			}
		case name == "configurationEndpoint" && d.PeekKind() == '"':
			st.ConfigurationEndpoint, o.err = readString(d)
		case name == "proxyEndpoint" && d.PeekKind() == '"':
			st.ProxyEndpoint, o.err = readString(d)
		case name == "slotAddresses" && d.PeekKind() == '[':
			var raw jsontext.Value
			if raw, o.err = d.ReadValue(); o.err == nil {
				var addrs []string
				if json.Unmarshal(raw, &addrs) == nil {
					st.SlotAddresses = addrs
				}
			}
		default:
			o.err = skip(d)
		}
	}
	return o.err
}

// decodeSlotTable reads a slot table the hook wrote. Anything that is not
// the shape the hook writes gives false: the table is then rebuilt from
// the Pods, never a request error. Whether its entries make sense (their
// order, above all) is for its readers (contract.Ordered). The table the
// hook wrote is read quickly (quickSlotTable); any other is unmarshaled.
// (A walk by hand, token by token, was measured: no faster at 1,000
// slots, where scanning the tokens is the cost.)
func decodeSlotTable(raw jsontext.Value) (v1alpha1.SlotTable, bool) {
	var t v1alpha1.SlotTable
	if quickSlotTable(raw, &t) {
		return t, true
	}
	t = v1alpha1.SlotTable{}
	if err := json.Unmarshal(raw, &t); err != nil {
		return v1alpha1.SlotTable{}, false
	}
	return t, true
}

// decodeZone reads a zone's status the hook wrote: its name and slot
// table. One that is not that shape gives false, and the zone's table is
// rebuilt from its Pods.
func decodeZone(raw jsontext.Value) (v1alpha1.ZoneStatus, bool) {
	var z v1alpha1.ZoneStatus
	if err := json.Unmarshal(raw, &z); err != nil || z.Name == "" {
		return v1alpha1.ZoneStatus{}, false
	}
	return z, true
}

// decodeRelated reads the related objects: the Pods, each walked by hand
// into the small Pod type (see podWalk), their statuses quickly unless
// exact. Related objects of other kinds are skipped.
func decodeRelated(d *jsontext.Decoder, req *SyncRequest, exact bool) error {
	o := objectAt(d)
	for o.next() {
		if o.name.String() != PodKey {
			o.err = skip(d)
			continue
		}
		// The Pods are read into a list, then into a map made for them
		// all: growing the map as they came rehashed it eight times. The
		// list is kept between calls, as the decoders are.
		w := podWalk{d: d, exact: exact}
		l := podLists.Get().(*podList)
		pods := objectAt(d)
		for pods.next() {
			l.keys = append(l.keys, pods.name.String())
			l.pods = append(l.pods, Pod{})
			pods.err = w.pod(&l.pods[len(l.pods)-1])
		}
		o.err = pods.err
		if len(l.pods) > 0 && req.Pods == nil {
			req.Pods = make(map[string]Pod, len(l.pods))
		}
		for i, key := range l.keys {
			req.Pods[key] = l.pods[i]
		}
		l.free()
	}
	return o.err
}

// podList is decodeRelated's list of the Pods it read, by key.
type podList struct {
	keys []string
	pods []Pod
}

var podLists = sync.Pool{New: func() any { return new(podList) }}

// free empties the list, keeping nothing of its request, and gives it
// back to the pool.
func (l *podList) free() {
	clear(l.keys)
	clear(l.pods)
	l.keys, l.pods = l.keys[:0], l.pods[:0]
	podLists.Put(l)
}

// podWalk reads the Pods of one request, each like the one before it. A
// Memcached's Pods share most of what the hook reads (the namespace, the
// labels, the phase, the conditions' types and statuses, the containers'
// names): each string the walk reads is compared with the one read at the
// same step of the Pod before, and when the bytes are the same, that string
// is reused rather than allocated again, and lists and maps are sized as
// the Pod before's were. Strings were most of a 1,000-Pod decode's
// allocations. A Pod unlike the one before costs one comparison a string.
type podWalk struct {
	d *jsontext.Decoder
	// exact: each status is walked, not read quickly (quick.go).
	exact bool
	// prev are the strings the Pod before read, in order; cur, this
	// Pod's so far.
	prev, cur []string
	// last is the Pod before, whose lengths size this one's lists.
	last Pod
}

// pod reads one Pod: a Pod is mostly spec and managedFields, which it
// skips with one scan each, where decoding into a struct skips unknown
// members token by token. A null reads as encoding/json reads it.
func (w *podWalk) pod(p *Pod) error {
	w.prev, w.cur = w.cur, w.prev[:0]
	o := objectAt(w.d)
	for o.next() {
		switch o.name.String() {
		case "metadata":
			o.err = w.meta(&p.Metadata)
		case "status":
			o.err = w.status(&p.Status)
		default:
			o.err = skip(w.d)
		}
	}
	w.last = *p
	return o.err
}

func (w *podWalk) meta(m *PodMeta) error {
	d := w.d
	o := objectAt(d)
	for o.next() {
		switch o.name.String() {
		case "name":
			m.Name, o.err = w.readString()
		case "namespace":
			m.Namespace, o.err = w.readString()
		case "labels":
			o.err = w.labels(&m.Labels)
		case "creationTimestamp":
			m.CreationTimestamp, o.err = w.readString()
		case "deletionTimestamp":
			o.err = json.UnmarshalDecode(d, &m.DeletionTimestamp)
		case "deletionGracePeriodSeconds":
			o.err = json.UnmarshalDecode(d, &m.DeletionGracePeriodSeconds)
		default:
			o.err = skip(d)
		}
	}
	return o.err
}

// status reads a Pod's status quickly (quick.go), or, exact, walks it.
func (w *podWalk) status(s *PodStatus) error {
	if w.exact {
		return w.statusWalk(s)
	}
	raw, err := w.d.ReadValue()
	if err != nil || !w.quickStatus(raw, s) {
		return errNotQuick
	}
	return nil
}

func (w *podWalk) statusWalk(s *PodStatus) error {
	o := objectAt(w.d)
	for o.next() {
		switch o.name.String() {
		case "phase":
			s.Phase, o.err = w.readString()
		case "podIP":
			s.PodIP, o.err = w.readString()
		case "conditions":
			o.err = decodeList(w, &s.Conditions, len(w.last.Status.Conditions), (*podWalk).condition)
		case "initContainerStatuses":
			o.err = decodeList(w, &s.InitContainerStatuses, len(w.last.Status.InitContainerStatuses), (*podWalk).containerStatus)
		case "containerStatuses":
			o.err = decodeList(w, &s.ContainerStatuses, len(w.last.Status.ContainerStatuses), (*podWalk).containerStatus)
		default:
			o.err = skip(w.d)
		}
	}
	return o.err
}

func (w *podWalk) condition(c *PodCondition) error {
	o := objectAt(w.d)
	for o.next() {
		switch o.name.String() {
		case "type":
			c.Type, o.err = w.readString()
		case "status":
			c.Status, o.err = w.readString()
		case "reason":
			c.Reason, o.err = w.readString()
		case "lastTransitionTime":
			c.LastTransitionTime, o.err = w.readString()
		default:
			o.err = skip(w.d)
		}
	}
	return o.err
}

func (w *podWalk) containerStatus(cs *ContainerStatus) error {
	d := w.d
	o := objectAt(d)
	for o.next() {
		switch o.name.String() {
		case "name":
			cs.Name, o.err = w.readString()
		case "ready":
			cs.Ready, o.err = readBool(d)
		case "state":
			o.err = decodeContainerState(d, &cs.State)
		case "lastState":
			o.err = decodeContainerState(d, &cs.LastState)
		default:
			o.err = skip(d)
		}
	}
	return o.err
}

func decodeContainerState(d *jsontext.Decoder, s *ContainerState) error {
	o := objectAt(d)
	for o.next() {
		switch o.name.String() {
		case "waiting":
			o.err = json.UnmarshalDecode(d, &s.Waiting)
		case "terminated":
			o.err = json.UnmarshalDecode(d, &s.Terminated)
		default:
			o.err = skip(d)
		}
	}
	return o.err
}

// decodeList reads an array into *out, each element with decodeElem, in a
// slice made for size elements at first; a null is nil and an empty array
// empty, as encoding/json reads them.
func decodeList[T any](w *podWalk, out *[]T, size int, decodeElem func(*podWalk, *T) error) error {
	a := arrayAt(w.d)
	*out = nil
	for a.next() {
		if *out == nil {
			*out = make([]T, 0, max(size, 1))
		}
		// Decoding into the slice's own element, rather than a variable
		// appended after, keeps the element off the heap: a pointer passed
		// to a function value escapes.
		var zero T
		*out = append(*out, zero)
		a.err = decodeElem(w, &(*out)[len(*out)-1])
	}
	if a.err == nil && !a.null && *out == nil {
		*out = []T{}
	}
	return a.err
}

// labels reads the Pod's labels quickly (quick.go), or, exact, walks
// them.
func (w *podWalk) labels(m *map[string]string) error {
	if w.exact {
		return w.labelsWalk(m)
	}
	raw, err := w.d.ReadValue()
	if err != nil || !w.quickLabels(raw, m) {
		return errNotQuick
	}
	return nil
}

// labelsWalk reads an object of strings into *m, adding to it as
// encoding/json does; a null sets it nil.
func (w *podWalk) labelsWalk(m *map[string]string) error {
	o := objectAt(w.d)
	for o.next() {
		if *m == nil {
			*m = make(map[string]string, len(w.last.Metadata.Labels))
		}
		key := w.reuse(o.name)
		var v string
		v, o.err = w.readString()
		(*m)[key] = v
	}
	if o.err == nil && o.null {
		*m = nil
	} else if o.err == nil && *m == nil {
		*m = map[string]string{}
	}
	return o.err
}

// readString is readString, reusing the Pod before's string where it can.
// Unless exact, it reads the token without a PeekKind first, and leaves
// anything but a string or a null to the exact walk.
func (w *podWalk) readString() (string, error) {
	if w.exact {
		if w.d.PeekKind() != '"' {
			return readString(w.d)
		}
		tok, err := w.d.ReadToken()
		if err != nil {
			return "", err
		}
		return w.reuse(tok), nil
	}
	tok, err := w.d.ReadToken()
	switch {
	case err != nil:
		return "", errNotQuick
	case tok.Kind() == '"':
		return w.reuse(tok), nil
	case tok.Kind() == 'n':
		return "", nil
	}
	return "", errNotQuick
}

// reuse returns the string token tok holds: the Pod before's string read
// at the same step if it is the same, else a new one.
func (w *podWalk) reuse(tok jsontext.Token) string {
	i := len(w.cur)
	var s string
	// Compared where it is read, tok.String() allocates nothing.
	if i < len(w.prev) && w.prev[i] == tok.String() {
		s = w.prev[i]
	} else {
		s = tok.String()
	}
	w.cur = append(w.cur, s)
	return s
}

// reuseBytes is reuse for a string's bytes; a nil walk reuses nothing.
func (w *podWalk) reuseBytes(b []byte) string {
	if w == nil {
		return string(b)
	}
	i := len(w.cur)
	var s string
	if i < len(w.prev) && w.prev[i] == string(b) {
		s = w.prev[i]
	} else {
		s = string(b)
	}
	w.cur = append(w.cur, s)
	return s
}

// object reads the members of one JSON object (or a null, which has none),
// one name at a time: o.next reads the next name into o.name; the caller
// reads or skips its value and stores any error in o.err, which ends the
// walk.
type object struct {
	d    *jsontext.Decoder
	name jsontext.Token
	err  error
	// open: the '{' has been read; done: the '}' (or the null).
	open, done, null bool
}

func objectAt(d *jsontext.Decoder) object { return object{d: d} }

func (o *object) next() bool {
	if o.err != nil || o.done {
		return false
	}
	if !o.open {
		o.open = true
		if o.null, o.err = enter(o.d, '{'); o.null || o.err != nil {
			o.done = true
			return false
		}
	}
	// The name, or the '}' that ends the object: one ReadToken, without
	// a PeekKind before it (a 1,000-Pod request has 25,000 names).
	o.name, o.err = o.d.ReadToken()
	if o.err == nil && o.name.Kind() == '}' {
		o.done = true
		return false
	}
	return o.err == nil
}

// array reads the elements of one JSON array (or a null, which has none):
// each a.next leaves the decoder at an element for the caller to read,
// storing any error in a.err.
type array struct {
	d                *jsontext.Decoder
	err              error
	open, done, null bool
}

func arrayAt(d *jsontext.Decoder) array { return array{d: d} }

func (a *array) next() bool {
	if a.err != nil || a.done {
		return false
	}
	if !a.open {
		a.open = true
		if a.null, a.err = enter(a.d, '['); a.null || a.err != nil {
			a.done = true
			return false
		}
	}
	if a.d.PeekKind() == ']' {
		_, a.err = a.d.ReadToken()
		a.done = true
		return false
	}
	return true
}

// enter reads the '{' or '[' that opens a value of the kind given, or a
// null (and then returns true). Any other kind of value is a kindError.
func enter(d *jsontext.Decoder, open jsontext.Kind) (null bool, err error) {
	switch k := d.PeekKind(); k {
	case open:
		_, err := d.ReadToken()
		return false, err
	case 'n':
		_, err := d.ReadToken()
		return true, err
	case 0:
		return false, peekError(d)
	default:
		return false, mismatch(d, k, open)
	}
}

// skip consumes the next value, whatever its size, validating it. It is
// ReadValue rather than SkipValue: ReadValue scans the whole value at once,
// SkipValue walks it token by token, at twice the cost. With the decoder
// reading from a bytes.Buffer, the value is not copied.
func skip(d *jsontext.Decoder) error {
	_, err := d.ReadValue()
	return err
}

// readString reads a string; a null is "", as encoding/json leaves a Go
// string it cannot set.
func readString(d *jsontext.Decoder) (string, error) {
	switch k := d.PeekKind(); k {
	case '"':
		tok, err := d.ReadToken()
		if err != nil {
			return "", err
		}
		return tok.String(), nil
	case 'n':
		_, err := d.ReadToken()
		return "", err
	case 0:
		return "", peekError(d)
	default:
		return "", mismatch(d, k, '"')
	}
}

// readBool reads a boolean; a null is false.
func readBool(d *jsontext.Decoder) (bool, error) {
	switch k := d.PeekKind(); k {
	case 't', 'f':
		tok, err := d.ReadToken()
		return err == nil && tok.Bool(), err
	case 'n':
		_, err := d.ReadToken()
		return false, err
	case 0:
		return false, peekError(d)
	default:
		return false, mismatch(d, k, 't')
	}
}

// mismatch is the error for a value of kind got where a walk wants another:
// the value's syntax error if it has one (PeekKind looks at one byte only),
// else a kindError.
func mismatch(d *jsontext.Decoder, got, want jsontext.Kind) error {
	path := d.StackPointer()
	if _, err := d.ReadValue(); err != nil {
		return err
	}
	return &kindError{path: path, kind: got, want: want}
}

// peekError returns the error behind a PeekKind that found no value: the
// input ended, or is malformed there.
func peekError(d *jsontext.Decoder) error {
	_, err := d.ReadToken()
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// decoders keeps decoders between calls: a decoder's state (the names seen
// in each open object, which it tracks to refuse duplicates) is otherwise a
// quarter of a small request's allocation.
var decoders = sync.Pool{New: func() any { return new(jsontext.Decoder) }}

// noInput is what a pooled decoder reads while in the pool, so that it
// keeps no request alive. It is never read.
var noInput = bytes.NewReader(nil)

// newDecoder returns a decoder of body with v2's default, strict, options.
// Give it back with freeDecoder.
func newDecoder(body []byte) *jsontext.Decoder {
	d := decoders.Get().(*jsontext.Decoder)
	// A bytes.Buffer lets the decoder parse body in place, without a copy,
	// and so lets skip consume a value of any size without buffering it.
	d.Reset(bytes.NewBuffer(body))
	return d
}

// freeDecoder returns a decoder to the pool, holding nothing of its request.
func freeDecoder(d *jsontext.Decoder) {
	d.Reset(noInput)
	decoders.Put(d)
}

// kindError is a value of the wrong JSON kind where a walk wants another.
type kindError struct {
	path jsontext.Pointer // where the value is
	kind jsontext.Kind    // what it is
	want jsontext.Kind    // what the walk wants
}

func (e *kindError) Error() string {
	return fmt.Sprintf("got a JSON %s, want %s", kindName(e.kind), article(kindName(e.want)))
}

// describe turns a decoding error (not nil) into an *Error that says what
// is wrong and where, in the API server's terms: a wrongly typed or unknown
// field by its path (below prefix, if any), a syntax error by its byte
// offset too. size is the length of the input and offset how far the
// decoder read.
func describe(err error, prefix string, size, offset int64) *Error {
	var (
		kind   *kindError
		syntax *jsontext.SyntacticError
		sem    *json.SemanticError
		e      = &Error{Err: err}
	)
	switch {
	case errors.As(err, &kind):
		e.Path, e.Msg = fieldPath(prefix, kind.path), kind.Error()
	case errors.As(err, &syntax):
		e.Path = fieldPath(prefix, syntax.JSONPointer)
		what := strings.TrimPrefix(syntax.Err.Error(), "jsontext: ")
		if errors.Is(err, io.ErrUnexpectedEOF) {
			what = "unexpected end of JSON input"
		}
		e.Msg = fmt.Sprintf("malformed JSON: %s (at byte %d of %d)", what, syntax.ByteOffset, size)
	case errors.As(err, &sem) && errors.Is(sem.Err, json.ErrUnknownName):
		e.Path, e.Msg = fieldPath(prefix, sem.JSONPointer), "unknown field"
	case errors.As(err, &sem) && sem.JSONKind != 0 && sem.GoType != nil:
		e.Path = fieldPath(prefix, sem.JSONPointer)
		e.Msg = fmt.Sprintf("got a JSON %s, want %s", kindName(sem.JSONKind), wants(sem.GoType))
		if sem.JSONValue != nil && sem.JSONKind != '{' && sem.JSONKind != '[' {
			e.Msg = fmt.Sprintf("got %s, want %s", sem.JSONValue, wants(sem.GoType))
		}
		if sem.Err != nil {
			e.Msg += ": " + strings.TrimPrefix(sem.Err.Error(), "json: ")
		}
	case errors.As(err, &sem) && sem.Err != nil:
		e.Path, e.Msg = fieldPath(prefix, sem.JSONPointer), strings.TrimPrefix(sem.Err.Error(), "json: ")
	case errors.Is(err, io.ErrUnexpectedEOF):
		e.Msg = fmt.Sprintf("malformed JSON: unexpected end of JSON input (at byte %d of %d)", size, size)
	default:
		e.Msg = fmt.Sprintf("malformed JSON: %v (at byte %d of %d)", err, offset, size)
	}
	return e
}

// fieldPath writes a JSON pointer below prefix the way Kubernetes names a
// field: "/spec/tolerations/0/key" is "spec.tolerations[0].key". A member
// named with digits only reads as an index: the pointer cannot tell them
// apart, and no field of these objects is so named.
func fieldPath(prefix string, p jsontext.Pointer) string {
	var b strings.Builder
	b.WriteString(prefix)
	for tok := range p.Tokens() {
		if _, err := strconv.ParseUint(tok, 10, 32); err == nil {
			fmt.Fprintf(&b, "[%s]", tok)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

// typedPath is fieldPath for a value decoded into t, which tells a map key
// ("limits[memory]") from a struct field and an index.
func typedPath(prefix string, t reflect.Type, p jsontext.Pointer) string {
	var b strings.Builder
	b.WriteString(prefix)
	for tok := range p.Tokens() {
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch {
		case t != nil && t.Kind() == reflect.Map:
			fmt.Fprintf(&b, "[%s]", tok)
			t = t.Elem()
		case t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
			fmt.Fprintf(&b, "[%s]", tok)
			t = t.Elem()
		default:
			b.WriteByte('.')
			b.WriteString(tok)
			t = jsonField(t, tok)
		}
	}
	return b.String()
}

// jsonField is the type of t's field named name in JSON (inline fields
// included), or nil.
func jsonField(t reflect.Type, name string) reflect.Type {
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case tag == name:
			return f.Type
		case tag == "" && (f.Anonymous || strings.Contains(opts, "inline")):
			if ft := jsonField(f.Type, name); ft != nil {
				return ft
			}
		}
	}
	return nil
}

// kindName names a JSON kind as Kubernetes' errors do.
func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 't', 'f':
		return "boolean"
	case '"':
		return "string"
	case '0':
		return "number"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return "value"
}

// wants says what JSON a Go type takes, in JSON's terms: an error never
// names a Go type.
func wants(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case reflect.TypeFor[resource.Quantity]():
		return "a quantity like 512Mi or 1Gi"
	case reflect.TypeFor[intstr.IntOrString]():
		return "an integer or a string"
	case reflect.TypeFor[metav1.Time]():
		return "a time like 2006-01-02T15:04:05Z"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

// article puts "a" or "an" before a noun.
func article(noun string) string {
	if strings.ContainsRune("aeiou", rune(noun[0])) {
		return "an " + noun
	}
	return "a " + noun
}

// DecodeObject decodes a part of an observed object that a request carries
// as raw JSON (a child's spec or status, a last-applied annotation) into v,
// by the rules requests are decoded by, except that fields v does not have
// are skipped: the hook reads only what it needs of an observed object.
func DecodeObject(raw []byte, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return describe(err, "", int64(len(raw)), 0)
	}
	return nil
}
