package memcachedtest

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestRunnable holds runnable to giving nobody a memcached it can
// execute: the program itself where every directory on the way lets
// others through, a copy of it where one does not (a checkout under
// /root).
func TestRunnable(t *testing.T) {
	other := &syscall.Credential{Uid: uint32(os.Getuid()) + 1000, Gid: uint32(os.Getgid()) + 1000}
	tests := []struct {
		name     string
		dirMode  os.FileMode
		wantCopy bool
	}{
		{name: "a directory others may enter", dirMode: 0o755, wantCopy: false},
		{name: "a directory only its owner enters", dirMode: 0o700, wantCopy: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Not t.TempDir, whose parent only its owner may enter.
			top, err := os.MkdirTemp("", "memcachedtest-runnable-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(top) })
			if err := os.Chmod(top, 0o755); err != nil {
				t.Fatal(err)
			}
			if !canExec(filepath.Dir(top), other.Uid, other.Gid) {
				t.Skipf("others cannot enter %s", filepath.Dir(top))
			}
			dir := filepath.Join(top, "checkout")
			if err := os.Mkdir(dir, tt.dirMode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, tt.dirMode); err != nil {
				t.Fatal(err)
			}
			content := []byte("#!/bin/sh\n# " + t.Name() + "\n")
			bin := filepath.Join(dir, "memcached")
			if err := os.WriteFile(bin, content, 0o755); err != nil {
				t.Fatal(err)
			}
			got, err := runnable(bin, &syscall.SysProcAttr{Credential: other})
			if err != nil {
				t.Fatal(err)
			}
			if got != bin {
				t.Cleanup(func() { os.Remove(got) })
			}
			if copied := got != bin; copied != tt.wantCopy {
				t.Fatalf("runnable(%s) = %s, want a copy: %v", bin, got, tt.wantCopy)
			}
			if !canExec(got, other.Uid, other.Gid) {
				t.Errorf("uid %d cannot execute %s", other.Uid, got)
			}
			if b, err := os.ReadFile(got); err != nil || !bytes.Equal(b, content) {
				t.Errorf("%s holds %q, %v; want %q", got, b, err, content)
			}
		})
	}
}
