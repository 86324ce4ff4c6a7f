package testutil

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// MustMarshal encodes v as JSON.
func MustMarshal(tb testing.TB, v any) []byte {
	tb.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// DecodeAny decodes one JSON value into generic values, numbers kept as
// json.Number so that re-encoding a request changes none of them.
func DecodeAny(tb testing.TB, data []byte) any {
	tb.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		tb.Fatalf("decoding JSON: %v\n%s", err, Truncate(data))
	}
	if _, err := dec.Token(); err != io.EOF {
		tb.Fatalf("trailing data after the JSON value:\n%s", Truncate(data))
	}
	return v
}

// DecodeObject decodes a JSON object into a generic map.
func DecodeObject(tb testing.TB, data []byte) map[string]any {
	tb.Helper()
	m, ok := DecodeAny(tb, data).(map[string]any)
	if !ok {
		tb.Fatalf("want a JSON object, got:\n%s", Truncate(data))
	}
	return m
}

// Edit decodes a JSON object, lets f change it and encodes it again.
func Edit(tb testing.TB, data []byte, f func(m map[string]any)) []byte {
	tb.Helper()
	m := DecodeObject(tb, data)
	f(m)
	return MustMarshal(tb, m)
}

// StrictDecode decodes data into v the way hook v2 decodes an answer:
// unknown fields fail, and so does anything after the value.
func StrictDecode(tb testing.TB, data []byte, v any) {
	tb.Helper()
	if err := StrictDecodeErr(data, v); err != nil {
		tb.Fatalf("strict decoding of the answer: %v\n%s", err, Truncate(data))
	}
}

// StrictDecodeErr is StrictDecode returning the error.
func StrictDecodeErr(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("data after the value (%v)", err)
	}
	return nil
}

// JSONDiff compares two JSON documents semantically (key order and spacing
// do not count) and returns a cmp diff, empty when they are equal.
func JSONDiff(tb testing.TB, got, want []byte) string {
	tb.Helper()
	return cmp.Diff(DecodeAny(tb, got), DecodeAny(tb, want))
}

// Truncate shortens a JSON document for a failure message.
func Truncate(data []byte) string {
	const most = 2000
	if len(data) <= most {
		return string(data)
	}
	return string(data[:most]) + "..."
}

// Get walks generic JSON by object keys (string) and list indexes (int). It
// returns nil and false when a step is missing.
func Get(v any, path ...any) (any, bool) {
	for _, step := range path {
		switch s := step.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			if v, ok = m[s]; !ok {
				return nil, false
			}
		case int:
			l, ok := v.([]any)
			if !ok || s < 0 || s >= len(l) {
				return nil, false
			}
			v = l[s]
		default:
			panic(fmt.Sprintf("bad path step %T", step))
		}
	}
	return v, true
}

// GetString is Get for a string; "" when missing or not a string.
func GetString(v any, path ...any) string {
	x, _ := Get(v, path...)
	s, _ := x.(string)
	return s
}

// GetObject is Get for an object; nil when missing or not an object.
func GetObject(v any, path ...any) map[string]any {
	x, _ := Get(v, path...)
	m, _ := x.(map[string]any)
	return m
}

// At is Get's value alone: nil when a step is missing.
func At(v any, path ...any) any {
	x, _ := Get(v, path...)
	return x
}
