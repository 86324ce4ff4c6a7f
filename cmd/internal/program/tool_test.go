package program

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestToolFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "all given", args: []string{"--in", "a", "--out", "b"}},
		{name: "missing", args: []string{"--in", "a"}, wantErr: "no --out (usage: some-tool --in FILE --out FILE)"},
		{name: "argument", args: []string{"--in", "a", "--out", "b", "extra"}, wantErr: `unexpected arguments ["extra"] (usage: some-tool --in FILE --out FILE)`},
		{name: "unknown flag", args: []string{"--nope"}, wantErr: "flag provided but not defined: -nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := NewToolFlags("some-tool --in FILE --out FILE", io.Discard)
			in, out := fs.Required("in", "input"), fs.Required("out", "output")
			err := fs.Parse(append([]string{"./some-tool"}, tt.args...))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Parse(%q) = %v, want %q", tt.args, err, tt.wantErr)
				}
				return
			}
			if err != nil || *in != "a" || *out != "b" {
				t.Fatalf("Parse(%q) = %v, --in %q, --out %q", tt.args, err, *in, *out)
			}
		})
	}
}

// TestRewrite checks that Rewrite writes what edit makes, leaves the file
// untouched when that is what it holds, and names the file in edit's error.
func TestRewrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Rewrite(path, func(b []byte) ([]byte, error) { return append(b, 'b'), nil }); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "ab" {
		t.Errorf("after Rewrite: %q, want %q", got, "ab")
	}
	old := time.Unix(1, 0)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	if err := Rewrite(path, func(b []byte) ([]byte, error) { return b, nil }); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || !fi.ModTime().Equal(old) {
		t.Errorf("a rewrite to the same bytes touched the file: %v", err)
	}
	err := Rewrite(path, func([]byte) ([]byte, error) { return nil, errors.New("bad") })
	if err == nil || !strings.HasPrefix(err.Error(), path+": bad") {
		t.Errorf("Rewrite = %v, want the file's name and edit's error", err)
	}
}
