package handoff

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
)

// TestSettle is what Options.ClientMove (the agent's --handoff-settle) is for
// before a copy (settleBeforeLock: Removed, whose slot goes at once; a
// Replaced copy waits after it instead, TestMakeBeforeBreak). Once the
// hand-off appears, a client that has not yet moved to the key's new
// owner (a proxy switches its pool within a second) still writes to the
// leaving Pod; then it moves, and reads from the new owner.
// Every key is written on the leaving Pod round after round until the
// client moves, then one key once more on the new owner; once the copy is
// done each key must read, from the new owner, the last value a write of
// it was acknowledged with.
//
// The copy reaches for the leaving Pod no sooner than the settle after the
// hand-off appeared; a client that moves by then loses nothing. The first
// case has the client move at the last moment the settle gives it: as the
// copy, its settle over, reaches for the leaving Pod (held there until the
// client has moved, as a loaded machine may hold it), and the key written
// on the new owner is left as it is (add mode). When the client moves only
// after the copy (what a settle of 0 leaves to chance), every write the
// leaving Pod took after the copy read its key is lost to the older value
// the copy handed on: the test counts those stale keys exactly, to show
// that it sees them.
func TestSettle(t *testing.T) {
	const keys = 50
	tests := []struct {
		name   string
		settle time.Duration
		// moved tells, between two rounds of writes, whether the client
		// moves to the new owner now: reached, the copy has reached for
		// the leaving Pod (its settle is over); copied, it reported its
		// end.
		moved func(reached, copied bool) bool
		// hold keeps the copy from the leaving Pod until the client has
		// moved.
		hold bool
		// wantStale are the keys the new owner serves older than their
		// last acknowledged write; wantItems and wantSkipped, the copy's
		// report.
		wantStale, wantItems, wantSkipped int64
	}{{
		name:        "the copy waits out the client's move",
		settle:      time.Second,
		moved:       func(reached, _ bool) bool { return reached },
		hold:        true,
		wantItems:   keys - 1,
		wantSkipped: 1,
	}, {
		name:      "the client moves after the copy",
		settle:    0,
		moved:     func(_, copied bool) bool { return copied },
		wantStale: keys - 1,
		wantItems: keys,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := startServer(t, nextIP(t), 64)
			dst := startServer(t, nextIP(t), 64)
			from, to := newClient(t, src.addr), newClient(t, dst.addr)
			key := func(i int) string { return "key-" + strconv.Itoa(i) }
			// last is, per key, the highest write acknowledged; seq
			// numbers the writes, and is each write's value.
			last := make([]int64, keys)
			var seq int64
			write := func(cl *client, i int) {
				seq++
				cl.set(key(i), []byte(strconv.FormatInt(seq, 10)), 0, 0)
				last[i] = seq
			}
			for i := range keys {
				write(from, i)
			}

			// reached is closed, and reachedAt set, when the copy first
			// dials the leaving Pod: its settle is over. moved is closed
			// once the client has moved.
			reached, moved := make(chan struct{}), make(chan struct{})
			var reachedAt time.Time
			var once sync.Once
			dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
				if addr == src.addr {
					once.Do(func() {
						reachedAt = time.Now()
						close(reached)
						if tt.hold {
							select {
							case <-moved:
							case <-ctx.Done():
							}
						}
					})
				}
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			}
			rec := newRecorder()
			// Without forwarding (TestForwarded covers it), which would
			// hand on the source's later writes too: this measures what
			// the settle alone keeps out.
			r, _ := newHookedRunner(t, "agent-a", rec, Options{ClientMove: tt.settle, Dial: dial}, testHooks{noForward: true})
			h := v1alpha1.Handoff{Pod: "cache-old", IP: src.ip, Reason: v1alpha1.HandoffRemoved}
			start := time.Now()
			r.Update([]v1alpha1.Handoff{h}, []v1alpha1.Slot{serving(0, "cache-new", dst.ip)})
			isReached := func() bool {
				select {
				case <-reached:
					return true
				default:
					return false
				}
			}
			copied := func() bool {
				rec.mu.Lock()
				defer rec.mu.Unlock()
				s := rec.last["cache-old"].State
				return s == v1alpha1.HandoffDone || s == v1alpha1.HandoffFailed
			}
			// Rounds of writes to the leaving Pod; the round that sees the
			// client move is its last there.
			deadline := start.Add(30 * time.Second)
			for moving := false; !moving; {
				if time.Now().After(deadline) {
					t.Fatal("the client did not move within 30 s (the copy never reached for the leaving Pod, or never ended)")
				}
				moving = tt.moved(isReached(), copied())
				for i := range keys {
					write(from, i)
				}
			}
			movedAfter := time.Since(start)
			write(to, 0)
			close(moved)

			p := rec.final(t, "cache-old", 30*time.Second)
			<-reached
			if d := reachedAt.Sub(start); d < tt.settle {
				t.Errorf("the copy reached for the leaving Pod %s after the hand-off appeared, within its settle of %s", d, tt.settle)
			}
			if p.State != v1alpha1.HandoffDone || p.Items != tt.wantItems || p.Skipped != tt.wantSkipped {
				t.Errorf("final report %+v, want Done, %d items, %d already there", p, tt.wantItems, tt.wantSkipped)
			}
			var stale int64
			for i := range keys {
				g, ok := to.get(key(i))
				if !ok {
					t.Errorf("the new owner lost %s (last written %d)", key(i), last[i])
					continue
				}
				got, err := strconv.ParseInt(string(g.value), 10, 64)
				switch {
				case err != nil || got > last[i]:
					t.Errorf("the new owner holds %s = %q, never acknowledged (last %d)", key(i), g.value, last[i])
				case got < last[i]:
					stale++
				}
			}
			if stale != tt.wantStale {
				t.Errorf("the new owner serves %d of %d keys older than their last acknowledged write, want %d (settle %s, the client moved %s after the hand-off appeared)",
					stale, keys, tt.wantStale, tt.settle, movedAfter.Round(time.Millisecond))
			}
		})
	}
}
