package sync

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	gosync "sync"

	json "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Request decoding lives here, in one place, because it is where the hook
// spends its time: a sync request for a 1,000-Pod Memcached is 4 to 5 MB of
// full Pod objects (managedFields and all) of which the hook reads a handful
// of fields. It uses the JSON v2 implementation
// (github.com/go-json-experiment/json, a module, so no GOEXPERIMENT is needed
// anywhere) and walks the request with a jsontext.Decoder: the parent and the
// children, which are few, decode into the types of request.go; each Pod is
// walked by hand into the small Pod type; everything else (the controller,
// each Pod's spec and managedFields) is consumed whole by the decoder's
// validating scan, which materialises nothing. BENCHMARKS.md has the figures
// that chose this.
//
// Its rules are stricter than encoding/json's, and deliberately so, since
// Metacontroller (which encodes with Go's encoding/json) never breaks them:
//
//   - Field names match case-sensitively, as Metacontroller's do: "Parent" is
//     not "parent".
//   - A duplicated object member name anywhere in the body is an error, not
//     "the last one wins": a request that could be read two ways is refused.
//   - Invalid UTF-8 anywhere in the body is an error, not silently replaced
//     by U+FFFD: Metacontroller never sends it, so a body that has it is not
//     Metacontroller's.
//
// Every error is a *RequestError whose message says what is wrong and where:
// the byte offset of a syntax error, the field path of a value of the wrong
// type.
//
// The object walks below repeat one loop shape on purpose. Folding them into
// a helper that takes the per-member step as a function (a closure, or a
// generic walker with plain functions) was measured: it made a 1,000-Pod
// decode allocate 2.5 times as often, because each member name then escapes
// as a string where `switch tok.String()` compares it in place.

// DecodeRequest decodes the body of a sync or finalize call. A JSON null
// body decodes to an empty Request, which Sync then refuses for having no
// parent.
func DecodeRequest(body []byte) (*Request, error) {
	req := new(Request)
	d := newDecoder(body)
	err := func() error {
		ok, err := enterObject(d)
		if !ok || err != nil {
			return err
		}
		for d.PeekKind() != '}' {
			tok, err := d.ReadToken()
			if err != nil {
				return err
			}
			switch tok.String() {
			case "parent":
				err = json.UnmarshalDecode(d, &req.Parent, parentOptions)
			case "children":
				err = json.UnmarshalDecode(d, &req.Children)
			case "related":
				err = decodeRelated(d, &req.Related)
			case "finalizing":
				err = json.UnmarshalDecode(d, &req.Finalizing)
			default:
				err = skip(d)
			}
			if err != nil {
				return err
			}
		}
		return leaveObject(d)
	}()
	err = finish(body, d, err)
	freeDecoder(d)
	if err != nil {
		return nil, err
	}
	return req, nil
}

// DecodeCustomizeRequest decodes the body of a customize call: only its
// parent is read.
func DecodeCustomizeRequest(body []byte) (*CustomizeRequest, error) {
	req := new(CustomizeRequest)
	d := newDecoder(body)
	err := func() error {
		ok, err := enterObject(d)
		if !ok || err != nil {
			return err
		}
		for d.PeekKind() != '}' {
			tok, err := d.ReadToken()
			if err != nil {
				return err
			}
			if tok.String() == "parent" {
				err = json.UnmarshalDecode(d, &req.Parent, parentOptions)
			} else {
				err = skip(d)
			}
			if err != nil {
				return err
			}
		}
		return leaveObject(d)
	}()
	err = finish(body, d, err)
	freeDecoder(d)
	if err != nil {
		return nil, err
	}
	return req, nil
}

// parentOptions decode the parent without its managedFields, which the
// hook never reads: they are skipped with one scan instead of decoded entry
// by entry (timestamps parsed, fieldsV1 copied), the larger part of a small
// request's parent.
var parentOptions = json.WithUnmarshalers(json.UnmarshalFromFunc(func(d *jsontext.Decoder, _ *[]metav1.ManagedFieldsEntry) error {
	return skip(d)
}))

// decoders keeps decoders between calls: a decoder's state (the names seen
// in each open object, which it tracks to refuse duplicates) is otherwise a
// quarter of a small request's allocation.
var decoders = gosync.Pool{New: func() any { return new(jsontext.Decoder) }}

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

// finish checks that nothing but white space follows the top-level value,
// and turns err, or that, into a *RequestError.
func finish(body []byte, d *jsontext.Decoder, err error) error {
	if err == nil {
		var tok jsontext.Token
		if tok, err = d.ReadToken(); err == io.EOF {
			return nil
		} else if err == nil {
			err = fmt.Errorf("unexpected %s after the top-level value", tok.Kind())
		}
	}
	return requestDecodeError(body, d, err)
}

// skip consumes the next value, whatever its size, validating it. It is
// ReadValue rather than SkipValue: ReadValue scans the whole value at once,
// SkipValue walks it token by token, at twice the cost. With the decoder
// reading from a bytes.Buffer, the value is not copied.
func skip(d *jsontext.Decoder) error {
	_, err := d.ReadValue()
	return err
}

// enterObject reads the '{' that starts an object and returns true, or reads
// a null and returns false (a null is no object, as for a Go map or
// pointer). Any other kind of value is a kindError.
func enterObject(d *jsontext.Decoder) (bool, error) {
	switch k := d.PeekKind(); k {
	case '{':
		_, err := d.ReadToken()
		return err == nil, err
	case 'n':
		_, err := d.ReadToken()
		return false, err
	case 0:
		return false, peekError(d)
	default:
		return false, newKindError(d, k, "an object")
	}
}

// leaveObject reads the '}' that ends an object.
func leaveObject(d *jsontext.Decoder) error {
	_, err := d.ReadToken()
	return err
}

// enterArray is enterObject for an array.
func enterArray(d *jsontext.Decoder) (bool, error) {
	switch k := d.PeekKind(); k {
	case '[':
		_, err := d.ReadToken()
		return err == nil, err
	case 'n':
		_, err := d.ReadToken()
		return false, err
	case 0:
		return false, peekError(d)
	default:
		return false, newKindError(d, k, "an array")
	}
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
		return "", newKindError(d, k, "a string")
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
		return false, newKindError(d, k, "a bool")
	}
}

// decodeRelated reads the related objects: the Pods, each walked by hand
// into the small Pod type (see decodePod). Related objects of other kinds
// are skipped.
func decodeRelated(d *jsontext.Decoder, r *Related) error {
	ok, err := enterObject(d)
	if !ok || err != nil {
		return err
	}
	for d.PeekKind() != '}' {
		tok, err := d.ReadToken()
		if err != nil {
			return err
		}
		if tok.String() != PodKey {
			if err := skip(d); err != nil {
				return err
			}
			continue
		}
		ok, err := enterObject(d)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if r.Pods == nil {
			r.Pods = make(map[string]Pod)
		}
		for d.PeekKind() != '}' {
			tok, err := d.ReadToken()
			if err != nil {
				return err
			}
			key := tok.String()
			var p Pod
			if err := decodePod(d, &p); err != nil {
				return err
			}
			r.Pods[key] = p
		}
		if err := leaveObject(d); err != nil {
			return err
		}
	}
	return leaveObject(d)
}

// decodePod reads one Pod into p, field by field: a Pod is mostly spec and
// managedFields, which it skips with one scan each, where decoding into a
// struct (json.UnmarshalDecode) skips unknown members token by token. It
// reads exactly the fields of Pod, with encoding/json's rules for nulls.
func decodePod(d *jsontext.Decoder, p *Pod) error {
	ok, err := enterObject(d)
	if !ok || err != nil {
		return err
	}
	for d.PeekKind() != '}' {
		tok, err := d.ReadToken()
		if err != nil {
			return err
		}
		switch tok.String() {
		case "metadata":
			err = decodePodMeta(d, p)
		case "status":
			err = decodePodStatus(d, &p.Status)
		default:
			err = skip(d)
		}
		if err != nil {
			return err
		}
	}
	return leaveObject(d)
}

// decodePodMeta reads the Pod metadata fields that Pod has.
func decodePodMeta(d *jsontext.Decoder, p *Pod) error {
	ok, err := enterObject(d)
	if !ok || err != nil {
		return err
	}
	m := &p.Metadata
	for d.PeekKind() != '}' {
		tok, err := d.ReadToken()
		if err != nil {
			return err
		}
		switch tok.String() {
		case "name":
			m.Name, err = readString(d)
		case "namespace":
			m.Namespace, err = readString(d)
		case "labels":
			err = decodeStringMap(d, &m.Labels)
		case "deletionTimestamp":
			err = decodeTime(d, &m.DeletionTimestamp)
		default:
			err = skip(d)
		}
		if err != nil {
			return err
		}
	}
	return leaveObject(d)
}

// decodeStringMap reads an object of strings into *m, adding to it as
// encoding/json does.
func decodeStringMap(d *jsontext.Decoder, m *map[string]string) error {
	ok, err := enterObject(d)
	if !ok || err != nil {
		if err == nil {
			*m = nil
		}
		return err
	}
	if *m == nil {
		*m = make(map[string]string)
	}
	for d.PeekKind() != '}' {
		tok, err := d.ReadToken()
		if err != nil {
			return err
		}
		key := tok.String()
		v, err := readString(d)
		if err != nil {
			return err
		}
		(*m)[key] = v
	}
	return leaveObject(d)
}

// decodeTime reads a timestamp the way metav1.Time decodes it; a null is
// nil.
func decodeTime(d *jsontext.Decoder, t **metav1.Time) error {
	switch k := d.PeekKind(); k {
	case 'n':
		*t = nil
		_, err := d.ReadToken()
		return err
	case '"':
		return json.UnmarshalDecode(d, t)
	case 0:
		return peekError(d)
	default:
		return newKindError(d, k, "a time")
	}
}

// decodePodStatus reads the Pod status fields that PodStatus has.
func decodePodStatus(d *jsontext.Decoder, s *PodStatus) error {
	ok, err := enterObject(d)
	if !ok || err != nil {
		return err
	}
	for d.PeekKind() != '}' {
		tok, err := d.ReadToken()
		if err != nil {
			return err
		}
		switch tok.String() {
		case "phase":
			s.Phase, err = readString(d)
		case "podIP":
			s.PodIP, err = readString(d)
		case "conditions":
			err = decodePodConditions(d, &s.Conditions)
		case "containerStatuses":
			err = decodeContainerStatuses(d, &s.ContainerStatuses)
		default:
			err = skip(d)
		}
		if err != nil {
			return err
		}
	}
	return leaveObject(d)
}

// decodePodConditions reads a Pod's conditions.
func decodePodConditions(d *jsontext.Decoder, out *[]PodCondition) error {
	ok, err := enterArray(d)
	if !ok || err != nil {
		if err == nil {
			*out = nil
		}
		return err
	}
	conds := []PodCondition{}
	for d.PeekKind() != ']' {
		var c PodCondition
		ok, err := enterObject(d)
		if err != nil {
			return err
		}
		for ok && d.PeekKind() != '}' {
			tok, err := d.ReadToken()
			if err != nil {
				return err
			}
			switch tok.String() {
			case "type":
				c.Type, err = readString(d)
			case "status":
				c.Status, err = readString(d)
			case "reason":
				c.Reason, err = readString(d)
			default:
				err = skip(d)
			}
			if err != nil {
				return err
			}
		}
		if ok {
			if err := leaveObject(d); err != nil {
				return err
			}
		}
		conds = append(conds, c)
	}
	*out = conds
	return leaveObject(d)
}

// decodeContainerStatuses reads a Pod's container statuses.
func decodeContainerStatuses(d *jsontext.Decoder, out *[]ContainerStatus) error {
	ok, err := enterArray(d)
	if !ok || err != nil {
		if err == nil {
			*out = nil
		}
		return err
	}
	statuses := []ContainerStatus{}
	for d.PeekKind() != ']' {
		var cs ContainerStatus
		ok, err := enterObject(d)
		if err != nil {
			return err
		}
		for ok && d.PeekKind() != '}' {
			tok, err := d.ReadToken()
			if err != nil {
				return err
			}
			switch tok.String() {
			case "name":
				cs.Name, err = readString(d)
			case "ready":
				cs.Ready, err = readBool(d)
			case "state":
				err = decodeContainerState(d, &cs.State)
			case "lastState":
				err = decodeContainerState(d, &cs.LastState)
			default:
				err = skip(d)
			}
			if err != nil {
				return err
			}
		}
		if ok {
			if err := leaveObject(d); err != nil {
				return err
			}
		}
		statuses = append(statuses, cs)
	}
	*out = statuses
	return leaveObject(d)
}

// decodeContainerState reads a container state's waiting and terminated
// reasons.
func decodeContainerState(d *jsontext.Decoder, s *ContainerState) error {
	ok, err := enterObject(d)
	if !ok || err != nil {
		return err
	}
	for d.PeekKind() != '}' {
		tok, err := d.ReadToken()
		if err != nil {
			return err
		}
		switch tok.String() {
		case "waiting":
			err = json.UnmarshalDecode(d, &s.Waiting)
		case "terminated":
			err = json.UnmarshalDecode(d, &s.Terminated)
		default:
			err = skip(d)
		}
		if err != nil {
			return err
		}
	}
	return leaveObject(d)
}

// kindError is a value of the wrong JSON kind where the walk in this file
// wants another.
type kindError struct {
	path jsontext.Pointer // where the value is
	kind jsontext.Kind    // what it is
	want string           // what the walk wants, "an object"
}

func newKindError(d *jsontext.Decoder, k jsontext.Kind, want string) error {
	return &kindError{path: d.StackPointer(), kind: k, want: want}
}

func (e *kindError) Error() string {
	return fmt.Sprintf("got a JSON %s, want %s", kindName(e.kind), e.want)
}

// requestDecodeError turns an error from decoding body into a *RequestError
// that says what is wrong and where: a syntax error's byte offset, a wrongly
// typed value's field path (dotted, as encoding/json names fields).
func requestDecodeError(body []byte, d *jsontext.Decoder, err error) error {
	if err == nil {
		return nil
	}
	var (
		msg    string
		kind   *kindError
		syntax *jsontext.SyntacticError
		sem    *json.SemanticError
	)
	switch {
	case errors.As(err, &kind):
		msg = withField(dotted(kind.path), kind.Error())
	case errors.As(err, &syntax):
		desc := strings.TrimPrefix(syntax.Err.Error(), "jsontext: ")
		if errors.Is(err, io.ErrUnexpectedEOF) {
			desc = "unexpected end of JSON input"
		}
		if path := dotted(syntax.JSONPointer); path != "" {
			desc += fmt.Sprintf(" in %q", path)
		}
		msg = fmt.Sprintf("%s (at byte %d of %d)", desc, syntax.ByteOffset, len(body))
	case errors.As(err, &sem) && sem.JSONKind != 0 && sem.GoType != nil:
		what := fmt.Sprintf("got a JSON %s, want %s", kindName(sem.JSONKind), sem.GoType)
		if sem.Err != nil {
			what += ": " + sem.Err.Error()
		}
		msg = withField(dotted(sem.JSONPointer), what)
	case errors.As(err, &sem) && sem.Err != nil:
		msg = withField(dotted(sem.JSONPointer), sem.Err.Error())
	case errors.Is(err, io.ErrUnexpectedEOF):
		msg = fmt.Sprintf("unexpected end of JSON input (at byte %d of %d)", len(body), len(body))
	default:
		msg = fmt.Sprintf("%v (at byte %d of %d)", err, d.InputOffset(), len(body))
	}
	return &RequestError{Msg: "malformed JSON request: " + msg, Err: err}
}

// withField prefixes msg with the field it is about, if any.
func withField(path, msg string) string {
	if path == "" {
		return msg
	}
	return fmt.Sprintf("field %q: %s", path, msg)
}

// dotted writes a JSON pointer the way encoding/json names a field:
// "/parent/metadata/name" is "parent.metadata.name".
func dotted(p jsontext.Pointer) string {
	var parts []string
	for tok := range p.Tokens() {
		parts = append(parts, tok)
	}
	return strings.Join(parts, ".")
}

// kindName names a JSON kind as encoding/json's errors do.
func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 't', 'f':
		return "bool"
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
