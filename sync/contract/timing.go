package contract

import "time"

// The hand-off's timings, in one place: the hook builds the slot table and
// the memcached Pods' templates from them (their preStop and grace period),
// and the agent takes them as its flags' and options' defaults. They are one
// protocol, measured from the moment a leaving Pod's deletion is asked
// (t = 0) in a Replaced hand-off:
//
//	t = 0                the Pod starts terminating: its preStop sleeps
//	                     PreStopSleep (endpoints drop the Pod), then waits
//	                     for DoneKey on its own memcached
//	t ≤ Settle + 1 s     the hook acts on the deletion once it settled (its
//	                     stamp is to the second; sync/slots.Assign):
//	                     a Ready Pod takes the slot, the status says Replaced;
//	                     the slot is Filling: clients are still served the
//	                     leaving Pod (make before break)
//	+ the copy           starts at once, the leaving Pod's writes forwarded;
//	                     the default bound allows CopyMiBPerSecond for it
//	                     (half the slowest rate measured)
//	+ ≤ MaxCatchUp       the copy's end waits for the forwarder to hand on
//	                     what the source logged before it
//	+ a sync             the hook serves the slot from the new Pod
//	+ ClientMove         the agent waits for clients to follow (--handoff-
//	                     settle), or, with the proxy tier, for every proxy
//	                     to confirm the pool, at most ProxyConfirm; then
//	                     DoneKey
//	preStop bound        PreStopSleep + handoffSeconds (by default SlotWait and
//	                     a second for every CopyMiBPerSecond of maxMemoryMB, at
//	                     least v1alpha1.MinHandoffSeconds; plus the client move
//	                     when the spec sets it): DoneKey ends the wait sooner
//	grace period         the preStop bound + MemcachedStop, for memcached to
//	                     exit on SIGTERM
//
// So, in time: settle < client move < preStop bound < grace. The copy's
// fixed costs (Settle, its second, the longer of ClientMove and
// ProxyConfirm, and MaxCatchUp) fit within the
// shortest preStop bound the API allows, and within the default bound an
// agent that died holding the copy's lock is waited out too (LockTTL, less
// than SlotWait). TestTimings fails when a change breaks one of these.
//
// Without keepWarm a memcached Pod sleeps PreStopSleep too, within
// GraceWithoutHandoff.
const (
	// Settle is how long after the second an event is stamped with the
	// hook waits before it acts on it (sync/slots.Assign): the API server
	// and the kubelet stamp events to the second, so an event stamped t
	// happened before t+1 s, and Settle leaves one more second for it to
	// reach Metacontroller's cache.
	Settle = 2 * time.Second

	// ClientMove is how long a copy waits, once a Pod has taken a leaving
	// Pod's slot, for clients to follow it (spec.rollout.clientMoveSeconds
	// left out; the agent's --handoff-settle): the proxy and Auto Discovery
	// clients switch within a second. ClientMoveStableNames is the wait
	// with stable names: dskit's DNS lookup period (30 s; Thanos' is 10 s)
	// plus the cluster DNS's TTL (5 s) and a margin.
	ClientMove            = 2 * time.Second
	ClientMoveStableNames = 40 * time.Second

	// ProxyConfirm bounds how long a copy waits, once the table moved a
	// slot's clients, for every proxy to confirm it loaded the pool that
	// moved them (status.slotTable.proxyVersion), before it takes them as
	// moved all the same: a proxy that never confirms (its agent down, a
	// report that cannot be written) must not hold a leaving Pod or a
	// Grown copy's second pass. A healthy proxy confirms within about 3 s:
	// its poll and its cron (a second each), its agent's report, a sync;
	// 6 s is twice that, and keeps the fixed costs within the shortest
	// handoffSeconds (TestTimings).
	ProxyConfirm = 6 * time.Second

	// PreStopSleep keeps a terminating memcached Pod serving while
	// endpoints drop it: memcached exits at once on SIGTERM.
	PreStopSleep = 10 * time.Second

	// SlotWait is the part of the default handoffSeconds that is not the
	// copy: for a Ready Pod to take the slot (the replacement of a deleted
	// Pod has to start first), the settle, the client move and the
	// catch-up. CopyMiBPerSecond is the copy rate the rest allows for, a
	// second for every 50 MiB of maxMemoryMB: set from a -race build's
	// rate, it is under half the slowest rate measured as the agent is
	// built (70, BENCHMARKS.md "The copy against its floor"), and stays:
	// it is in every keepWarm memcached Pod's template, which an
	// operator upgrade must not roll, and a 1 Gbit/s link between nodes
	// leaves each of two copies about 60 MiB/s.
	SlotWait         = 30 * time.Second
	CopyMiBPerSecond = 50

	// MemcachedStop is what memcached gets after the preStop, within the
	// grace period, to exit on SIGTERM.
	MemcachedStop = 5 * time.Second

	// GraceWithoutHandoff is a memcached Pod's grace period without
	// keepWarm: more than PreStopSleep.
	GraceWithoutHandoff = 30 * time.Second

	// MaxCatchUp bounds how long the done marker waits for the forwarder
	// to hand on what the source logged before the copy ended: a
	// forwarder that falls behind must not hold the source's stop up. 2 s
	// was too short on a loaded machine (make test with four suites at
	// once: 13 writes lost, read stale by pymemcache).
	MaxCatchUp = 10 * time.Second

	// LockTTL is the TTL of the lock the copying agent holds on the
	// source, renewed every third of it (the agent's --handoff-lock-ttl):
	// how long an agent that died holds a copy up before the other agent
	// takes it over.
	LockTTL = 15 * time.Second

	// ReportLinger is how long the agent keeps a hand-off's last report
	// after its entry left the status, before it removes it. The hook
	// decides from statuses a write or two stale, which can bring an entry
	// back for a sync or two; without its report, a copy that ended would
	// look as if it had not started, and a slot that moved to its new Pod
	// would be Filling again (sync/slots.Fill; TestModel found it).
	ReportLinger = 30 * time.Second
)
