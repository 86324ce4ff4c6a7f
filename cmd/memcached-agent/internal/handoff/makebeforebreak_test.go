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

// TestGrownMakeBeforeBreak is a scale-up's Grown hand-off in the order the
// hook now gives it: the added slot is Adding (clients are given the old
// slots only, and read the moving keys on the source) while the copy runs,
// which removes nothing; the client goes on writing the moving keys to the
// source, whose writes are forwarded; the copy reports Copied, and the
// source keeps every item while the slot is Adding; once the slot is
// listed, the client moves, and a second pass removes from the source what
// its new Pod holds, then Done. Every moving key then reads, from the new
// Pod, the last value a write of it was acknowledged with, and none is
// left on the source.
func TestGrownMakeBeforeBreak(t *testing.T) {
	const keys = 400
	const clientMove = 300 * time.Millisecond
	src := startServer(t, nextIP(t), 64)
	dst := startServer(t, nextIP(t), 64)
	from, to := newClient(t, src.addr), newClient(t, dst.addr)
	// Keys that a 1 → 2 scale-up moves to slot 1.
	var moving []string
	for i := 0; len(moving) < keys; i++ {
		if k := "key-" + strconv.Itoa(i); place(k, 2) == 1 {
			moving = append(moving, k)
		}
	}
	last := make([]int64, keys)
	var seq int64
	round := func(cl *client) {
		for i, k := range moving {
			seq++
			cl.set(k, []byte(strconv.FormatInt(seq, 10)), 0, 0)
			last[i] = seq
		}
	}
	round(from)

	rec := newRecorder()
	r, _ := newRunner(t, "agent-a", rec, Options{ClientMove: clientMove})
	h := v1alpha1.Handoff{Pod: "cache-0", IP: src.ip, Reason: v1alpha1.HandoffGrown, Slot: slot(1), To: "cache-1", ToIP: dst.ip}
	adding := v1alpha1.Slot{Slot: 1, Pod: "cache-1", IP: dst.ip, State: v1alpha1.SlotAdding}
	r.Update([]v1alpha1.Handoff{h}, []v1alpha1.Slot{serving(0, "cache-0", src.ip), adding})
	key := contract.ReportKey(h)
	copied := func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.last[key].State == v1alpha1.HandoffCopied
	}
	for !copied() {
		if copyEnded(rec, key) {
			t.Fatalf("the copy ended %+v before the added slot was listed", rec.last[key])
		}
		round(from)
	}
	for range 5 {
		round(from)
	}
	time.Sleep(4 * clientMove)
	if copyEnded(rec, key) {
		t.Fatalf("the copy ended %+v while the added slot was Adding", rec.last[key])
	}
	for _, k := range moving {
		if _, ok := from.get(k); !ok {
			t.Fatalf("%s left the source while clients still read it there (the added slot is Adding)", k)
		}
	}

	listed := time.Now()
	r.Update([]v1alpha1.Handoff{h}, []v1alpha1.Slot{serving(0, "cache-0", src.ip), serving(1, "cache-1", dst.ip)})
	// The client has moved at once (one key written on the new Pod); the
	// others get ClientMove. Every other key's last write was on the
	// source, and reached the new Pod forwarded.
	seq++
	to.set(moving[0], []byte(strconv.FormatInt(seq, 10)), 0, 0)
	last[0] = seq
	p := rec.final(t, key, 30*time.Second)
	if p.State != v1alpha1.HandoffDone {
		t.Fatalf("final report %+v, want Done", p)
	}
	if d := time.Since(listed); d < clientMove {
		t.Errorf("the copy ended %s after the slot was listed, within ClientMove (%s)", d, clientMove)
	}
	stale, left := 0, 0
	for i, k := range moving {
		if g, ok := to.get(k); !ok || string(g.value) != strconv.FormatInt(last[i], 10) {
			stale++
		}
		if _, ok := from.get(k); ok {
			left++
		}
	}
	if stale > 0 || left > 0 {
		t.Errorf("%d of %d moving keys on the new Pod are not their last acknowledged write, %d left on the source; want 0, 0", stale, keys, left)
	}
}

// TestProxiesConfirm is a Replaced hand-off of a Memcached whose clients
// are the proxies (no clock): once the table serves the new Pod, the done
// marker waits for every proxy to confirm it loaded that table's version
// (status.slotTable.proxyVersion), however long that takes, and follows
// the confirmation; and a proxy that never confirms holds it only
// ProxyConfirm.
func TestProxiesConfirm(t *testing.T) {
	tests := []struct {
		name    string
		confirm bool // the proxies confirm the switch
	}{
		{name: "the proxies confirm", confirm: true},
		{name: "a proxy never confirms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const proxyConfirm = 6 * time.Second
			src := startServer(t, nextIP(t), 64)
			dst := startServer(t, nextIP(t), 64)
			from := newClient(t, src.addr)
			from.set("k", []byte("v"), 0, 0)

			rec := newRecorder()
			// ClientMove is long: with proxies alone, nobody waits for it.
			r, _ := newRunner(t, "agent-a", rec, Options{ClientMove: time.Hour, ProxyConfirm: proxyConfirm})
			clients := func(version, loaded int64) {
				r.UpdateClients(Clients{Proxies: true, Versions: map[string]int64{"": version}, ProxyVersions: map[string]int64{"": loaded}})
			}
			h := v1alpha1.Handoff{Pod: "cache-old", IP: src.ip, Reason: v1alpha1.HandoffReplaced, Slot: slot(0), To: "cache-new", ToIP: dst.ip}
			filling := v1alpha1.Slot{Slot: 0, Pod: "cache-new", IP: dst.ip, State: v1alpha1.SlotFilling, From: "cache-old", FromIP: src.ip}
			clients(10, 10)
			r.Update([]v1alpha1.Handoff{h}, []v1alpha1.Slot{filling})
			if p := rec.final(t, "cache-old", 30*time.Second); p.State != v1alpha1.HandoffDone {
				t.Fatalf("final report %+v, want Done", p)
			}

			// The switch, at version 11; the proxies still route by 10.
			switched := time.Now()
			clients(11, 10)
			r.Update([]v1alpha1.Handoff{h}, []v1alpha1.Slot{serving(0, "cache-new", dst.ip)})
			if tt.confirm {
				time.Sleep(proxyConfirm / 6)
				if _, ok := from.get(contract.DoneKey); ok {
					t.Fatal("the done marker was set before the proxies confirmed the switch")
				}
				clients(11, 11)
				r.Update([]v1alpha1.Handoff{h}, []v1alpha1.Slot{serving(0, "cache-new", dst.ip)})
			}
			testutil.Eventually(t, 2*proxyConfirm, func() error {
				if _, ok := from.get(contract.DoneKey); !ok {
					return errors.New("no done marker on the source")
				}
				return nil
			})
			took := time.Since(switched)
			if !tt.confirm && took < proxyConfirm {
				t.Errorf("the done marker came %s after the switch, unconfirmed, before ProxyConfirm (%s)", took, proxyConfirm)
			}
			if tt.confirm && took >= proxyConfirm {
				t.Errorf("the done marker came %s after the switch, confirmed, not before ProxyConfirm (%s)", took, proxyConfirm)
			}
		})
	}
}

// TestRefillMakeBeforeBreak is a Refill (spec.zones) in the order the hook
// now gives it: the slot is Filling with no Pod to serve it in the filled
// Pod's zone (its reads go to the other zones, its writes reach them
// only) while the copy runs, which starts at once, and clients go on
// writing and deleting the slot's keys on the source (the slot's Pod in
// another zone), whose writes are forwarded; the copy reports Copied and
// does not end while the slot is Filling. When the table lists the filled
// Pod, every key of the slot reads there the last write the cache
// acknowledged (a deleted key misses): no stale read after the switch. A
// proxy that has not switched yet writes to the source alone, within
// ClientMove; the copy ends ClientMove after the listing, and those
// writes reached the filled Pod too. No key of another slot is there.
// Without the forwarding (what it prevents), keys written during the copy
// are older on the filled Pod when it is listed.
func TestRefillMakeBeforeBreak(t *testing.T) {
	for _, tt := range []struct {
		name      string
		noForward bool
	}{
		{name: "forwarded"},
		{name: "not forwarded: what the forwarding prevents", noForward: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := refillUnderWrites(t, tt.noForward)
			t.Logf("on the filled Pod: %d keys of the slot not their last acknowledged write when it was listed, %d when the copy ended, %d keys of other slots", got.atSwitch, got.atEnd, got.other)
			if got.other > 0 {
				t.Errorf("%d keys of other slots on the filled Pod, want none", got.other)
			}
			if tt.noForward {
				if got.atSwitch == 0 {
					t.Errorf("without forwarding every key of the slot on the filled Pod is its last acknowledged write: the test writes nothing the copy misses")
				}
				return
			}
			if got.atSwitch > 0 || got.atEnd > 0 {
				t.Errorf("%d keys of the slot on the filled Pod are not their last acknowledged write when it is listed, %d when the copy ended; want 0, 0", got.atSwitch, got.atEnd)
			}
		})
	}
}

// refillCounts are what refillUnderWrites finds on the filled Pod: the
// slot's keys that are not their last acknowledged write when it is
// listed (atSwitch) and once the copy ended (atEnd), and the keys of
// other slots.
type refillCounts struct{ atSwitch, atEnd, other int }

// refillUnderWrites runs TestRefillMakeBeforeBreak's Refill, the source's
// writes forwarded or not.
func refillUnderWrites(t *testing.T, noForward bool) refillCounts {
	t.Helper()
	const keys, n, s = 300, 3, 1
	const clientMove = 2 * time.Second // the writes after the listing (a proxy not switched) reach the source within it, under load too
	src := startServer(t, nextIP(t), 64)
	dst := startServer(t, nextIP(t), 64)
	from, to := newClient(t, src.addr), newClient(t, dst.addr)
	var mine, others []string
	for i := 0; len(mine) < keys || len(others) < 20; i++ {
		if k := "key-" + strconv.Itoa(i); place(k, n) == s {
			mine = append(mine, k)
		} else {
			others = append(others, k)
		}
	}
	mine, others = mine[:keys], others[:20]
	// last is each key's last acknowledged value, "" once deleted.
	last := make([]string, keys)
	var seq int64
	// round writes every key of the slot to the source, deleting one in
	// ten (a different tenth each round), as the proxies do while the
	// slot is down in the filled Pod's zone.
	round := func() {
		seq++
		for i, k := range mine {
			if (int64(i)+seq)%10 == 0 {
				if got := from.Do("md " + k + "\r\n"); got != "HD\r\n" && got != "NF\r\n" {
					t.Fatalf("md %s answered %q", k, got)
				}
				last[i] = ""
				continue
			}
			v := strconv.FormatInt(seq, 10) + "-" + strconv.Itoa(i)
			from.set(k, []byte(v), 0, 0)
			last[i] = v
		}
	}
	// stale counts the slot's keys on the filled Pod that are not their
	// last acknowledged write.
	stale := func() int {
		n := 0
		for i, k := range mine {
			if g, ok := to.get(k); ok != (last[i] != "") || string(g.value) != last[i] {
				n++
			}
		}
		return n
	}
	round()
	for _, k := range others {
		from.set(k, []byte("other"), 0, 0)
	}

	zoneA := func(e v1alpha1.Slot) []v1alpha1.Slot {
		return []v1alpha1.Slot{serving(0, "a-0", "192.0.2.10"), e, serving(2, "a-2", "192.0.2.12")}
	}
	zoneB := []v1alpha1.Slot{serving(0, "b-0", "192.0.2.20"), serving(1, "b-1", src.ip), serving(2, "b-2", "192.0.2.22")}
	rec := newRecorder()
	r, _ := newHookedRunner(t, "agent-a", rec, Options{ClientMove: clientMove}, testHooks{noForward: noForward})
	h := v1alpha1.Handoff{Pod: "b-1", IP: src.ip, Reason: v1alpha1.HandoffRefill, Zone: "a", Slot: slot(s), To: "a-1", ToIP: dst.ip}
	key := contract.ReportKey(h)
	filling := v1alpha1.Slot{Slot: s, Pod: "a-1", IP: dst.ip, State: v1alpha1.SlotFilling}
	r.UpdateZones([]v1alpha1.Handoff{h}, map[string][]v1alpha1.Slot{"a": zoneA(filling), "b": zoneB})
	copied := func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.last[key].State == v1alpha1.HandoffCopied
	}
	deadline := time.Now().Add(30 * time.Second)
	for !copied() {
		if copyEnded(rec, key) || time.Now().After(deadline) {
			t.Fatalf("the copy did not report Copied while the slot was Filling: %+v", rec.last[key])
		}
		round()
	}
	for range 5 {
		round()
	}
	time.Sleep(2 * clientMove)
	if copyEnded(rec, key) {
		t.Fatalf("the copy ended %+v while the slot was Filling: the source's writes would no longer reach the filled Pod", rec.last[key])
	}
	// The forwarder may lag the last writes by a little: the switch
	// comes once the filled Pod holds them, or 5 s later.
	var got refillCounts
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if got.atSwitch = stale(); got.atSwitch == 0 || time.Now().After(end) {
			break
		}
	}

	listed := time.Now()
	r.UpdateZones([]v1alpha1.Handoff{h}, map[string][]v1alpha1.Slot{"a": zoneA(serving(s, "a-1", dst.ip)), "b": zoneB})
	// A proxy that has not switched yet writes to the source alone.
	round()
	if p := rec.final(t, key, 30*time.Second); p.State != v1alpha1.HandoffDone {
		t.Fatalf("final report %+v, want Done", p)
	}
	if d := time.Since(listed); d < clientMove {
		t.Errorf("the copy ended %s after the slot was listed, within ClientMove (%s)", d, clientMove)
	}
	got.atEnd = stale()
	for _, k := range others {
		if _, ok := to.get(k); ok {
			got.other++
		}
	}
	return got
}
