package program

import (
	"context"
	"time"
)

// Every calls f every d, the first time d from now, until ctx ends or f
// returns false: the loop the agent's periodic work (reports, lock
// renewals, retries) shares, so that each says only what it does.
func Every(ctx context.Context, d time.Duration, f func() bool) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if !f() {
				return
			}
		}
	}
}
