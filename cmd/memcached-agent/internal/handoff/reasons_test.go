package handoff

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
)

// TestReasons checks each entry of reasons against what the docs promise
// of its reason (v1alpha1.Handoff's Reason and Flush, doc.go,
// cmd/memcached-agent/README.md's Hand-offs): whether an entry asks for a
// copy, whether anything is copied, whether the source leaves (the done
// marker and forwarding), whether the items leave the source, when the
// copy waits for clients to move, and whether it empties the Pod it fills
// first. An entry changed, added or lost fails it.
func TestReasons(t *testing.T) {
	tests := []struct {
		name   string
		reason v1alpha1.HandoffReason
		// entry is one the hook writes once the copy may start; notYet,
		// when set, one it writes before then.
		entry, notYet v1alpha1.Handoff
		wantAsks      bool
		wantCopies    bool
		wantLeaving   bool
		wantRemove    bool
		wantSettle    settle
		wantFlush     bool
	}{
		{
			// "every item of ip:11211 to toIP:11211"; done marker: yes;
			// "for a hand-off whose source leaves (Replaced, Removed)" the
			// writes are forwarded; "A copy starts --handoff-settle after
			// its entry appears".
			name: "Replaced: every item to the Pod that took the slot, from a source that leaves", reason: v1alpha1.HandoffReplaced,
			entry:    v1alpha1.Handoff{Pod: "cache-a", IP: "10.0.0.1", Reason: v1alpha1.HandoffReplaced, Slot: slot(0), To: "cache-b", ToIP: "10.0.0.2"},
			wantAsks: true, wantCopies: true, wantLeaving: true, wantSettle: settleBeforeDone,
		},
		{
			// "each item to the slot slots.Place names"; done marker: yes.
			name: "Removed: each item where its key hashes, from a source that leaves", reason: v1alpha1.HandoffRemoved,
			entry:    v1alpha1.Handoff{Pod: "cache-a", IP: "10.0.0.1", Reason: v1alpha1.HandoffRemoved},
			wantAsks: true, wantCopies: true, wantLeaving: true, wantSettle: settleBeforeDone,
		},
		{
			// "as Removed; the source stays in its new slot and keeps its
			// items"; done marker: no.
			name: "Moved: each item where its key hashes, from a source that stays and keeps them", reason: v1alpha1.HandoffMoved,
			entry:    v1alpha1.Handoff{Pod: "cache-a", IP: "10.0.0.1", Reason: v1alpha1.HandoffMoved, Slot: slot(1), To: "cache-a", ToIP: "10.0.0.1"},
			wantAsks: true, wantCopies: true, wantSettle: settleBeforeRemove,
		},
		{
			// "once to is named ... to that slot when it is Serving, then
			// deleted from the source"; done marker: no.
			name: "Grown: once planned, the added slots' items, deleted from a source that stays", reason: v1alpha1.HandoffGrown,
			entry:    v1alpha1.Handoff{Pod: "cache-a", IP: "10.0.0.1", Reason: v1alpha1.HandoffGrown, Slot: slot(2), To: "cache-c", ToIP: "10.0.0.3"},
			notYet:   v1alpha1.Handoff{Pod: "cache-a", IP: "10.0.0.1", Reason: v1alpha1.HandoffGrown, Slot: slot(2)},
			wantAsks: true, wantCopies: true, wantRemove: true, wantSettle: settleBeforeRemove,
		},
		{
			// "To ... is filled with its items of the slot"; Flush: "the
			// agent empties it before it copies"; the source "stays";
			// done marker: no; the copy starts at once (the slot is down
			// in its zone), and clients get ClientMove once it is listed.
			name: "Refill: the slot's items to the Pod filled, emptied first, from a source that stays", reason: v1alpha1.HandoffRefill,
			entry:    v1alpha1.Handoff{Pod: "b-1", IP: "10.0.1.1", Reason: v1alpha1.HandoffRefill, Zone: "a", Slot: slot(1), To: "a-1", ToIP: "10.0.0.1", Flush: true},
			notYet:   v1alpha1.Handoff{Pod: "b-1", IP: "10.0.1.1", Reason: v1alpha1.HandoffRefill, Zone: "a", Slot: slot(1)},
			wantAsks: true, wantCopies: true, wantSettle: settleBeforeRemove, wantFlush: true,
		},
		{
			// "nothing to copy"; done marker: "yes, at once".
			name: "NoSlot: nothing to copy, the done marker at once", reason: v1alpha1.HandoffNoSlot,
			entry:    v1alpha1.Handoff{Pod: "cache-x", IP: "10.0.0.9", Reason: v1alpha1.HandoffNoSlot},
			wantAsks: true, wantLeaving: true, wantSettle: settleNever,
		},
		{
			// "nothing yet: its slot waits for a Ready Pod"; a leaving
			// Pod's reason (HandoffReason).
			name: "Waiting: nothing yet", reason: v1alpha1.HandoffWaiting,
			entry:       v1alpha1.Handoff{Pod: "cache-a", IP: "10.0.0.1", Reason: v1alpha1.HandoffWaiting, Slot: slot(0)},
			wantLeaving: true, wantSettle: settleNever,
		},
	}
	if got, want := len(reasons), len(tests); got != want {
		t.Errorf("reasons has %d entries, the docs promise %d reasons", got, want)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs, ok := reasons[tt.reason]
			if !ok {
				t.Fatalf("reasons has no entry for %s", tt.reason)
			}
			if got := wanted(tt.entry); got != tt.wantAsks {
				t.Errorf("asks for a copy: got %t, want %t", got, tt.wantAsks)
			}
			if tt.notYet.Reason != "" && wanted(tt.notYet) {
				t.Errorf("asks for a copy before it may start: %+v", tt.notYet)
			}
			unnamed := tt.entry
			unnamed.Pod = ""
			if wanted(unnamed) {
				t.Errorf("asks for a copy with no Pod named")
			}
			if got := rs.route != nil; got != tt.wantCopies {
				t.Errorf("copies: got %t, want %t", got, tt.wantCopies)
			}
			if rs.route != nil {
				if _, err := rs.route(&Runner{}, tt.entry); err != nil {
					t.Errorf("no route for %+v: %v", tt.entry, err)
				}
			}
			if rs.leaving != tt.wantLeaving {
				t.Errorf("source leaves (done marker, forwarded): got %t, want %t", rs.leaving, tt.wantLeaving)
			}
			if rs.remove != tt.wantRemove {
				t.Errorf("items removed from the source: got %t, want %t", rs.remove, tt.wantRemove)
			}
			if rs.settle != tt.wantSettle {
				t.Errorf("waits for clients to move: got %v, want %v", rs.settle, tt.wantSettle)
			}
			if rs.flush != tt.wantFlush {
				t.Errorf("empties the Pod it fills first: got %t, want %t", rs.flush, tt.wantFlush)
			}
		})
	}
	if wanted(v1alpha1.Handoff{Pod: "cache-a", IP: "10.0.0.1", Reason: "Later"}) {
		t.Error("a reason the agent does not know asks for a copy")
	}
}

// TestDest checks the one test every route makes of an item's slot: it
// goes there only when the slot serves, at an address, from a Pod that is
// not the source.
func TestDest(t *testing.T) {
	h := v1alpha1.Handoff{Pod: "cache-a", IP: "10.0.0.1", Reason: v1alpha1.HandoffRemoved}
	r := &Runner{opts: Options{}.withDefaults()}
	tests := []struct {
		name     string
		slot     v1alpha1.Slot
		wantAddr string
		wantOK   bool
	}{
		{name: "another Pod that serves", slot: serving(1, "cache-b", "10.0.0.2"), wantAddr: "10.0.0.2:11211", wantOK: true},
		{name: "another Pod being filled", slot: v1alpha1.Slot{Slot: 1, Pod: "cache-b", IP: "10.0.0.2", State: v1alpha1.SlotFilling, From: "cache-a", FromIP: "10.0.0.1"},
			wantAddr: "10.0.0.2:11211", wantOK: true},
		{name: "leaving", slot: v1alpha1.Slot{Slot: 1, Pod: "cache-b", IP: "10.0.0.2", State: v1alpha1.SlotLeaving}},
		{name: "not ready", slot: v1alpha1.Slot{Slot: 1, Pod: "cache-b", IP: "10.0.0.2", State: v1alpha1.SlotNotReady}},
		{name: "serving with no address", slot: serving(1, "cache-b", "")},
		{name: "the source by name", slot: serving(1, "cache-a", "10.0.0.2")},
		{name: "the source by address", slot: serving(1, "cache-b", "10.0.0.1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, ok := r.dest(h, tt.slot)
			if d.addr != tt.wantAddr || ok != tt.wantOK {
				t.Errorf("got %q, %t; want %q, %t", d.addr, ok, tt.wantAddr, tt.wantOK)
			}
		})
	}
}

// TestREADMEReasons holds the reasons table of cmd/memcached-agent/README.md
// (Hand-offs) to reasons: a row for each reason and no other, and each
// row's cells saying what its entry does.
func TestREADMEReasons(t *testing.T) {
	const path = "../../README.md"
	const header = "| reason | what the agent does | the source | waits for clients to move |"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), header)
	if !ok {
		t.Fatalf("%s has no reasons table (no line %q)", path, header)
	}
	table, _, _ = strings.Cut(table, "\n\n")
	rowRE := regexp.MustCompile("(?m)^\\| `([A-Za-z]+)`[^|]*\\|([^|]*)\\|([^|]*)\\|([^|]*)\\|$")
	rows := map[v1alpha1.HandoffReason][]string{}
	for _, m := range rowRE.FindAllStringSubmatch(table, -1) {
		rows[v1alpha1.HandoffReason(m[1])] = []string{strings.TrimSpace(m[2]), strings.TrimSpace(m[3]), strings.TrimSpace(m[4])}
	}
	for reason := range rows {
		if _, ok := reasons[reason]; !ok {
			t.Errorf("%s has a row for %s, which the agent does not know", path, reason)
		}
	}
	waits := map[settle]string{
		settleNever:        "no",
		settleBeforeDone:   "once clients are given the keys' new place, before the done marker",
		settleBeforeRemove: "once clients are given the keys' new places, before the copy ends",
	}
	for reason, rs := range reasons {
		row, ok := rows[reason]
		if !ok {
			t.Errorf("%s has no row for %s", path, reason)
			continue
		}
		what, source, wait := row[0], row[1], row[2]
		if copies := !strings.HasPrefix(what, "nothing"); copies != (rs.route != nil) {
			t.Errorf("%s: %s copies %t (%q); its entry, %t", path, reason, copies, what, rs.route != nil)
		}
		if flush := strings.Contains(what, "`flush`"); flush != rs.flush {
			t.Errorf("%s: %s empties the Pod it fills first %t (%q); its entry, %t", path, reason, flush, what, rs.flush)
		}
		if leaving := strings.HasPrefix(source, "leaves"); leaving != rs.leaving {
			t.Errorf("%s: %s's source leaves %t (%q); its entry, %t", path, reason, leaving, source, rs.leaving)
		}
		if remove := strings.Contains(source, "loses"); remove != rs.remove {
			t.Errorf("%s: %s's source loses the items copied %t (%q); its entry, %t", path, reason, remove, source, rs.remove)
		}
		if want := waits[rs.settle]; !strings.HasPrefix(wait, want) {
			t.Errorf("%s: %s waits %q; its entry, %s (%q)", path, reason, wait, rs.settle, want)
		}
	}
}
