package testutil

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// CapturesDir holds every hook call a real Metacontroller sent while one
// Memcached went through its life (see its README.md), under v1/ and v2/
// for the two hook versions: the ground truth the hook's answers are
// checked against.
func CapturesDir() string {
	return filepath.Join(Root(), "sync", "metacontroller", "testdata", "captures")
}

// Capture is one recorded hook call: where it was sent and its body exactly
// as sent.
type Capture struct {
	// Name is the file under CapturesDir, such as "v2/0016-sync.json".
	Name    string            `json:"-"`
	Path    string            `json:"path"`
	Headers map[string]string `json:"headers"`
	Request json.RawMessage   `json:"request"`
}

// Hook is the hook the capture called: customize, sync or finalize.
func (c Capture) Hook() string { return strings.TrimPrefix(c.Path, "/") }

// CaptureNames lists every capture's name, sorted.
func CaptureNames(tb testing.TB) []string {
	tb.Helper()
	paths, err := filepath.Glob(filepath.Join(CapturesDir(), "*", "*.json"))
	if err != nil {
		tb.Fatal(err)
	}
	if len(paths) == 0 {
		tb.Fatalf("no captures under %s", CapturesDir())
	}
	var names []string
	for _, p := range paths {
		rel, err := filepath.Rel(CapturesDir(), p)
		if err != nil {
			tb.Fatal(err)
		}
		names = append(names, filepath.ToSlash(rel))
	}
	slices.Sort(names)
	return names
}

// LoadCapture reads one capture by name.
func LoadCapture(tb testing.TB, name string) Capture {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(CapturesDir(), filepath.FromSlash(name)))
	if err != nil {
		tb.Fatal(err)
	}
	var c Capture
	if err := json.Unmarshal(data, &c); err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	switch c.Hook() {
	case "customize", "sync", "finalize":
	default:
		tb.Fatalf("%s: unknown hook path %q", name, c.Path)
	}
	c.Name = name
	return c
}

// Captures reads every capture, in name order.
func Captures(tb testing.TB) []Capture {
	tb.Helper()
	var out []Capture
	for _, name := range CaptureNames(tb) {
		out = append(out, LoadCapture(tb, name))
	}
	return out
}

// CaptureBody returns a capture's request body, failing the test unless it
// calls the hook named.
func CaptureBody(tb testing.TB, name, hook string) []byte {
	tb.Helper()
	c := LoadCapture(tb, name)
	if c.Hook() != hook {
		tb.Fatalf("%s calls %s, want %s", name, c.Hook(), hook)
	}
	return c.Request
}
