package testutil

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fatalRecorder is a testing.TB whose Fatalf records the message and ends
// the goroutine, as t.Fatalf does, without failing the test it runs in.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// failure runs fn with a fatalRecorder on a goroutine of its own and
// returns the message it failed with, "" if it did not.
func failure(t *testing.T, fn func(tb testing.TB)) string {
	t.Helper()
	f := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f.msg
}

func TestEventually(t *testing.T) {
	tests := []struct {
		name string
		// ready is the call of cond that first returns nil, 0 for never.
		ready   int
		wantMsg string
	}{
		{name: "at once", ready: 1},
		{name: "on the third call", ready: 3},
		{name: "never, named by cond's last error", ready: 0, wantMsg: "waited 100ms: call 6: the item is not there yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			msg := failure(t, func(tb testing.TB) {
				EventuallyEvery(tb, 100*time.Millisecond, 20*time.Millisecond, func() error {
					calls++
					if calls == tt.ready {
						return nil
					}
					return fmt.Errorf("call %d: the item is not there yet", calls)
				})
			})
			if tt.wantMsg == "" {
				if msg != "" || calls != tt.ready {
					t.Errorf("failed with %q after %d calls, want success on call %d", msg, calls, tt.ready)
				}
				return
			}
			// 100 ms at 20 ms a call: the first at once, five after a
			// sleep, the last at the deadline; a loaded machine sleeps
			// longer, so fewer calls.
			if !strings.HasPrefix(msg, "waited 100ms: call ") || !strings.HasSuffix(msg, ": the item is not there yet") || calls > 6 || calls < 2 {
				t.Errorf("failed with %q after %d calls, want like %q", msg, calls, tt.wantMsg)
			}
		})
	}
}

// TestEventuallyStops holds Eventually to its deadline: it returns soon
// after timeout, not after a whole interval more.
func TestEventuallyStops(t *testing.T) {
	start := time.Now()
	msg := failure(t, func(tb testing.TB) {
		EventuallyEvery(tb, 50*time.Millisecond, time.Hour, func() error { return errors.New("never") })
	})
	if took := time.Since(start); took > 10*time.Second || msg != "waited 50ms: never" {
		t.Errorf("failed with %q after %s, want %q soon after 50ms", msg, took, "waited 50ms: never")
	}
}

func TestPoll(t *testing.T) {
	tests := []struct {
		name  string
		ready int
		want  bool
	}{
		{name: "holds", ready: 2, want: true},
		{name: "never holds", ready: 0, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			if got := Poll(60*time.Millisecond, func() bool { calls++; return calls == tt.ready }); got != tt.want {
				t.Errorf("Poll = %v after %d calls, want %v", got, calls, tt.want)
			}
		})
	}
}
