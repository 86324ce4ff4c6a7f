package metacontroller

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// A sync request is validated first by scan, a scanner of its own rather
// than jsontext's: the quick reader (quick.go) then takes the whole
// request from the bytes scan approved, jumping over what it does not
// read to where scan found it to end (scanner.ends). jsontext's
// validating scan, which every other way of reading the request pays for
// each byte the hook skips, was three quarters of a 1,000-Pod decode;
// scan, which keeps no tokens and checks names for duplicates only when
// their object closes, costs about 0.6 of it.
//
// scan holds to jsontext's rules (the decoder's: RFC 8259's grammar, valid
// UTF-8 in strings, an object's names unique once unescaped, white space
// around the value), and it may only be stricter: it refuses escaped
// surrogates (\ud800 and the like, which jsontext checks for pairs) and
// nesting deeper than scanMaxDepth, both left to the exact decoder. So a
// body scan approves, jsontext approves; FuzzScan holds it to that. A body
// scan refuses is decoded by jsontext, which says what is wrong and where.

// scanMaxDepth is the deepest nesting scan takes. jsontext takes 10,000;
// a request is never more than a dozen deep.
const scanMaxDepth = 1000

// scanner is scan's state, kept between calls in scanners.
type scanner struct {
	b []byte
	// stack holds the open objects and arrays.
	stack []scanFrame
	// names are the names of the open objects, each object's after its
	// parent's; unquoted holds the unescaped bytes of those written with
	// escapes.
	names    []scanName
	unquoted []byte
	// ends are where each object and array ends, in the order they open:
	// what lets the quick reader pass over a value without reading it.
	ends []scanEnd
}

// scanEnd is where an object or array ends (after its '}' or ']'), and
// the number, in the order they open, of the first to open after it.
type scanEnd struct {
	end, next int32
}

type scanFrame struct {
	object bool
	// end is the object's or array's index in ends.
	end int32
	// names and unquoted are the lengths of the scanner's lists when the
	// object opened: its names are the ones after.
	names, unquoted int32
}

// scanName is a member name's bytes, between its quotes in b or, escaped,
// unescaped in unquoted.
type scanName struct {
	start, end int32
	escaped    bool
}

var scanners = sync.Pool{New: func() any { return new(scanner) }}

// scan reports whether b is one JSON value, with white space around it
// only, that jsontext's decoder would take; see above. (quickSyncRequest
// keeps its scanner while it reads, for the scanner's ends.)
func scan(b []byte) bool {
	s := scanners.Get().(*scanner)
	defer s.free()
	return s.scan(b)
}

// free gives the scanner back to scanners, holding nothing of its
// request.
func (s *scanner) free() {
	s.b = nil
	if cap(s.names) > 1<<16 || cap(s.unquoted) > 1<<20 || cap(s.ends) > 1<<20 {
		s.names, s.unquoted, s.ends = nil, nil, nil // keep no huge request's lists
	}
	scanners.Put(s)
}

func (s *scanner) scan(b []byte) bool {
	if len(b) >= math.MaxInt32 {
		return false
	}
	s.b, s.stack, s.names, s.unquoted, s.ends = b, s.stack[:0], s.names[:0], s.unquoted[:0], s.ends[:0]
	if n := len(b) / 32; cap(s.ends) < n {
		// A request opens an object or array every 35 bytes or so: made
		// for that many, ends seldom grows (each growth copies it).
		s.ends = make([]scanEnd, 0, n)
	}
	var ok bool
	i := scanSpace(b, 0)
	for {
		// A value starts at i.
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case '{':
			if len(s.stack) >= scanMaxDepth {
				return false
			}
			k := len(s.ends)
			s.ends = append(s.ends, scanEnd{})
			i = scanSpace(b, i+1)
			if i < len(b) && b[i] == '}' {
				i++
				s.ends[k] = scanEnd{end: int32(i), next: int32(k + 1)}
				break
			}
			s.stack = append(s.stack, scanFrame{object: true, end: int32(k), names: int32(len(s.names)), unquoted: int32(len(s.unquoted))})
			if i, ok = s.name(i); !ok {
				return false
			}
			continue
		case '[':
			if len(s.stack) >= scanMaxDepth {
				return false
			}
			k := len(s.ends)
			s.ends = append(s.ends, scanEnd{})
			i = scanSpace(b, i+1)
			if i < len(b) && b[i] == ']' {
				i++
				s.ends[k] = scanEnd{end: int32(i), next: int32(k + 1)}
				break
			}
			s.stack = append(s.stack, scanFrame{end: int32(k)})
			continue
		case '"':
			if i, _, ok = scanString(b, i); !ok {
				return false
			}
		case 't', 'f', 'n':
			if i, ok = scanLiteral(b, i); !ok {
				return false
			}
		default:
			if i, ok = scanNumber(b, i); !ok {
				return false
			}
		}
		var more bool
		if i, more, ok = s.after(i); !ok || !more {
			return ok
		}
	}
}

// scanLiteral reads true, false or null at i, and returns where it ends.
func scanLiteral(b []byte, i int) (int, bool) {
	for _, lit := range [...]string{"true", "false", "null"} {
		if bytes.HasPrefix(b[i:], []byte(lit)) {
			return i + len(lit), true
		}
	}
	return i, false
}

// after reads what follows a value that ended at i: it closes objects and
// arrays, recording where each ends, until a ',' that another value
// follows (more: the value starts at next), or the end of the top-level
// value, which must end the input (ok).
func (s *scanner) after(i int) (next int, more, ok bool) {
	b := s.b
	for {
		i = scanSpace(b, i)
		if len(s.stack) == 0 {
			return i, false, i == len(b)
		}
		if i >= len(b) {
			return i, false, false
		}
		top := s.stack[len(s.stack)-1]
		c := b[i]
		if c == ',' {
			i = scanSpace(b, i+1)
			if top.object {
				if i, ok = s.name(i); !ok {
					return i, false, false
				}
			}
			return i, true, true
		}
		switch {
		case top.object && c == '}':
			if !s.unique(top) {
				return i, false, false
			}
			s.names, s.unquoted = s.names[:top.names], s.unquoted[:top.unquoted]
		case !top.object && c == ']':
		default:
			return i, false, false
		}
		s.stack = s.stack[:len(s.stack)-1]
		i++
		s.ends[top.end] = scanEnd{end: int32(i), next: int32(len(s.ends))}
	}
}

// name reads a member's name at i, and the ':' after it, and returns
// where its value starts.
func (s *scanner) name(i int) (int, bool) {
	b := s.b
	if i >= len(b) || b[i] != '"' {
		return 0, false
	}
	end, escaped, ok := scanString(b, i)
	if !ok {
		return 0, false
	}
	n := scanName{start: int32(i + 1), end: int32(end - 1)}
	if escaped {
		start := len(s.unquoted)
		if s.unquoted, ok = unquoteChecked(s.unquoted, b[i+1:end-1]); !ok {
			return 0, false
		}
		n = scanName{start: int32(start), end: int32(len(s.unquoted)), escaped: true}
	}
	s.names = append(s.names, n)
	i = scanSpace(b, end)
	if i >= len(b) || b[i] != ':' {
		return 0, false
	}
	return scanSpace(b, i+1), true
}

func (s *scanner) nameBytes(n scanName) []byte {
	if n.escaped {
		return s.unquoted[n.start:n.end]
	}
	return s.b[n.start:n.end]
}

// unique reports whether the names of the object f, which is closing, are
// all different: compared pairwise in a small object, sorted in a large
// one (the request's Pods, by key).
func (s *scanner) unique(f scanFrame) bool {
	names := s.names[f.names:]
	if len(names) <= 16 {
		for i := 1; i < len(names); i++ {
			a := names[i]
			for _, n := range names[:i] {
				if n.end-n.start == a.end-a.start && bytes.Equal(s.nameBytes(a), s.nameBytes(n)) {
					return false
				}
			}
		}
		return true
	}
	slices.SortFunc(names, func(x, y scanName) int { return bytes.Compare(s.nameBytes(x), s.nameBytes(y)) })
	for i := 1; i < len(names); i++ {
		if bytes.Equal(s.nameBytes(names[i-1]), s.nameBytes(names[i])) {
			return false
		}
	}
	return true
}

// scanSpace skips white space from i.
func scanSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// plain marks the bytes a string holds as they are: neither its quote, a
// backslash, a control character nor a byte of a multi-byte UTF-8
// sequence.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// scanString reads the string whose opening quote is at i, and returns
// where it ends (after its closing quote) and whether it holds escapes.
func scanString(b []byte, i int) (end int, escaped, ok bool) {
	i++
	for {
		i = plainRun(b, i)
		if i >= len(b) {
			return 0, false, false
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, escaped, true
		case c == '\\':
			escaped = true
			n, ok := escapeLen(b[i:])
			if !ok {
				return 0, false, false
			}
			i += n
		case c < 0x20:
			return 0, false, false
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return 0, false, false
			}
			i += size
		}
	}
}

// plainRun returns where the run of plain bytes from i ends, reading
// eight bytes at a time while it can: a string takes a third of scan's time.
func plainRun(b []byte, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for i+8 <= len(b) {
		x := binary.LittleEndian.Uint64(b[i:])
		// A byte's high bit in m is set for a byte that is '"' or '\\',
		// below 0x20 or above 0x7f; a borrow can set it for a byte above
		// such a byte too, never below, so the lowest is exact.
		q, bs := x^(ones*'"'), x^(ones*'\\')
		m := ((q-ones)&^q | (bs-ones)&^bs | (x-ones*0x20)&^x | x) & highs
		if m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
		i += 8
	}
	for i < len(b) && plain[b[i]] {
		i++
	}
	return i
}

// escapeLen is the length of the escape sequence b starts with, or false
// for one jsontext refuses or scan leaves to it (a surrogate).
func escapeLen(b []byte) (int, bool) {
	if len(b) < 2 {
		return 0, false
	}
	switch b[1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, true
	case 'u':
		r, ok := hex4(b[2:])
		return 6, ok && !utf16.IsSurrogate(r)
	}
	return 0, false
}

// hex4 reads the four hexadecimal digits b starts with.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// unquoteChecked appends to dst the unescaped bytes of raw, a string's
// bytes between its quotes that scanString has checked.
func unquoteChecked(dst, raw []byte) ([]byte, bool) {
	for len(raw) > 0 {
		i := bytes.IndexByte(raw, '\\')
		if i < 0 {
			return append(dst, raw...), true
		}
		dst = append(dst, raw[:i]...)
		raw = raw[i:]
		switch raw[1] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := hex4(raw[2:])
			if !ok {
				return dst, false
			}
			dst = utf8.AppendRune(dst, r)
			raw = raw[6:]
			continue
		default: // '"', '\\', '/'
			dst = append(dst, raw[1])
		}
		raw = raw[2:]
	}
	return dst, true
}

// scanNumber reads the number at i by RFC 8259's grammar, and returns
// where it ends.
func scanNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return 0, false
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}
