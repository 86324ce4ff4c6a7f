package reload

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReloading follows a file through a good change, a bad one (the
// last good value stays, logged once) and a good one again, and checks
// that a file that cannot be read at the start is an error.
func TestReloading(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "value")
	write := func(s string) {
		t.Helper()
		tmp := path + ".new"
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	parse := func(c [][]byte) (string, error) {
		if bytes.HasPrefix(c[0], []byte("bad")) {
			return "", errors.New("bad value")
		}
		return string(c[0]), nil
	}
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	if _, err := New(logger, "value", parse, path); err == nil {
		t.Fatal("New on a missing file: no error")
	}
	write("one")
	r, err := New(logger, "value", parse, path)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct{ write, want string }{{"two", "two"}, {"bad!", "two"}, {"", "two"}, {"three", "three"}} {
		if step.write != "" {
			write(step.write)
		}
		if got := r.Get(); got != step.want {
			t.Errorf("after writing %q: Get = %q, want %q", step.write, got, step.want)
		}
	}
	if n := strings.Count(logs.String(), "reloading value failed"); n != 1 {
		t.Errorf("%d failures logged, want 1:\n%s", n, logs.String())
	}
}
