package handoff

import (
	"encoding/base64"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
)

// TestForwarded is issue #27: a client that keeps its connection to a
// replaced Pod writes there during and after the copy, until its
// memcached stops. Forwarded, every key on the successor holds the last
// value written (or is gone, where the last write deleted it), binary
// keys too; without forwarding, the writes after the copy read their key
// are lost, and the successor serves the older, copied value.
func TestForwarded(t *testing.T) {
	tests := []struct {
		name      string
		noForward bool
		wantStale bool
	}{
		{name: "forwarded: every key holds its last write", noForward: false, wantStale: false},
		{name: "not forwarded: the writes after the copy are lost", noForward: true, wantStale: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := startServer(t, nextIP(t), 64)
			dst := startServer(t, nextIP(t), 64)
			// Enough items that the copy takes a while, the writer's keys
			// among them.
			fill(t, src.addr, "item", 5000, func(i int) int { return 200 + i%2000 }, 0)
			var keys []string
			for i := range 200 {
				keys = append(keys, fmt.Sprintf("w-%d", i))
			}
			for i := range 20 {
				raw := fmt.Sprintf("\x00bin %d\r\n\xff", i)
				keys = append(keys, base64.StdEncoding.EncodeToString([]byte(raw))+" b")
			}
			writer := newClient(t, src.addr)
			for _, k := range keys {
				writer.set(k, []byte("g0"), 0, 0)
			}

			// The writer rewrites every key each round, deleting some,
			// until stopped; last is what each key holds after its last
			// acknowledged write ("": deleted).
			last := map[string]string{}
			var stop atomic.Bool
			var rounds atomic.Int64
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for gen := 1; !stop.Load(); gen++ {
					for i, k := range keys {
						if (i+gen)%7 == 0 {
							writer.delete(k)
							last[k] = ""
							continue
						}
						v := fmt.Sprintf("g%d", gen)
						writer.set(k, []byte(v), uint32(gen), 0)
						last[k] = v
					}
					rounds.Add(1)
				}
			}()

			ended := make(chan *forwardCounts, 1)
			rec := newRecorder()
			r, _ := newRunner(t, "agent-a", rec, Options{Batch: 50, noForward: tt.noForward, afterForward: func(c *forwardCounts) { ended <- c }})
			h := v1alpha1.Handoff{Pod: "cache-old", IP: src.ip, Reason: v1alpha1.HandoffReplaced, Slot: slot(0), To: "cache-new", ToIP: dst.ip}
			r.Update([]v1alpha1.Handoff{h}, []v1alpha1.Slot{serving(0, "cache-new", dst.ip)})
			if p := rec.final(t, contract.ReportKey(h), 60*time.Second); p.State != "Done" {
				t.Fatalf("the copy: %+v", p)
			}
			// The client keeps writing after the done marker, a few
			// rounds, as it does until the preStop sees the marker and
			// memcached stops.
			after := rounds.Load()
			deadline := time.Now().Add(10 * time.Second)
			for rounds.Load() < after+3 {
				if time.Now().After(deadline) {
					t.Fatal("the writer wrote no round after the copy in 10 s")
				}
				time.Sleep(10 * time.Millisecond)
			}
			stop.Store(true)
			wg.Wait()
			src.cmd.Process.Signal(syscall.SIGTERM)
			src.cmd.Wait()

			if !tt.noForward {
				select {
				case c := <-ended:
					t.Logf("forwarded %d items (%d bytes), %d deletions; %d gone, %d dropped, %d lost",
						c.stored.Load(), c.bytes.Load(), c.deleted.Load(), c.gone.Load(), c.dropped.Load(), c.lost.Load())
					if c.stored.Load() == 0 || c.deleted.Load() == 0 {
						t.Errorf("forwarded %d items and %d deletions, want some of each", c.stored.Load(), c.deleted.Load())
					}
				case <-time.After(30 * time.Second):
					t.Fatal("the forwarder did not end in 30 s after the source stopped")
				}
			}

			to := newClient(t, dst.addr)
			stale := 0
			for _, k := range keys {
				g, ok := to.get(k)
				got := ""
				if ok {
					got = string(g.value)
				}
				if got != last[k] {
					stale++
					if stale <= 5 {
						t.Logf("%s: %q on the successor, last written %q", k, got, last[k])
					}
				}
			}
			t.Logf("%d of %d keys stale after %d rounds", stale, len(keys), rounds.Load())
			if got := stale > 0; got != tt.wantStale {
				t.Errorf("%d of %d keys hold an older value than the last written; want stale: %v", stale, len(keys), tt.wantStale)
			}
		})
	}
}
