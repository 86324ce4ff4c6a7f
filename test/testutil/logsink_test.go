package testutil

import (
	"fmt"
	"testing"
	"time"
)

func TestLogSinkWaitFor(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		// stopped closes stop once the lines are written.
		stopped bool
		prefix  string
		wantMsg string
		wantErr string
	}{
		{name: "written before", writes: []string{`{"msg":"listening","address":"a"}` + "\n"}, prefix: "listening", wantMsg: "listening"},
		{name: "by prefix, the first", writes: []string{`{"msg":"other"}` + "\n", `{"msg":"shutting down: now"}` + "\n", `{"msg":"shutting down: later"}` + "\n"}, prefix: "shutting down", wantMsg: "shutting down: now"},
		{name: "a line still being written", writes: []string{`{"msg":"listening"`}, stopped: true, prefix: "listening",
			wantErr: "the program ended before logging \"listening\"; it wrote:\n{\"msg\":\"listening\""},
		{name: "not JSON", writes: []string{"listening\n"}, prefix: "listening", wantErr: "log line is not a JSON object: invalid character 'l' looking for beginning of value\nlistening\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewLogSink()
			stop := make(chan struct{})
			go func() {
				for _, w := range tt.writes {
					time.Sleep(time.Millisecond)
					fmt.Fprint(s, w)
				}
				if tt.stopped {
					close(stop)
				}
			}()
			var got map[string]any
			msg := failure(t, func(tb testing.TB) { got = s.WaitFor(tb, tt.prefix, stop) })
			if msg != tt.wantErr {
				t.Fatalf("failed with %q, want %q", msg, tt.wantErr)
			}
			if tt.wantErr == "" && got["msg"] != tt.wantMsg {
				t.Errorf("got the line %v, want msg %q", got, tt.wantMsg)
			}
		})
	}
}
