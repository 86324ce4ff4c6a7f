package testutil

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// update makes Golden rewrite golden files instead of comparing with them.
var update = flag.Bool("update", false, "rewrite the golden files under testdata/ from the current answers")

// Golden compares a JSON answer with a golden file semantically, or, under
// -update, rewrites the file (indented).
func Golden(tb testing.TB, path string, got []byte) {
	tb.Helper()
	if *update {
		var buf bytes.Buffer
		if err := json.Indent(&buf, got, "", "  "); err != nil {
			tb.Fatal(err)
		}
		buf.WriteByte('\n')
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (run the test with -update to create it)", err)
	}
	if diff := JSONDiff(tb, got, want); diff != "" {
		tb.Errorf("answer differs from %s (-got +want):\n%s", path, diff)
	}
}

// GoldenBytes compares got with a golden file byte for byte, or, under
// -update, rewrites the file with got: for answers whose every byte
// matters, such as a wire protocol's.
func GoldenBytes(tb testing.TB, path string, got []byte) {
	tb.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (run the test with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		tb.Errorf("answer differs from %s:\n got %q\nwant %q", path, got, want)
	}
}
