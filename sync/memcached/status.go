package memcached

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/metacontroller"
	"github.com/example/memcached-operator/sync/slots"
)

// status computes the parent's status from the plan this sync made;
// specErr says why the spec is invalid. Each feature fills its own fields.
func status(pl *plan, specErr string, now time.Time, opts Options) *v1alpha1.MemcachedStatus {
	p, spec, obs, size := pl.p, pl.spec, pl.obs, pl.size
	st := &v1alpha1.MemcachedStatus{
		ObservedGeneration: p.Generation,
		Nodes:              []string{},
		Endpoints:          []string{},
		Selector:           labels.SelectorFromSet(SelectorLabels(p.Name)).String(),
	}
	for _, pod := range obs.pods {
		st.Nodes = append(st.Nodes, pod.Metadata.Name)
		st.Replicas++
		if podReady(pod) {
			st.ReadyReplicas++
			if pod.Status.PodIP != "" {
				st.Endpoints = append(st.Endpoints, net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(Port)))
			}
		}
	}
	slices.Sort(st.Endpoints)
	if d := pl.cells[0].deployment; d != nil {
		st.Image = d.image
	}
	// The edge: each cell's status, as the wire has it. Without zones the
	// one cell's table is status.slotTable, and the Memcached's Pods are
	// its counts; with zones each zone has its entry in status.zones, and
	// the Memcached's own table stays empty.
	cells := cellStatus(pl, now)
	var avail metav1.Condition
	if pl.zoned() {
		st.SlotTable = v1alpha1.SlotTable{Slots: []v1alpha1.Slot{}}
		st.Zones = cells
		st.Replicas, st.ReadyReplicas = fewestPerZone(st.Zones)
		avail = zonesAvailable(size, st.Zones)
	} else {
		st.SlotTable = cells[0].SlotTable
		avail = available(size, st.ReadyReplicas)
	}
	for _, f := range features {
		f.report(pl, st)
	}

	if spec == nil && pl.cells[0].deployment == nil {
		avail = cond(ConditionAvailable, false, ReasonInvalidSpec, "the spec is invalid and no Deployment exists")
	}
	conds := []metav1.Condition{
		avail,
		progressing(pl, specErr, cells),
		degraded(spec, specErr, obs, pl.cells, opts),
	}
	old := p.Status.Conditions
	for i := range conds {
		conds[i].ObservedGeneration = p.Generation
		conds[i].LastTransitionTime = metav1.NewTime(now.UTC().Truncate(time.Second))
		if old := meta.FindStatusCondition(old, conds[i].Type); old != nil && old.Status == conds[i].Status {
			conds[i].LastTransitionTime = old.LastTransitionTime
		}
	}
	st.Conditions = conds
	return st
}

// MinAvailable is how many ready Pods make a Memcached of the given size
// Available: all but one, and at least one. One missing Pod is what a
// rolling update or the PodDisruptionBudget may take away; past that, a
// client's miss rate climbs with every Pod lost.
func MinAvailable(size int32) int32 { return max(1, size-1) }

func available(size, ready int32) metav1.Condition {
	switch need := MinAvailable(size); {
	case size == 0:
		return cond(ConditionAvailable, false, ReasonScaledToZero, "spec.size is 0: no memcached Pod runs")
	case ready >= need:
		return cond(ConditionAvailable, true, ReasonEnoughPodsReady, fmt.Sprintf("%d of %d Pods ready (%d needed)", ready, size, need))
	default:
		return cond(ConditionAvailable, false, ReasonNotEnoughPodsReady, fmt.Sprintf("%d of %d Pods ready (%d needed)", ready, size, need))
	}
}

func progressing(pl *plan, specErr string, cells []v1alpha1.ZoneStatus) metav1.Condition {
	obs := pl.obs
	switch {
	case obs.finalizing && obs.childCount > 0:
		return cond(ConditionProgressing, true, ReasonDeleting, fmt.Sprintf("the Memcached is being deleted: waiting for %s to go", plural(obs.childCount, "child", "children")))
	case obs.finalizing:
		return cond(ConditionProgressing, false, ReasonDeleted, "the Memcached is being deleted and its children are gone")
	case specErr != "":
		return cond(ConditionProgressing, false, ReasonInvalidSpec, "the spec is invalid: children are left as they are")
	}
	var c metav1.Condition
	for i, cl := range pl.cells {
		cs := cells[i]
		var done bool
		if c, done = rollout(cellPrefix(cl.zone), cl.deployment, pl.spec, pl.size, cs.Replicas, cs.ReadyReplicas, int(cl.endpoints), cs.SlotTable); !done {
			return c
		}
	}
	if !pl.zoned() {
		return c
	}
	return cond(ConditionProgressing, false, ReasonRolloutComplete, fmt.Sprintf("%d Pods up to date and ready in each of %s", pl.size, plural(len(pl.cells), "zone", "zones")))
}

// cellStatus reports each cell: its Pods and its table, versioned against
// the one the status held.
func cellStatus(pl *plan, now time.Time) []v1alpha1.ZoneStatus {
	out := make([]v1alpha1.ZoneStatus, len(pl.cells))
	for i, c := range pl.cells {
		out[i] = v1alpha1.ZoneStatus{Name: c.zone, Replicas: int32(len(c.live)), ReadyReplicas: c.ready, SlotTable: slotTable(c.prev, c.assigned, now)}
	}
	return out
}

// rollout is how far one memcached Deployment's rollout is, and whether it
// is complete: replicas of its Pods are observed, ready of them are, and
// endpoints of those have an address. The messages start with prefix.
func rollout(prefix string, d *deploymentState, spec *v1alpha1.MemcachedSpec, size, replicas, ready int32, endpoints int, table v1alpha1.SlotTable) (metav1.Condition, bool) {
	switch {
	case d == nil:
		return cond(ConditionProgressing, true, ReasonDeploymentNotObserved, prefix+"waiting for the Deployment to be created"), false
	case deploymentCondition(d.status, appsv1.DeploymentProgressing, string(ReasonProgressDeadlineExceeded)):
		return cond(ConditionProgressing, false, ReasonProgressDeadlineExceeded, prefix+"the Deployment's rollout exceeded its progress deadline"), false
	case d.replicas != size || d.image != spec.Image:
		return cond(ConditionProgressing, true, ReasonDeploymentUpdating, prefix+"waiting for the Deployment to take the new spec"), false
	case d.status.ObservedGeneration < d.generation:
		return cond(ConditionProgressing, true, ReasonDeploymentUpdating, prefix+"waiting for the Deployment controller to observe the new spec"), false
	case d.status.UpdatedReplicas < size || replicas != size || ready < size:
		return cond(ConditionProgressing, true, ReasonRollingOut, fmt.Sprintf(
			"%s%d of %d Pods updated, %d observed, %d ready", prefix, d.status.UpdatedReplicas, size, replicas, ready)), false
	case servingSlots(table) < endpoints:
		// The slot table takes a Pod in once its turning Ready has
		// settled (sync/slots): until then clients are not given it.
		return cond(ConditionProgressing, true, ReasonRollingOut, fmt.Sprintf(
			"%s%d of %d ready Pods in the slot table", prefix, servingSlots(table), endpoints)), false
	default:
		return cond(ConditionProgressing, false, ReasonRolloutComplete, fmt.Sprintf("%d Pods up to date and ready", size)), true
	}
}

// servingSlots counts the table's Serving slots.
func servingSlots(t v1alpha1.SlotTable) int {
	n := 0
	for _, e := range t.Slots {
		if e.State == v1alpha1.SlotServing {
			n++
		}
	}
	return n
}

// plural writes n things: "1 child", "2 children".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func deploymentCondition(s appsv1.DeploymentStatus, t appsv1.DeploymentConditionType, reason string) bool {
	for _, c := range s.Conditions {
		if c.Type == t && c.Reason == reason {
			return true
		}
	}
	return false
}

func degraded(spec *v1alpha1.MemcachedSpec, specErr string, obs observed, cells []cell, opts Options) metav1.Condition {
	if specErr != "" {
		return cond(ConditionDegraded, true, ReasonInvalidSpec, truncate(specErr, maxMessage))
	}
	found := map[Reason][]string{}
	var secretProblem string // the first Pod's, by name
	for _, pod := range obs.pods {
		for _, r := range podTroubleReasons(pod) {
			found[r] = append(found[r], pod.Metadata.Name)
		}
		if msg, ok := checkFailure(pod); ok {
			found[ReasonSecretNotUsable] = append(found[ReasonSecretNotUsable], pod.Metadata.Name)
			if secretProblem == "" {
				secretProblem = msg
			}
		}
	}
	var reason Reason
	var msgs []string
	for _, r := range podTroubles {
		if pods := found[r]; len(pods) > 0 {
			if reason == "" {
				reason = r
			}
			if r == ReasonSecretNotUsable {
				msgs = append(msgs, fmt.Sprintf("%s: %s (%s)", r, secretProblem, listNames(pods)))
				continue
			}
			msgs = append(msgs, string(r)+": "+listNames(pods))
		}
	}
	for _, c := range cells {
		if d := c.deployment; d != nil && deploymentCondition(d.status, appsv1.DeploymentProgressing, string(ReasonProgressDeadlineExceeded)) {
			if reason == "" {
				reason = ReasonProgressDeadlineExceeded
			}
			msgs = append(msgs, cellPrefix(c.zone)+"the Deployment's rollout exceeded its progress deadline")
		}
	}
	if agentIdentityWanted(spec) && opts.AgentImage == "" {
		if reason == "" {
			reason = ReasonAgentImageUnset
		}
		msgs = append(msgs, "spec.discovery, spec.proxy and spec.rollout.keepWarm need the agent, and the hook runs without --agent-image: set it to the hook's own image (the manifests do)")
	}
	if missing := missingKinds(spec, obs); len(missing) > 0 {
		if reason == "" {
			reason = ReasonChildKindNotManaged
		}
		msgs = append(msgs, "the CompositeController does not manage "+strings.Join(missing, ", ")+": apply the current manifests")
	}
	if reason == "" {
		return cond(ConditionDegraded, false, ReasonAsExpected, "no problem observed")
	}
	return cond(ConditionDegraded, true, reason, strings.Join(msgs, "; "))
}

// checkFailure tells whether a Pod's check container refused to start
// memcached, and why: the last line it wrote, which names the field and
// the Secret (never a value; see checkScript). A check that failed before
// and passed since is no failure.
func checkFailure(pod metacontroller.Pod) (string, bool) {
	for _, cs := range pod.Status.InitContainerStatuses {
		if cs.Name != checkContainer {
			continue
		}
		// Waiting or running again after a failure, the failure is the
		// last word: the condition holds through a crash loop.
		end := cs.State.Terminated
		if end == nil {
			end = cs.LastState.Terminated
		}
		if end == nil || end.ExitCode == 0 {
			return "", false
		}
		lines := strings.Split(strings.TrimSpace(end.Message), "\n")
		last := strings.TrimSpace(lines[len(lines)-1])
		if !strings.HasPrefix(last, "spec.") {
			// Killed (out of memory, a signal) before the check said
			// anything of its own.
			last = fmt.Sprintf("the %s container ended with exit code %d (%s) before it could check the Secrets", checkContainer, end.ExitCode, end.Reason)
		}
		return truncate(last, 256), true
	}
	return "", false
}

func podTroubleReasons(pod metacontroller.Pod) []Reason {
	var rs []Reason
	for _, c := range pod.Status.Conditions {
		if c.Type == string(corev1.PodScheduled) && c.Status == string(corev1.ConditionFalse) && c.Reason == corev1.PodReasonUnschedulable {
			rs = append(rs, ReasonUnschedulable)
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && slices.Contains(podTroubles, Reason(w.Reason)) {
			rs = append(rs, Reason(w.Reason))
		}
		// An OOM kill counts while the container is down because of it:
		// a Pod that was killed once and has run fine since is not
		// degraded, and its lastState keeps the reason until the next
		// restart.
		oomNow := cs.State.Terminated != nil && Reason(cs.State.Terminated.Reason) == ReasonOOMKilled
		oomBefore := cs.LastState.Terminated != nil && Reason(cs.LastState.Terminated.Reason) == ReasonOOMKilled
		if oomNow || (oomBefore && !cs.Ready) {
			rs = append(rs, ReasonOOMKilled)
		}
	}
	slices.Sort(rs)
	return slices.Compact(rs)
}

// listNames lists at most five names, so that a message stays readable and
// small on a large Memcached.
func listNames(names []string) string {
	const most = 5
	if len(names) <= most {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:most], ", "), len(names)-most)
}

// maxMessage bounds a condition message far below the API's 32,768
// characters: an invalid spec's message quotes the user's values.
const maxMessage = 2048

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func cond(t string, ok bool, reason Reason, msg string) metav1.Condition {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: t, Status: s, Reason: string(reason), Message: msg}
}

// slotTable is the table Assign made (package slots), versioned against
// the one the status held (prev).
func slotTable(prev v1alpha1.SlotTable, a slots.Assignment, now time.Time) v1alpha1.SlotTable {
	return v1alpha1.SlotTable{Version: slots.Version(prev, a.Slots, now), Slots: a.Slots, Waiting: a.Waiting, EventsUntil: a.EventsUntil}
}

// cellPrefix starts what the conditions say of one cell: nothing for the
// one cell of a Memcached without zones, "zone ZONE: " for a zone.
func cellPrefix(zone string) string {
	if zone == "" {
		return ""
	}
	return "zone " + zone + ": "
}
