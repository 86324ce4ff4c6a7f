//go:build linux

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenStateDir checks the state directory is made absolute with its
// links resolved (two paths to one directory are one playground), and that
// one the export line could not name unquoted is refused.
func TestOpenStateDir(t *testing.T) {
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(tmp, filepath.Join(tmp, "link")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, dir, want, wantErr string
	}{
		{"absolute", filepath.Join(tmp, "up"), filepath.Join(tmp, "up"), ""},
		{"through a link, not there yet", filepath.Join(tmp, "link", "a", "up"), filepath.Join(tmp, "a", "up"), ""},
		{"a space", filepath.Join(tmp, "my up"), "", "space or a character the shell would read"},
		{"a dollar", filepath.Join(tmp, "$up"), "", "space or a character the shell would read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := openStateDir(tt.dir)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("openStateDir(%q) = %q, %v; want an error with %q", tt.dir, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Errorf("openStateDir(%q) = %q, %v; want %q", tt.dir, got, err, tt.want)
			}
		})
	}
	if got, want := stateDir("/x/up").exportLine(), "export KUBECONFIG=/x/up/kubeconfig PATH=/x/up/bin:$PATH"; got != want {
		t.Errorf("exportLine = %q, want %q", got, want)
	}
}

// TestDownNothingUp checks that down with nothing up says so, succeeds,
// and removes only what the playground makes.
func TestDownNothingUp(t *testing.T) {
	tmp := t.TempDir()
	t.Run("no directory", func(t *testing.T) {
		var stderr bytes.Buffer
		err := run(context.Background(), []string{"playground", "down", "--dir=" + filepath.Join(tmp, "none")}, os.Getenv, &bytes.Buffer{}, &stderr)
		if err != nil || !strings.Contains(stderr.String(), "nothing is up") {
			t.Errorf("down = %v, stderr %q; want nil and \"nothing is up\"", err, stderr.String())
		}
	})
	t.Run("leftovers and a file of someone else's", func(t *testing.T) {
		dir := filepath.Join(tmp, "up")
		for _, name := range []string{"supervisor.log", "stopped", "mine.txt"} {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte("kwok exited\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		var stderr bytes.Buffer
		err := run(context.Background(), []string{"playground", "down", "--dir=" + dir}, os.Getenv, &bytes.Buffer{}, &stderr)
		if err != nil || !strings.Contains(stderr.String(), "stopped on its own: kwok exited") {
			t.Errorf("down = %v, stderr %q; want nil and why it stopped", err, stderr.String())
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 || entries[0].Name() != "mine.txt" {
			t.Errorf("after down %s holds %v, want only mine.txt", dir, entries)
		}
	})
}

// TestRunUsage checks the command's refusals.
func TestRunUsage(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no subcommand", []string{"playground"}, "no subcommand"},
		{"unknown", []string{"playground", "sideways", "--dir=/tmp/x"}, `unknown subcommand "sideways"`},
		{"no dir", []string{"playground", "down"}, "--dir is required"},
		{"extra argument", []string{"playground", "down", "--dir=/tmp/x", "now"}, "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(context.Background(), tt.args, os.Getenv, &bytes.Buffer{}, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("run(%q) = %v, want an error with %q", tt.args, err, tt.wantErr)
			}
		})
	}
}
