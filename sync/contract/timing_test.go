package contract_test

import (
	"testing"
	"time"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
)

// TestTimings checks the hand-off's timings against the relation their doc
// comment gives: from a leaving Pod's deletion, the hook's settle, then the
// client move and the catch-up, come before the preStop's bound, which comes
// before the grace period ends.
func TestTimings(t *testing.T) {
	second := time.Second // the grain events are stamped with
	// A copy waits for clients ClientMove, or, with the proxy tier, for
	// the proxies' confirmation, at most ProxyConfirm.
	fixed := contract.Settle + second + max(contract.ClientMove, contract.ProxyConfirm) + contract.MaxCatchUp
	shortest := contract.PreStopSleep + v1alpha1.MinHandoffSeconds*time.Second
	byDefault := contract.PreStopSleep + contract.SlotWait
	checks := []struct {
		what string
		ok   bool
	}{
		{"Settle > 0 (events stamped to the second are acted on after it)", contract.Settle > 0},
		{"settle < client move: the copy waits for clients after the hook acted on the deletion", contract.ClientMove > 0},
		{"client move < preStop bound: settle, client move and catch-up fit in the shortest handoffSeconds",
			fixed < shortest},
		{"the default bound leaves room for an agent that died holding the lock",
			fixed+contract.LockTTL <= byDefault},
		{"LockTTL < SlotWait", contract.LockTTL < contract.SlotWait},
		{"LockTTL is whole seconds, at least 3 (memcached counts TTLs in seconds; renewed every third)",
			contract.LockTTL%time.Second == 0 && contract.LockTTL >= 3*time.Second},
		{"preStop bound < grace: memcached gets time to stop", contract.MemcachedStop > 0},
		{"the grace without keepWarm outlasts the preStop's sleep", contract.GraceWithoutHandoff > contract.PreStopSleep},
		{"the client moves are within spec.rollout.clientMoveSeconds' bounds",
			contract.ClientMove <= contract.ClientMoveStableNames && contract.ClientMoveStableNames <= v1alpha1.MaxClientMoveSeconds*time.Second},
		{"the copy rate is positive", contract.CopyMiBPerSecond > 0},
		{"a proxy's confirmation (its poll, its cron, a report, a sync) gets longer than the clock it replaces",
			contract.ProxyConfirm > contract.ClientMove},
	}
	// The Pod templates and the flags carry them in whole seconds.
	for _, d := range []time.Duration{contract.Settle, contract.ClientMove, contract.ClientMoveStableNames, contract.PreStopSleep,
		contract.SlotWait, contract.MemcachedStop, contract.GraceWithoutHandoff, contract.MaxCatchUp, contract.LockTTL} {
		checks = append(checks, struct {
			what string
			ok   bool
		}{d.String() + " is whole seconds", d%time.Second == 0})
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("the hand-off's timings break: %s (Settle %s, ClientMove %s, MaxCatchUp %s, LockTTL %s, PreStopSleep %s, SlotWait %s, MemcachedStop %s)",
				c.what, contract.Settle, contract.ClientMove, contract.MaxCatchUp, contract.LockTTL, contract.PreStopSleep, contract.SlotWait, contract.MemcachedStop)
		}
	}
}
