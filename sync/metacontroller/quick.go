package metacontroller

import (
	"encoding/binary"
	"errors"
	"math/bits"

	json "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
)

// A Pod's status and labels are read quickly: the decoder consumes each
// whole with one validating scan (ReadValue, as for what the walk skips),
// and a reader that trusts what that scan checked (the syntax, the UTF-8,
// no member name twice) takes the few fields the hook needs from its
// bytes. Walked token by token, the status took a quarter of a 1,000-Pod
// decode's time for a sixth of its bytes (the conditions and the container
// statuses are dense with short members); read this way, a fifth, most of
// it the scan. The status's slot table is read the same way
// (quickSlotTable): unmarshaling it took three to six times as long.
//
// The quick reader gives up on anything the walk would refuse or that it
// does not take (a value of the wrong kind, a member name written with
// escapes): errNotQuick then has the whole request read again by the
// exact walk (statusWalk, labelsWalk), which reads the same fields by the
// same rules and, for a request it refuses, says what is wrong and where.
// For every Pod the quick reader takes, the two give the same Pod;
// TestQuickStatus and FuzzQuickStatus hold them to that.
//
// The whole of a sync request is read the same way (quickSyncRequest),
// from a body that scan (scan.go) has validated rather than jsontext: the
// Pods, each object or array it does not read jumped over to where scan
// found it to end, and the parent and the children decoded from their
// bytes. Anything the quick reader gives up on, and any body scan
// refuses, is read by the decoder. Read this way, a 1,000-Pod request
// took 0.93 to 0.96 times jsontext's validating scan of it, against 1.35
// for the decoder's walk (1.1 passing over skipped values by bracket
// counting, without scan's ends).

// errNotQuick is a Pod the quick reader did not take.
var errNotQuick = errors.New("metacontroller: the Pod is read again by the exact walk")

// quickStatus reads a Pod's status from raw, the bytes the decoder has
// validated, or returns false where the walk is needed.
func (w *podWalk) quickStatus(raw jsontext.Value, s *PodStatus) bool {
	v := valid{b: raw, ok: true}
	w.quickStatusAt(&v, s)
	return v.ok
}

// quickStatusAt reads a Pod's status at v.
func (w *podWalk) quickStatusAt(v *valid, s *PodStatus) {
	if null := v.enter('{'); null || !v.ok {
		return
	}
	for v.ok && v.more('}') {
		switch string(v.name()) {
		case "phase":
			s.Phase = v.str(w)
		case "podIP":
			s.PodIP = v.str(w)
		case "conditions":
			s.Conditions = quickList(v, w, len(w.last.Status.Conditions), quickCondition)
		case "initContainerStatuses":
			s.InitContainerStatuses = quickList(v, w, len(w.last.Status.InitContainerStatuses), quickContainerStatus)
		case "containerStatuses":
			s.ContainerStatuses = quickList(v, w, len(w.last.Status.ContainerStatuses), quickContainerStatus)
		default:
			v.skip()
		}
	}
}

// quickList reads an array as decodeList does: null is nil, [] is empty.
func quickList[T any](v *valid, w *podWalk, size int, elem func(*valid, *podWalk, *T)) []T {
	null := v.enter('[')
	if null || !v.ok {
		return nil
	}
	out := make([]T, 0, size)
	for v.ok && v.more(']') {
		var zero T
		out = append(out, zero)
		elem(v, w, &out[len(out)-1])
	}
	return out
}

func quickCondition(v *valid, w *podWalk, c *PodCondition) {
	if null := v.enter('{'); null || !v.ok {
		return
	}
	for v.ok && v.more('}') {
		switch string(v.name()) {
		case "type":
			c.Type = v.str(w)
		case "status":
			c.Status = v.str(w)
		case "reason":
			c.Reason = v.str(w)
		case "lastTransitionTime":
			c.LastTransitionTime = v.str(w)
		default:
			v.skip()
		}
	}
}

func quickContainerStatus(v *valid, w *podWalk, cs *ContainerStatus) {
	if null := v.enter('{'); null || !v.ok {
		return
	}
	for v.ok && v.more('}') {
		switch string(v.name()) {
		case "name":
			cs.Name = v.str(w)
		case "ready":
			cs.Ready = v.bool()
		case "state":
			quickContainerState(v, &cs.State)
		case "lastState":
			quickContainerState(v, &cs.LastState)
		default:
			v.skip()
		}
	}
}

// quickContainerState reads a container's state; its reasons, which are
// there only while a container waits or after it ended, are unmarshaled
// as the walk unmarshals them.
func quickContainerState(v *valid, s *ContainerState) {
	if null := v.enter('{'); null || !v.ok {
		return
	}
	for v.ok && v.more('}') {
		switch string(v.name()) {
		case "waiting":
			v.ok = json.Unmarshal(v.value(), &s.Waiting) == nil
		case "terminated":
			v.ok = json.Unmarshal(v.value(), &s.Terminated) == nil
		default:
			v.skip()
		}
	}
}

// valid reads JSON that the decoder has validated, so it checks nothing
// the decoder checked: each step expects what a valid value holds there.
// It sets ok to false, and the caller stops, on a value of a kind the walk
// would refuse or a name written with escapes.
type valid struct {
	b  []byte
	i  int
	ok bool
	// ends, if not nil, are where scan found each object and array of b
	// to end, in the order they open; next is the index in ends of the
	// next to open. skip jumps over one by them.
	ends []scanEnd
	next int
}

func (v *valid) ws() {
	for v.i < len(v.b) {
		switch v.b[v.i] {
		case ' ', '\t', '\r', '\n':
			v.i++
		default:
			return
		}
	}
}

// enter reads the '{' or '[' that opens a value of that kind, or a null
// (and returns true); another kind of value sets ok to false.
func (v *valid) enter(open byte) (null bool) {
	v.ws()
	switch v.b[v.i] {
	case open:
		v.i++
		v.next++
		return false
	case 'n':
		v.i += len("null")
		return true
	}
	v.ok = false
	return false
}

// more tells whether another member or element follows in the object or
// array being read (and consumes the ',' before it), or consumes close.
func (v *valid) more(close byte) bool {
	v.ws()
	switch v.b[v.i] {
	case close:
		v.i++
		return false
	case ',':
		v.i++
	}
	return true
}

// name reads a member's name and the ':' after it. A name written with
// escapes sets ok to false (the walk unescapes it).
func (v *valid) name() []byte {
	v.ws()
	name, escaped := v.quoted()
	if escaped {
		v.ok = false
	}
	v.ws()
	v.i++ // ':'
	return name
}

// quoted reads a string and returns what is between its quotes, and
// whether that holds an escape.
func (v *valid) quoted() (raw []byte, escaped bool) {
	start := v.i + 1
	for j := start; ; {
		j = quoteOrBackslash(v.b, j)
		if v.b[j] == '"' {
			v.i = j + 1
			return v.b[start:j], escaped
		}
		escaped = true
		j += 2
	}
}

// quoteOrBackslash returns where the first '"' or '\\' from i is, reading
// eight bytes at a time while it can (as plainRun does). There is one:
// the string is valid.
func quoteOrBackslash(b []byte, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for i+8 <= len(b) {
		x := binary.LittleEndian.Uint64(b[i:])
		q, bs := x^(ones*'"'), x^(ones*'\\')
		if m := ((q-ones)&^q | (bs-ones)&^bs) & highs; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
		i += 8
	}
	for b[i] != '"' && b[i] != '\\' {
		i++
	}
	return i
}

// str reads a string as readString does (a null is ""), through w's
// reuse of the Pod before's strings when w is not nil.
func (v *valid) str(w *podWalk) string {
	v.ws()
	switch v.b[v.i] {
	case '"':
		start := v.i
		raw, escaped := v.quoted()
		if escaped {
			s, err := jsontext.AppendUnquote(nil, v.b[start:v.i])
			v.ok = err == nil
			return w.reuseBytes(s)
		}
		return w.reuseBytes(raw)
	case 'n':
		v.i += len("null")
		return ""
	}
	v.ok = false
	return ""
}

// bool reads a boolean as readBool does (a null is false).
func (v *valid) bool() bool {
	v.ws()
	switch v.b[v.i] {
	case 't':
		v.i += len("true")
		return true
	case 'f':
		v.i += len("false")
	case 'n':
		v.i += len("null")
	default:
		v.ok = false
	}
	return false
}

// value returns the next value's bytes and consumes them.
func (v *valid) value() []byte {
	v.ws()
	start := v.i
	v.skip()
	return v.b[start:v.i]
}

// skip consumes the next value.
func (v *valid) skip() {
	v.ws()
	switch v.b[v.i] {
	case '"':
		v.quoted()
	case '{', '[':
		if v.ends != nil {
			v.jump()
			return
		}
		depth := 0
		for {
			switch v.b[v.i] {
			case '"':
				v.quoted()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			v.i++
			if depth == 0 {
				return
			}
		}
	default: // a number, true, false or null
		for v.i < len(v.b) {
			switch v.b[v.i] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				return
			}
			v.i++
		}
	}
}

// jump passes over the object or array at v.i by where scan found it to
// end. If it does not end there (it cannot, but for a mistake in the
// quick reader's count of what it opened), the decoder reads the request.
func (v *valid) jump() {
	if v.next >= len(v.ends) {
		v.ok = false
		return
	}
	e := v.ends[v.next]
	if v.b[e.end-1] != v.b[v.i]+2 { // '{'+2 is '}', '['+2 is ']'
		v.ok = false
		return
	}
	v.i, v.next = int(e.end), int(e.next)
}

// quickLabels reads a Pod's labels from raw, the bytes the decoder has
// validated, as labels does, or returns false where the walk is needed.
func (w *podWalk) quickLabels(raw jsontext.Value, m *map[string]string) bool {
	v := valid{b: raw, ok: true}
	w.quickLabelsAt(&v, m)
	return v.ok
}

// quickLabelsAt reads a Pod's labels at v.
func (w *podWalk) quickLabelsAt(v *valid, m *map[string]string) {
	if null := v.enter('{'); null || !v.ok {
		*m = nil
		return
	}
	*m = make(map[string]string, len(w.last.Metadata.Labels))
	for v.ok && v.more('}') {
		key := w.reuseBytes(v.name())
		(*m)[key] = v.str(w)
	}
}

// quickSlotTable reads a slot table the hook wrote, as json.Unmarshal
// does, or returns false for one it does not take (json.Unmarshal then
// decides). Unmarshaling its 1,000 entries by reflection was a tenth of
// a 1,000-Pod decode's time beyond its scan.
func quickSlotTable(raw jsontext.Value, t *v1alpha1.SlotTable) bool {
	v := valid{b: raw, ok: true}
	if null := v.enter('{'); null || !v.ok {
		return false
	}
	for v.ok && v.more('}') {
		switch string(v.name()) {
		case "version":
			t.Version = v.int(64)
		case "slots":
			t.Slots = quickList(&v, nil, 0, quickSlot)
		case "waiting":
			t.Waiting = quickList(&v, nil, 0, func(v *valid, _ *podWalk, s *string) { *s = v.str(nil) })
		case "eventsUntil":
			v.ok = json.Unmarshal(v.value(), &t.EventsUntil) == nil
		default:
			v.skip()
		}
	}
	return v.ok
}

func quickSlot(v *valid, _ *podWalk, s *v1alpha1.Slot) {
	if null := v.enter('{'); null || !v.ok {
		return
	}
	for v.ok && v.more('}') {
		switch string(v.name()) {
		case "slot":
			s.Slot = int32(v.int(32))
		case "pod":
			s.Pod = v.str(nil)
		case "ip":
			s.IP = v.str(nil)
		case "state":
			s.State = v1alpha1.SlotState(v.str(nil))
		case "from":
			s.From = v.str(nil)
		case "fromIP":
			s.FromIP = v.str(nil)
		default:
			v.skip()
		}
	}
}

// int reads an integer of that many bits written in digits alone (a
// null is 0); anything else (a fraction, an exponent, out of range) sets
// ok to false.
func (v *valid) int(bits int) int64 {
	v.ws()
	if v.b[v.i] == 'n' {
		v.i += len("null")
		return 0
	}
	start := v.i
	v.skip()
	digits, neg := v.b[start:v.i], false
	if len(digits) > 0 && digits[0] == '-' {
		digits, neg = digits[1:], true
	}
	if len(digits) == 0 || len(digits) > 18 {
		v.ok = false
		return 0
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			v.ok = false
			return 0
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	if limit := int64(1) << (bits - 1); bits < 64 && (n < -limit || n >= limit) {
		v.ok = false
		return 0
	}
	return n
}

// quickSyncRequest reads a whole sync or finalize call quickly, from a
// body scan has validated, or returns false where the decoder is needed:
// for a body scan refuses, and wherever the quick reader gives up. The
// Pods are read as the decoder walks them (the same fields, each by the
// same rule, through the same podWalk); everything the hook does not read
// is jumped over by scan's ends, never looked at twice. The parent
// and the children, a fiftieth of a 1,000-Pod request, are decoded from
// their bytes as the decoder decodes them.
func quickSyncRequest(body []byte) (*SyncRequest, bool) {
	s := scanners.Get().(*scanner)
	defer s.free()
	if !s.scan(body) {
		return nil, false
	}
	v := valid{b: body, ok: true, ends: s.ends}
	req := new(SyncRequest)
	if null := v.enter('{'); null || !v.ok {
		return req, v.ok
	}
	for v.ok && v.more('}') {
		switch string(v.name()) {
		case "parent":
			raw := v.value()
			v.ok = v.ok && decode(raw, func(d *jsontext.Decoder) error { return decodeParent(d, &req.Parent) }) == nil
		case "children":
			v.ok = v.ok && json.Unmarshal(v.value(), &req.Children) == nil
		case "related":
			quickRelated(&v, req)
		case "finalizing":
			req.Finalizing = v.bool()
		default:
			v.skip()
		}
	}
	if !v.ok {
		return nil, false
	}
	return req, true
}

// quickRelated reads the related objects at v as decodeRelated does.
func quickRelated(v *valid, req *SyncRequest) {
	if null := v.enter('{'); null || !v.ok {
		return
	}
	for v.ok && v.more('}') {
		if string(v.name()) != PodKey {
			v.skip()
			continue
		}
		var w podWalk
		l := podLists.Get().(*podList)
		if null := v.enter('{'); !null {
			for v.ok && v.more('}') {
				l.keys = append(l.keys, string(v.name()))
				l.pods = append(l.pods, Pod{})
				w.quickPod(v, &l.pods[len(l.pods)-1])
			}
		}
		if v.ok && len(l.pods) > 0 {
			if req.Pods == nil {
				req.Pods = make(map[string]Pod, len(l.pods))
			}
			for i, key := range l.keys {
				req.Pods[key] = l.pods[i]
			}
		}
		l.free()
	}
}

// quickPod reads one Pod at v as pod does.
func (w *podWalk) quickPod(v *valid, p *Pod) {
	w.prev, w.cur = w.cur, w.prev[:0]
	if null := v.enter('{'); !null {
		for v.ok && v.more('}') {
			switch string(v.name()) {
			case "metadata":
				w.quickMeta(v, &p.Metadata)
			case "status":
				w.quickStatusAt(v, &p.Status)
			default:
				v.skip()
			}
		}
	}
	w.last = *p
}

// quickMeta reads a Pod's metadata at v as meta does.
func (w *podWalk) quickMeta(v *valid, m *PodMeta) {
	if null := v.enter('{'); null || !v.ok {
		return
	}
	for v.ok && v.more('}') {
		switch string(v.name()) {
		case "name":
			m.Name = v.str(w)
		case "namespace":
			m.Namespace = v.str(w)
		case "labels":
			w.quickLabelsAt(v, &m.Labels)
		case "creationTimestamp":
			m.CreationTimestamp = v.str(w)
		case "deletionTimestamp":
			v.ok = json.Unmarshal(v.value(), &m.DeletionTimestamp) == nil
		case "deletionGracePeriodSeconds":
			v.ok = json.Unmarshal(v.value(), &m.DeletionGracePeriodSeconds) == nil
		default:
			v.skip()
		}
	}
}
