package program

import (
	"context"
	"testing"
	"time"
)

func TestEvery(t *testing.T) {
	tests := []struct {
		name string
		// stopAfter is the call whose f returns false; 0: never.
		stopAfter int
		// cancelAfter cancels ctx in that call; 0: never.
		cancelAfter int
		want        int
	}{
		{name: "until f returns false", stopAfter: 3, want: 3},
		{name: "until ctx ends", cancelAfter: 2, want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got := 0
			Every(ctx, time.Millisecond, func() bool {
				got++
				if got == tt.cancelAfter {
					cancel()
				}
				return got != tt.stopAfter
			})
			if ctx.Err() == context.DeadlineExceeded {
				t.Fatal("Every did not return in 10 s")
			}
			if got != tt.want {
				t.Errorf("f called %d times, want %d", got, tt.want)
			}
		})
	}
}
