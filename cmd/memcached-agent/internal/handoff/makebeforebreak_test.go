package handoff

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/test/testutil"
)

// TestMakeBeforeBreak is a Replaced hand-off in the order the hook now
// gives it: the slot is Filling (clients still served the leaving Pod)
// while the copy runs, which starts at once, and the client goes on
// writing to the leaving Pod, whose writes are forwarded; the source gets
// no done marker while the slot is Filling, however long the copy has been
// over; once the table serves the new Pod, the client moves, and the done
// marker follows ClientMove later. Every key then reads, from the new Pod,
// the last value a write of it was acknowledged with.
func TestMakeBeforeBreak(t *testing.T) {
	const keys = 200
	const clientMove = 300 * time.Millisecond
	src := startServer(t, nextIP(t), 64)
	dst := startServer(t, nextIP(t), 64)
	from, to := newClient(t, src.addr), newClient(t, dst.addr)
	key := func(i int) string { return "key-" + strconv.Itoa(i) }
	last := make([]int64, keys)
	var seq int64
	write := func(cl *client, i int) {
		seq++
		cl.set(key(i), []byte(strconv.FormatInt(seq, 10)), 0, 0)
		last[i] = seq
	}
	round := func(cl *client) {
		for i := range keys {
			write(cl, i)
		}
	}
	round(from)

	rec := newRecorder()
	r, _ := newRunner(t, "agent-a", rec, Options{ClientMove: clientMove})
	h := v1alpha1.Handoff{Pod: "cache-old", IP: src.ip, Reason: v1alpha1.HandoffReplaced, Slot: slot(0), To: "cache-new", ToIP: dst.ip}
	filling := v1alpha1.Slot{Slot: 0, Pod: "cache-new", IP: dst.ip, State: v1alpha1.SlotFilling, From: "cache-old", FromIP: src.ip}
	r.Update([]v1alpha1.Handoff{h}, []v1alpha1.Slot{filling})

	// The client writes to the leaving Pod while the copy runs, and
	// after it ended, as the slot is still served from there.
	for !copyEnded(rec, "cache-old") {
		round(from)
	}
	p := rec.final(t, "cache-old", 30*time.Second)
	if p.State != v1alpha1.HandoffDone || p.To != "cache-new" {
		t.Fatalf("final report %+v, want Done to cache-new", p)
	}
	for range 5 {
		round(from)
	}
	// Waiting for the switch is not a matter of time: many times
	// ClientMove later, no marker yet.
	time.Sleep(4 * clientMove)
	if _, ok := from.get(contract.DoneKey); ok {
		t.Fatal("the done marker was set while the slot was still Filling: clients would lose the leaving Pod before they left it")
	}

	switched := time.Now()
	r.Update([]v1alpha1.Handoff{h}, []v1alpha1.Slot{serving(0, "cache-new", dst.ip)})
	round(to)
	testutil.Eventually(t, 10*time.Second, func() error {
		if _, ok := from.get(contract.DoneKey); !ok {
			return errors.New("no done marker on the source after the switch")
		}
		return nil
	})
	if d := time.Since(switched); d < clientMove {
		t.Errorf("the done marker came %s after the switch, within ClientMove (%s)", d, clientMove)
	}
	// The client's writes to the new Pod are the last; before them, its
	// writes to the leaving Pod reached the new one (forwarded), and the
	// copy put nothing older on top.
	testutil.Eventually(t, 10*time.Second, func() error {
		stale := 0
		for i := range keys {
			g, ok := to.get(key(i))
			if !ok || string(g.value) != strconv.FormatInt(last[i], 10) {
				stale++
			}
		}
		if stale > 0 {
			return errors.New(strconv.Itoa(stale) + " keys on the new Pod are not their last acknowledged write")
		}
		return nil
	})
}

// copyEnded tells whether pod's copy reported its end.
func copyEnded(rec *recorder, pod string) bool {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	s := rec.last[pod].State
	return s == v1alpha1.HandoffDone || s == v1alpha1.HandoffFailed
}
