package memcached

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/sync/slots"
)

// Keep warm: a leaving memcached Pod keeps serving until the agent has
// handed its items on to the Pod that takes its slot (spec.rollout.keepWarm).
// The agent runs in its Deployment, reports its copies in the ConfigMap
// NAME-agent, and the status carries them as hand-offs.

// The hand-off's timings are contract's (the agent uses them too): see
// there how they relate. The hook writes them into the Pod templates in
// seconds.

// HandoffSeconds is how long a leaving Pod keeps serving for its hand-off
// (spec.rollout.handoffSeconds, or contract.SlotWait plus a second for
// every contract.CopyMiBPerSecond of maxMemoryMB and of the extstore
// file, whose items are copied too), counted after the preStop's first
// sleep.
func HandoffSeconds(s *v1alpha1.MemcachedSpec) int64 {
	if s.Rollout != nil && s.Rollout.HandoffSeconds != nil {
		return int64(*s.Rollout.HandoffSeconds)
	}
	mb := int64(*s.Memcached.MaxMemoryMB) + v1alpha1.ExtstoreFileMiB(s)
	return seconds(contract.SlotWait) + (mb+contract.CopyMiBPerSecond-1)/contract.CopyMiBPerSecond
}

// clientMoveSeconds is how long a copy waits for clients to move to a
// slot's new Pod (spec.rollout.clientMoveSeconds): the agent's own
// default (contract.ClientMove), for the proxy and Auto Discovery
// clients, or contract.ClientMoveStableNames with stable names.
func clientMoveSeconds(s *v1alpha1.MemcachedSpec) int64 {
	switch {
	case s.Rollout != nil && s.Rollout.ClientMoveSeconds != nil:
		return int64(*s.Rollout.ClientMoveSeconds)
	case stableNamesEnabled(s):
		return seconds(contract.ClientMoveStableNames)
	}
	return seconds(contract.ClientMove)
}

// seconds is a timing as the Pod templates give it: whole seconds.
func seconds(d time.Duration) int64 { return int64(d / time.Second) }

// clientMoveSet tells whether the wait is the spec's or stable names'
// rather than the agent's default: only then is it in the Pod templates,
// so that a Memcached without either keeps its templates byte for byte.
func clientMoveSet(s *v1alpha1.MemcachedSpec) bool {
	return (s.Rollout != nil && s.Rollout.ClientMoveSeconds != nil) || stableNamesEnabled(s)
}

// servingSeconds is how long a leaving Pod serves for its hand-off after
// the preStop's first sleep: HandoffSeconds, and the wait for clients to
// move when it is set.
func servingSeconds(s *v1alpha1.MemcachedSpec) int64 {
	if clientMoveSet(s) {
		return HandoffSeconds(s) + clientMoveSeconds(s)
	}
	return HandoffSeconds(s)
}

type handoff struct{ noFeature }

func keepWarm(s *v1alpha1.MemcachedSpec) bool {
	return s.Rollout != nil && s.Rollout.KeepWarm
}

// handsOff tells whether the agent hands items on: keepWarm's hand-offs,
// or, with zones, the refills of slots taken cold.
func handsOff(s *v1alpha1.MemcachedSpec) bool { return s.HandsOff() }

func (handoff) agentKinds(s *v1alpha1.MemcachedSpec) []string {
	if handsOff(s) {
		return []string{ConfigMapKey}
	}
	return nil
}

// pod has a leaving memcached wait for its hand-off (preStop), within a
// grace period long enough for the preStop's sleep, the hand-off and
// memcached's own stop.
func (handoff) pod(s *v1alpha1.MemcachedSpec, t *corev1.PodTemplateSpec) {
	if !keepWarm(s) {
		return
	}
	t.Spec.TerminationGracePeriodSeconds = ptr(preStopSleepSeconds + servingSeconds(s) + seconds(contract.MemcachedStop))
	container(t, "memcached").Lifecycle.PreStop = preStop(s)
}

// agentPod has the agent's copies wait for clients to move as long as the
// spec says, when it says.
func (handoff) agentPod(s *v1alpha1.MemcachedSpec, t *corev1.PodTemplateSpec) {
	if !keepWarm(s) || !clientMoveSet(s) {
		return
	}
	c := container(t, "agent")
	c.Args = append(c.Args, "--handoff-settle="+strconv.FormatInt(clientMoveSeconds(s), 10)+"s")
}

// agentRules let the agent write where it reports hand-offs (the hook
// reads it), and the events that tell users what was handed on. Events
// cannot be limited by name: they are made, not updated.
func (handoff) agentRules(d *desire) []rbacv1.PolicyRule {
	if !handsOff(d.s) {
		return nil
	}
	return []rbacv1.PolicyRule{{
		APIGroups:     []string{""},
		Resources:     []string{"configmaps"},
		ResourceNames: []string{agentName(d.p.Name)},
		Verbs:         []string{"get", "update", "patch"},
	}, {
		APIGroups: []string{"", "events.k8s.io"},
		Resources: []string{"events"},
		Verbs:     []string{"create"},
	}}
}

// besideAgent is the ConfigMap the agent reports in. No data: the agent
// writes it, and since the hook never sets it, Metacontroller's three-way
// merge leaves it alone.
func (handoff) besideAgent(d *desire) []any {
	if !handsOff(d.s) {
		return nil
	}
	return []any{corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: agentMeta(d.p, agentName(d.p.Name)),
	}}
}

// preStop keeps a leaving memcached serving for preStopSleepSeconds (so
// endpoints drop the Pod first; memcached exits at once on SIGTERM), then
// until its own memcached holds contract.DoneKey or servingSeconds pass
// (scripts/prestop.sh).
func preStop(s *v1alpha1.MemcachedSpec) *corev1.LifecycleHandler {
	script := render(preStopScript, map[string]any{
		"Sleep": preStopSleepSeconds, "Seconds": servingSeconds(s), "Key": contract.DoneKey, "Port": localPort(s),
	})
	return &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", script}}}
}

// planHandoffs plans the hand-offs, as package slots does for every
// cell: with keepWarm, where each leaving Pod's items go within its cell;
// with zones, the Refills across them; with the progress the agent
// reports in the data of the ConfigMap NAME-agent. Then a slot a Pod
// took from a leaving one (keepWarm), or with nothing handed over
// (zones: a Refill's), is Filling until its copy ends (slots.Fill): the
// children that follow the table (stable names, the proxies' pool) and
// the status see it so.
func (pl *plan) planHandoffs(now time.Time) {
	cells := pl.slotCells()
	pl.handoffs = slots.Handoffs(slots.HandoffInput{
		Cells:    cells,
		Size:     pl.size,
		KeepWarm: keepWarm(pl.spec),
		Prev:     pl.p.Status.Handoffs,
		Reports:  pl.obs.reports,
	})
	if !handsOff(pl.spec) {
		return
	}
	tables, pending := slots.Fill(slots.FillInput{Cells: cells, Handoffs: pl.handoffs, KeepWarm: keepWarm(pl.spec), Size: pl.size, Bound: fillBound(pl.spec), Now: now})
	for i := range pl.cells {
		pl.cells[i].assigned.Slots = tables[i]
	}
	pl.wait(pending)
}

// fillBound is how long after its deletion a leaving Pod's successor may
// be filled before its slot moves with what it has (slots.Fill): the
// preStop's first sleep and the time it serves, less the wait for
// clients to move off it (with the proxy tier, the proxies' confirmation
// may take up to contract.ProxyConfirm) and the hook's own settling, so
// that they have left it before its preStop ends. A Refill's Pod (zones)
// waits as long after it turned Ready: its copy is of a slot's items, a
// Pod's worth.
func fillBound(s *v1alpha1.MemcachedSpec) time.Duration {
	wait := clientMoveSeconds(s)
	if s.ProxyOn() {
		wait = max(wait, seconds(contract.ProxyConfirm))
	}
	return time.Duration(preStopSleepSeconds+servingSeconds(s)-wait)*time.Second - contract.Settle
}

// report gives the status's hand-offs (planHandoffs).
func (handoff) report(pl *plan, st *v1alpha1.MemcachedStatus) {
	if pl.spec == nil {
		// An invalid spec: the children stay, and so does the agent,
		// which goes on with what the status said.
		st.Handoffs = pl.p.Status.Handoffs
		return
	}
	st.Handoffs = pl.handoffs
}
