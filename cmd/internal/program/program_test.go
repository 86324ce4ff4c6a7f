package program

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"
)

// newTestFlags is a program "some-program" with one flag of its own,
// --some-flag, the stop's flags and TLS's.
func newTestFlags(stderr io.Writer) (*Flags, *string) {
	f := NewFlags("some-program", []string{"./some-program"}, "[flags]", "Does something.\n", stderr)
	some := f.String("some-flag", "default", "what it sets")
	f.StopFlags(5*time.Second, "delay", 10*time.Second, "timeout")
	f.TLSFlags("certificate", "client CA")
	return f, some
}

func TestParse(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		env       map[string]string
		wantErr   string
		wantSome  string
		wantDelay time.Duration
	}{
		{name: "defaults", wantSome: "default", wantDelay: 5 * time.Second},
		{name: "command line", args: []string{"--some-flag=flag", "--shutdown-delay=1s"}, wantSome: "flag", wantDelay: time.Second},
		{name: "environment", env: map[string]string{"SOME_PROGRAM_SOME_FLAG": "env", "SOME_PROGRAM_SHUTDOWN_DELAY": "2s"}, wantSome: "env", wantDelay: 2 * time.Second},
		{name: "the command line wins", args: []string{"--some-flag=flag"}, env: map[string]string{"SOME_PROGRAM_SOME_FLAG": "env"}, wantSome: "flag", wantDelay: 5 * time.Second},
		{name: "bad value in the environment", env: map[string]string{"SOME_PROGRAM_SHUTDOWN_DELAY": "soon"}, wantErr: `SOME_PROGRAM_SHUTDOWN_DELAY="soon"`},
		{name: "argument", args: []string{"serve"}, wantErr: `unexpected arguments: ["serve"]`},
		{name: "negative delay", args: []string{"--shutdown-delay=-1s"}, wantErr: "must not be negative"},
		{name: "negative timeout", env: map[string]string{"SOME_PROGRAM_SHUTDOWN_TIMEOUT": "-1s"}, wantErr: "must not be negative"},
		{name: "log format", args: []string{"--log-format=xml"}, wantErr: `--log-format must be json or text, got "xml"`},
		{name: "log level", args: []string{"--log-level=loud"}, wantErr: "-log-level"},
		{name: "certificate without key", args: []string{"--tls-cert-file=/c"}, wantErr: "--tls-cert-file and --tls-key-file go together"},
		{name: "key without certificate", env: map[string]string{"SOME_PROGRAM_TLS_KEY_FILE": "/k"}, wantErr: "--tls-cert-file and --tls-key-file go together"},
		{name: "client CA without TLS", args: []string{"--client-ca-file=/ca"}, wantErr: "--client-ca-file needs --tls-cert-file"},
		{name: "TLS", args: []string{"--tls-cert-file=/c", "--tls-key-file=/k", "--client-ca-file=/ca"}, wantSome: "default", wantDelay: 5 * time.Second},
		{name: "unknown flag", args: []string{"--nope"}, wantErr: "flag provided but not defined: -nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, some := newTestFlags(io.Discard)
			err := f.Parse(append([]string{"./some-program"}, tt.args...), func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse(%q) = %v, want an error containing %q", tt.args, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q) = %v", tt.args, err)
			}
			if got, want := *some, tt.wantSome; got != want {
				t.Errorf("--some-flag = %q, want %q", got, want)
			}
			if got, want := f.Stop.Delay, tt.wantDelay; got != want {
				t.Errorf("--shutdown-delay = %s, want %s", got, want)
			}
		})
	}
}

// TestHelpAndVersion checks what run returns and prints for --help and
// --version: nothing on stdout for the one, the build for the other.
func TestHelpAndVersion(t *testing.T) {
	build := Build{Name: "some-program", Version: "v1.2.3", Commit: "abc"}
	tests := []struct {
		arg                    string
		wantStdout, wantStderr string
	}{
		{arg: "--help", wantStderr: "Usage: ./some-program [flags]\n\nDoes something.\nEvery flag may also be set as SOME_PROGRAM_<NAME> in the environment.\n\nFlags:\n"},
		{arg: "--version", wantStdout: "some-program v1.2.3 (commit abc, " + runtime.Version() + ")\n"},
	}
	for _, tt := range tests {
		t.Run(tt.arg, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			f, _ := newTestFlags(&stderr)
			err := f.Parse([]string{"./some-program", tt.arg}, func(string) string { return "" })
			if !errors.Is(err, flag.ErrHelp) && !errors.Is(err, ErrVersion) {
				t.Fatalf("Parse(%s) = %v", tt.arg, err)
			}
			if err := build.Exit(err, &stdout); err != nil {
				t.Errorf("Exit = %v, want nil", err)
			}
			if got := stdout.String(); got != tt.wantStdout {
				t.Errorf("stdout %q, want %q", got, tt.wantStdout)
			}
			if got := stderr.String(); !strings.HasPrefix(got, tt.wantStderr) {
				t.Errorf("stderr %q, want it to begin %q", got, tt.wantStderr)
			}
		})
	}
}

// TestStopWait checks the graceful stop: a failure before ctx ends is
// returned at once; after it, Stopping is true and begin called during the
// delay, then shutdown is called and its error returned.
func TestStopWait(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	t.Run("a server fails", func(t *testing.T) {
		s := &Stop{Delay: time.Hour}
		failed := make(chan error, 1)
		failed <- errors.New("port taken")
		err := s.Wait(context.Background(), logger, failed, nil, func(context.Context) error { t.Error("shutdown called"); return nil })
		if err == nil || err.Error() != "port taken" || s.Stopping() {
			t.Errorf("Wait = %v, stopping %v; want the failure, not stopping", err, s.Stopping())
		}
	})
	for _, shutdownErr := range []error{nil, errors.New("answers still in flight")} {
		t.Run("ctx ends, shutdown returns "+errString(shutdownErr), func(t *testing.T) {
			s := &Stop{Delay: 50 * time.Millisecond, Timeout: time.Second}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var begun time.Time
			var stoppingAtBegin bool
			err := s.Wait(ctx, logger, nil, func() { begun, stoppingAtBegin = time.Now(), s.Stopping() }, func(ctx context.Context) error {
				if waited := time.Since(begun); waited < s.Delay {
					t.Errorf("shutdown after %s, before the delay", waited)
				}
				if _, ok := ctx.Deadline(); !ok {
					t.Error("shutdown's context has no deadline")
				}
				return shutdownErr
			})
			if !stoppingAtBegin {
				t.Error("not Stopping when begin was called")
			}
			if got, want := errString(err), errString(shutdownErr); shutdownErr != nil && !strings.Contains(got, want) || shutdownErr == nil && err != nil {
				t.Errorf("Wait = %v, want %v", err, shutdownErr)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}
