package testutil

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"
)

// LogSink is where a program run in the test's own process (run's stdout,
// a server's slog handler) writes its JSON log lines: goroutines may
// share it, it keeps everything written, and WaitFor wakes on each write
// rather than polling.
type LogSink struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

// NewLogSink is an empty sink.
func NewLogSink() *LogSink { return &LogSink{changed: make(chan struct{})} }

// Write keeps p and wakes every WaitFor.
func (s *LogSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.buf.Write(p)
	close(s.changed)
	s.changed = make(chan struct{})
	return n, err
}

// String is everything written so far.
func (s *LogSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// Lines parses every complete line written so far as a JSON object, and
// fails t on a line that is not one: a program that logs JSON writes
// nothing else there.
func (s *LogSink) Lines(t testing.TB) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(s.String()) {
		if !strings.HasSuffix(line, "\n") {
			break // still being written
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not a JSON object: %v\n%s", err, line)
		}
		out = append(out, m)
	}
	return out
}

// LogWaitGuard bounds WaitFor: it only keeps a broken program from
// hanging the test, since a program that ends first stops the wait.
const LogWaitGuard = 20 * time.Second

// WaitFor blocks until a line whose msg starts with prefix has been
// written, and returns the first such line. It fails t when stop is
// closed first (the program ended without logging it; nil when there is
// nothing to watch) or after LogWaitGuard.
func (s *LogSink) WaitFor(t testing.TB, prefix string, stop <-chan struct{}) map[string]any {
	t.Helper()
	guard := time.After(LogWaitGuard)
	for {
		s.mu.Lock()
		changed := s.changed
		s.mu.Unlock()
		for _, l := range s.Lines(t) {
			if msg, _ := l["msg"].(string); strings.HasPrefix(msg, prefix) {
				return l
			}
		}
		select {
		case <-changed:
		case <-stop:
			t.Fatalf("the program ended before logging %q; it wrote:\n%s", prefix, s.String())
		case <-guard:
			t.Fatalf("no %q log line after %s; the program wrote:\n%s", prefix, LogWaitGuard, s.String())
		}
	}
}
