package memcached

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/sync/metacontroller"
	"github.com/example/memcached-operator/sync/slots"
)

// Hand-off timing. The copy rate is measured (BENCHMARKS.md): the agent
// copies at 100 MiB/s and more on loopback; the default allows half of the
// slowest rate seen, 50 MiB/s, and 30 s for a Ready Pod to take the slot
// (the replacement of a deleted Pod has to start first).
const (
	handoffSlotWaitSeconds = 30
	handoffMiBPerSecond    = 50
	// handoffStopSeconds is what memcached gets after the preStop, to
	// exit on SIGTERM.
	handoffStopSeconds = 5
)

// HandoffSeconds is how long a leaving Pod keeps serving for its hand-off
// (spec.rollout.handoffSeconds, or 30 s plus a second for every 50 MiB of
// maxMemoryMB), counted after the preStop's first sleep.
func HandoffSeconds(s *v1alpha1.MemcachedSpec) int64 {
	if s.Rollout != nil && s.Rollout.HandoffSeconds != nil {
		return int64(*s.Rollout.HandoffSeconds)
	}
	mb := int64(*s.Memcached.MaxMemoryMB)
	return handoffSlotWaitSeconds + (mb+handoffMiBPerSecond-1)/handoffMiBPerSecond
}

// terminationGrace is the memcached Pods' grace period: with keepWarm, the
// preStop's sleep, the hand-off and memcached's own stop.
func terminationGrace(s *v1alpha1.MemcachedSpec) int64 {
	if !keepWarm(s) {
		return terminationGraceSeconds
	}
	return preStopSleepSeconds + HandoffSeconds(s) + handoffStopSeconds
}

// preStop keeps a leaving memcached serving: for preStopSleepSeconds (so
// endpoints drop the Pod first; memcached exits at once on SIGTERM), and
// with keepWarm then until its own memcached holds contract.DoneKey or
// HandoffSeconds pass. It asks memcached over loopback with the image's
// sh, nc and timeout, as the liveness check does (quit makes memcached
// close, so nc returns at once), and passes whatever happens: a preStop
// that fails changes nothing but a log line.
func preStop(s *v1alpha1.MemcachedSpec) *corev1.LifecycleHandler {
	if !keepWarm(s) {
		return &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: preStopSleepSeconds}}
	}
	script := fmt.Sprintf(`sleep %d
end=$(( $(date +%%s) + %d ))
while [ "$(date +%%s)" -lt "$end" ]; do
  case "$(printf 'mg %s v\r\nquit\r\n' | timeout 2 nc 127.0.0.1 %d)" in VA*) exit 0 ;; esac
  sleep 1
done`, preStopSleepSeconds, HandoffSeconds(s), contract.DoneKey, localPort(s))
	return &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", script}}}
}

// handoffs are the status's hand-offs: with keepWarm, where each leaving
// Pod's items go (package slots), with the progress the agent reports in
// the data of the ConfigMap NAME-agent.
func handoffs(p *metacontroller.Parent, spec *v1alpha1.MemcachedSpec, size int32, assigned slots.Assignment, pods []slots.Pod, obs observed) []v1alpha1.Handoff {
	if spec == nil {
		// An invalid spec: the children stay, and so does the agent,
		// which goes on with what the status said.
		return p.Status.Handoffs
	}
	if !keepWarm(spec) {
		return nil
	}
	return slots.Handoffs(obs.slotTable.Slots, assigned, size, p.Status.Handoffs, pods, obs.reports)
}

// readReports reads the agent's reports: the data of its ConfigMap, one
// JSON object a hand-off, keyed by contract.ReportKey. One that does not
// decode is left out: the hook only carries them into the status.
func readReports(c metacontroller.Child) map[string]v1alpha1.HandoffProgress {
	out := map[string]v1alpha1.HandoffProgress{}
	for key, raw := range c.Data {
		var r v1alpha1.HandoffProgress
		if json.Unmarshal([]byte(raw), &r) == nil && r.State != "" {
			out[key] = r
		}
	}
	return out
}
