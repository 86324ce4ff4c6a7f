package memcached_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/test/testutil"
	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// earlier is when the parent's observed conditions last changed in the
// fixtures.
var earlier = metav1.NewTime(time.Date(2026, time.November, 21, 12, 0, 0, 0, time.UTC))

// TestLastTransitionTime checks that a condition's lastTransitionTime is
// carried forward from the parent's observed condition while its status
// stays, whatever its reason or message, and is now when the status changes
// or the condition is new.
func TestLastTransitionTime(t *testing.T) {
	// now has nanoseconds: the stamp is what the API server will store,
	// whole seconds.
	now := fixedNow.Add(1500 * time.Millisecond)
	stamped := metav1.NewTime(now.Truncate(time.Second))
	observed := func(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: "before", LastTransitionTime: earlier, ObservedGeneration: 1}
	}
	tests := []struct {
		name       string
		conditions []metav1.Condition
		pods       []pod
		want       map[string]metav1.Time
	}{
		{
			name:       "Available False to True when the Pods become ready",
			conditions: []metav1.Condition{observed("Available", "False", "NotEnoughPodsReady")},
			pods:       readyPods("p", 3),
			want:       map[string]metav1.Time{"Available": stamped},
		},
		{
			name:       "Available True to False when the Pods stop being ready",
			conditions: []metav1.Condition{observed("Available", "True", "EnoughPodsReady")},
			pods:       []pod{{name: "p-0", ip: "10.1.0.1"}, {name: "p-1", ip: "10.1.0.2"}, {name: "p-2", ready: true, ip: "10.1.0.3"}},
			want:       map[string]metav1.Time{"Available": stamped},
		},
		{
			name:       "Available stays True with another message",
			conditions: []metav1.Condition{observed("Available", "True", "SomeOldReason")},
			pods:       readyPods("p", 3),
			want:       map[string]metav1.Time{"Available": earlier},
		},
		{
			name: "every condition unchanged",
			conditions: []metav1.Condition{
				observed("Available", "True", "EnoughPodsReady"),
				observed("Progressing", "False", "RolloutComplete"),
				observed("Degraded", "False", "AsExpected"),
			},
			pods: readyPods("p", 3),
			want: map[string]metav1.Time{"Available": earlier, "Progressing": earlier, "Degraded": earlier},
		},
		{
			name:       "Degraded False to True on a crash loop",
			conditions: []metav1.Condition{observed("Degraded", "False", "AsExpected"), observed("Progressing", "False", "RolloutComplete")},
			pods:       append(readyPods("p", 2), pod{name: "p-9", waiting: "CrashLoopBackOff", ip: "10.1.0.9"}),
			want:       map[string]metav1.Time{"Degraded": stamped, "Progressing": stamped},
		},
		{
			name:       "no observed conditions",
			conditions: nil,
			pods:       readyPods("p", 3),
			want:       map[string]metav1.Time{"Available": stamped, "Progressing": stamped, "Degraded": stamped},
		},
		{
			name:       "an observed condition of another type is ignored",
			conditions: []metav1.Condition{observed("Ready", "False", "Whatever")},
			pods:       readyPods("p", 3),
			want:       map[string]metav1.Time{"Available": stamped, "Progressing": stamped, "Degraded": stamped},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := fixture{spec: `{"size":3}`, conditions: tt.conditions, deployment: convergedDeploy(3), pods: tt.pods}.run(t, now)
			for typ, want := range tt.want {
				got := a.condition(t, typ).LastTransitionTime
				if !got.Equal(&want) {
					t.Errorf("%s lastTransitionTime = %v, want %v", typ, got, want)
				}
			}
		})
	}
}

// TestDegradedPodTroubles checks that Degraded reports the Pods' troubles,
// the worst as its reason, naming the Pods (sorted, at most five), and that
// Pods the parent does not own, or that are going away, do not count.
func TestDegradedPodTroubles(t *testing.T) {
	crashing := func(names ...string) []pod {
		var ps []pod
		for _, n := range names {
			ps = append(ps, pod{name: n, waiting: "CrashLoopBackOff", ip: "10.1.1.1"})
		}
		return ps
	}
	tests := []struct {
		name       string
		pods       []pod
		wantStatus metav1.ConditionStatus
		wantReason string
		// wantInMessage are substrings the message must hold, in order.
		wantInMessage []string
	}{
		{
			name:       "healthy",
			pods:       readyPods("p", 3),
			wantStatus: "False",
		},
		{
			name:          "crash loop",
			pods:          append(readyPods("p", 2), pod{name: "p-x", waiting: "CrashLoopBackOff", ip: "10.1.0.9"}),
			wantStatus:    "True",
			wantReason:    "CrashLoopBackOff",
			wantInMessage: []string{"CrashLoopBackOff", "p-x"},
		},
		{
			name:       "OOM killed once, ready again since",
			pods:       append(readyPods("p", 2), pod{name: "p-x", ready: true, ip: "10.1.0.9", lastTerminated: "OOMKilled"}),
			wantStatus: "False",
			wantReason: "AsExpected",
		},
		{
			name:          "OOM killed last time, not ready yet",
			pods:          append(readyPods("p", 2), pod{name: "p-x", ip: "10.1.0.9", lastTerminated: "OOMKilled"}),
			wantStatus:    "True",
			wantReason:    "OOMKilled",
			wantInMessage: []string{"OOMKilled", "p-x"},
		},
		{
			name:          "OOM killed just now",
			pods:          append(readyPods("p", 2), pod{name: "p-x", terminated: "OOMKilled"}),
			wantStatus:    "True",
			wantReason:    "OOMKilled",
			wantInMessage: []string{"OOMKilled", "p-x"},
		},
		{
			name:          "unschedulable",
			pods:          append(readyPods("p", 2), pod{name: "p-x", phase: "Pending", unschedulable: true}),
			wantStatus:    "True",
			wantReason:    "Unschedulable",
			wantInMessage: []string{"Unschedulable", "p-x"},
		},
		{
			name:          "image pull back-off",
			pods:          append(readyPods("p", 2), pod{name: "p-x", phase: "Pending", waiting: "ImagePullBackOff"}),
			wantStatus:    "True",
			wantReason:    "ImagePullBackOff",
			wantInMessage: []string{"ImagePullBackOff", "p-x"},
		},
		{
			name:          "image pull error",
			pods:          append(readyPods("p", 2), pod{name: "p-x", phase: "Pending", waiting: "ErrImagePull"}),
			wantStatus:    "True",
			wantReason:    "ErrImagePull",
			wantInMessage: []string{"ErrImagePull", "p-x"},
		},
		{
			name:          "config error",
			pods:          append(readyPods("p", 2), pod{name: "p-x", phase: "Pending", waiting: "CreateContainerConfigError"}),
			wantStatus:    "True",
			wantReason:    "CreateContainerConfigError",
			wantInMessage: []string{"CreateContainerConfigError", "p-x"},
		},
		{
			name:       "creating a container is no trouble",
			pods:       append(readyPods("p", 2), pod{name: "p-x", phase: "Pending", waiting: "ContainerCreating"}),
			wantStatus: "False",
		},
		{
			name: "worst first: OOMKilled before CrashLoopBackOff before ImagePullBackOff before Unschedulable",
			pods: []pod{
				{name: "u", phase: "Pending", unschedulable: true},
				{name: "i", phase: "Pending", waiting: "ImagePullBackOff"},
				{name: "c", waiting: "CrashLoopBackOff"},
				{name: "o", terminated: "OOMKilled"},
			},
			wantStatus:    "True",
			wantReason:    "OOMKilled",
			wantInMessage: []string{"OOMKilled: o", "CrashLoopBackOff: c", "ImagePullBackOff: i", "Unschedulable: u"},
		},
		{
			name:          "crash loop after an OOM kill is both, OOMKilled first",
			pods:          []pod{{name: "p-x", waiting: "CrashLoopBackOff", lastTerminated: "OOMKilled"}},
			wantStatus:    "True",
			wantReason:    "OOMKilled",
			wantInMessage: []string{"OOMKilled: p-x", "CrashLoopBackOff: p-x"},
		},
		{
			name:          "CrashLoopBackOff before ImagePullBackOff",
			pods:          []pod{{name: "a", phase: "Pending", waiting: "ImagePullBackOff"}, {name: "b", waiting: "CrashLoopBackOff"}},
			wantStatus:    "True",
			wantReason:    "CrashLoopBackOff",
			wantInMessage: []string{"CrashLoopBackOff: b", "ImagePullBackOff: a"},
		},
		{
			name:          "names sorted",
			pods:          crashing("p-c", "p-a", "p-b"),
			wantStatus:    "True",
			wantReason:    "CrashLoopBackOff",
			wantInMessage: []string{"p-a, p-b, p-c"},
		},
		{
			name:          "five names in full",
			pods:          crashing("p-5", "p-4", "p-3", "p-2", "p-1"),
			wantStatus:    "True",
			wantReason:    "CrashLoopBackOff",
			wantInMessage: []string{"p-1, p-2, p-3, p-4, p-5"},
		},
		{
			name:          "at most five names and how many more",
			pods:          crashing("p-7", "p-6", "p-5", "p-4", "p-3", "p-2", "p-1"),
			wantStatus:    "True",
			wantReason:    "CrashLoopBackOff",
			wantInMessage: []string{"p-1, p-2, p-3, p-4, p-5 and 2 more"},
		},
		{
			name: "a check that refused: its last line, naming the field and the Secret",
			pods: append(readyPods("p", 2), pod{name: "p-x", phase: "Pending", waiting: "PodInitializing",
				check: &checkRun{exitCode: 1, message: "some noise\nspec.tls.secretName: Secret \"cache-tls\" has no tls.key, or does not exist\n"}}),
			wantStatus:    "True",
			wantReason:    "SecretNotUsable",
			wantInMessage: []string{`SecretNotUsable: spec.tls.secretName: Secret "cache-tls" has no tls.key, or does not exist (p-x)`},
		},
		{
			name: "a check in a crash loop: the last run's message",
			pods: append(readyPods("p", 2), pod{name: "p-x", phase: "Pending", waiting: "PodInitializing",
				check: &checkRun{exitCode: 1, restarted: true, message: "spec.auth.secretName: Secret \"users\" has no users, or does not exist"}}),
			wantStatus:    "True",
			wantReason:    "SecretNotUsable",
			wantInMessage: []string{`SecretNotUsable: spec.auth.secretName: Secret "users" has no users, or does not exist (p-x)`},
		},
		{
			name: "a check running again after a refusal: still the refusal",
			pods: append(readyPods("p", 2), pod{name: "p-x", phase: "Pending", waiting: "PodInitializing",
				check: &checkRun{exitCode: 1, rerunning: true, message: "spec.auth.secretName: Secret \"users\" has no users, or does not exist"}}),
			wantStatus:    "True",
			wantReason:    "SecretNotUsable",
			wantInMessage: []string{`SecretNotUsable: spec.auth.secretName: Secret "users" has no users, or does not exist (p-x)`},
		},
		{
			name: "a check killed before it said why: how it ended",
			pods: append(readyPods("p", 2), pod{name: "p-x", phase: "Pending", waiting: "PodInitializing",
				check: &checkRun{exitCode: 137, reason: "OOMKilled"}}),
			wantStatus:    "True",
			wantReason:    "SecretNotUsable",
			wantInMessage: []string{`SecretNotUsable: the check container ended with exit code 137 (OOMKilled) before it could check the Secrets (p-x)`},
		},
		{
			name: "the first Pod's message, every Pod's name, before a crash loop",
			pods: []pod{
				{name: "p-b", phase: "Pending", check: &checkRun{exitCode: 1, message: "spec.tls.secretName: b"}},
				{name: "p-a", phase: "Pending", check: &checkRun{exitCode: 1, message: "spec.tls.secretName: a"}},
				{name: "p-c", waiting: "CrashLoopBackOff"},
			},
			wantStatus:    "True",
			wantReason:    "SecretNotUsable",
			wantInMessage: []string{"SecretNotUsable: spec.tls.secretName: a (p-a, p-b)", "CrashLoopBackOff: p-c"},
		},
		{
			name:       "a check that passed is no trouble",
			pods:       append(readyPods("p", 2), pod{name: "p-x", ready: true, ip: "10.1.0.9", check: &checkRun{message: "the Secrets are ready"}}),
			wantStatus: "False",
			wantReason: "AsExpected",
		},
		{
			name:       "a terminating Pod does not count",
			pods:       append(readyPods("p", 3), pod{name: "p-x", waiting: "CrashLoopBackOff", deleting: true}),
			wantStatus: "False",
		},
		{
			name:       "a Pod of another namespace does not count",
			pods:       append(readyPods("p", 3), pod{name: "p-x", namespace: "other", waiting: "CrashLoopBackOff"}),
			wantStatus: "False",
		},
		{
			name: "a Pod of another Memcached does not count",
			pods: append(readyPods("p", 3), pod{name: "p-x", waiting: "CrashLoopBackOff",
				labels: map[string]string{"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": "cache-b"}}),
			wantStatus: "False",
		},
		{
			name:       "a Pod without the name label does not count",
			pods:       append(readyPods("p", 3), pod{name: "p-x", waiting: "CrashLoopBackOff", labels: map[string]string{"app.kubernetes.io/instance": "cache-a"}}),
			wantStatus: "False",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := fixture{spec: `{"size":3}`, deployment: convergedDeploy(3), pods: tt.pods}.run(t, fixedNow)
			c := a.condition(t, "Degraded")
			if c.Status != tt.wantStatus {
				t.Fatalf("Degraded = %s %s %q, want %s", c.Status, c.Reason, c.Message, tt.wantStatus)
			}
			if tt.wantReason != "" && c.Reason != tt.wantReason {
				t.Errorf("Degraded reason = %s, want %s (message %q)", c.Reason, tt.wantReason, c.Message)
			}
			rest := c.Message
			for _, s := range tt.wantInMessage {
				i := strings.Index(rest, s)
				if i < 0 {
					t.Errorf("Degraded message %q lacks %q (or has it out of order)", c.Message, s)
					break
				}
				rest = rest[i+len(s):]
			}
		})
	}
}

// TestAvailable checks Available: False ScaledToZero at size 0, True once at
// least max(1, size-1) Pods are ready, False below that.
func TestAvailable(t *testing.T) {
	tests := []struct {
		size, ready int
		want        metav1.ConditionStatus
		wantReason  string
	}{
		{size: 0, ready: 0, want: "False", wantReason: "ScaledToZero"},
		{size: 1, ready: 0, want: "False"},
		{size: 1, ready: 1, want: "True"},
		{size: 2, ready: 0, want: "False"},
		{size: 2, ready: 1, want: "True"},
		{size: 3, ready: 1, want: "False"},
		{size: 3, ready: 2, want: "True"},
		{size: 3, ready: 3, want: "True"},
		{size: 5, ready: 3, want: "False"},
		{size: 5, ready: 4, want: "True"},
		{size: 10, ready: 8, want: "False"},
		{size: 10, ready: 9, want: "True"},
		// More ready Pods than asked, as while scaling down.
		{size: 2, ready: 5, want: "True"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("size %d ready %d", tt.size, tt.ready), func(t *testing.T) {
			pods := readyPods("p", tt.ready)
			for i := tt.ready; i < tt.size; i++ {
				pods = append(pods, pod{name: fmt.Sprintf("p-%d", i), ip: fmt.Sprintf("10.1.0.%d", i+1)})
			}
			a := fixture{
				spec:       fmt.Sprintf(`{"size":%d}`, tt.size),
				deployment: convergedDeploy(int32(tt.size)),
				pods:       pods,
			}.run(t, fixedNow)
			c := a.condition(t, "Available")
			if c.Status != tt.want {
				t.Errorf("Available = %s (%s: %s), want %s", c.Status, c.Reason, c.Message, tt.want)
			}
			if tt.wantReason != "" && c.Reason != tt.wantReason {
				t.Errorf("Available reason = %s, want %s", c.Reason, tt.wantReason)
			}
		})
	}
}

// TestProgressing checks Progressing: True until the Deployment exists, has
// the spec, and its controller has rolled out size ready Pods; then False
// RolloutComplete. A rollout past its deadline is False and makes Degraded
// True.
func TestProgressing(t *testing.T) {
	deadline := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}
	tests := []struct {
		name         string
		spec         string
		deployment   *deploy
		pods         []pod
		want         metav1.ConditionStatus
		wantReason   string
		wantDegraded string // the Degraded reason, if it must be True
	}{
		{
			name: "no Deployment observed",
			spec: `{"size":3}`,
			want: "True",
		},
		{
			name:       "converged",
			spec:       `{"size":3}`,
			deployment: convergedDeploy(3),
			pods:       readyPods("p", 3),
			want:       "False",
			wantReason: "RolloutComplete",
		},
		{
			name:       "converged at size 0",
			spec:       `{"size":0}`,
			deployment: convergedDeploy(0),
			want:       "False",
			wantReason: "RolloutComplete",
		},
		{
			name:       "Deployment at the old size",
			spec:       `{"size":5}`,
			deployment: convergedDeploy(3),
			pods:       readyPods("p", 3),
			want:       "True",
		},
		{
			name:       "Deployment with the old image",
			spec:       `{"size":3,"image":"memcached:1.6.40"}`,
			deployment: convergedDeploy(3),
			pods:       readyPods("p", 3),
			want:       "True",
		},
		{
			name: "Deployment controller has not seen the new generation",
			spec: `{"size":3}`,
			deployment: func() *deploy {
				d := convergedDeploy(3)
				d.generation = 2
				return d
			}(),
			pods: readyPods("p", 3),
			want: "True",
		},
		{
			name:       "Pods not all ready",
			spec:       `{"size":3}`,
			deployment: convergedDeploy(3),
			pods:       append(readyPods("p", 2), pod{name: "p-2", ip: "10.1.0.3"}),
			want:       "True",
		},
		{
			name: "Pods not all updated",
			spec: `{"size":3}`,
			deployment: func() *deploy {
				d := convergedDeploy(3)
				d.status.UpdatedReplicas = 1
				return d
			}(),
			pods: readyPods("p", 3),
			want: "True",
		},
		{
			name:       "an old Pod still terminating does not hold the rollout",
			spec:       `{"size":2}`,
			deployment: convergedDeploy(2),
			pods:       append(readyPods("p", 2), pod{name: "p-old", ready: true, ip: "10.1.0.9", deleting: true}),
			want:       "False",
			wantReason: "RolloutComplete",
		},
		{
			name:       "an evicted Pod does not hold the rollout",
			spec:       `{"size":2}`,
			deployment: convergedDeploy(2),
			pods:       append(readyPods("p", 2), pod{name: "p-evicted", phase: "Failed"}),
			want:       "False",
			wantReason: "RolloutComplete",
		},
		{
			name: "progress deadline exceeded",
			spec: `{"size":3}`,
			deployment: func() *deploy {
				d := convergedDeploy(3)
				d.status.UpdatedReplicas = 1
				d.status.Conditions = []appsv1.DeploymentCondition{deadline}
				return d
			}(),
			pods:         readyPods("p", 3),
			want:         "False",
			wantReason:   "ProgressDeadlineExceeded",
			wantDegraded: "ProgressDeadlineExceeded",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := fixture{spec: tt.spec, deployment: tt.deployment, pods: tt.pods}.run(t, fixedNow)
			c := a.condition(t, "Progressing")
			if c.Status != tt.want {
				t.Errorf("Progressing = %s (%s: %s), want %s", c.Status, c.Reason, c.Message, tt.want)
			}
			if tt.wantReason != "" && c.Reason != tt.wantReason {
				t.Errorf("Progressing reason = %s, want %s", c.Reason, tt.wantReason)
			}
			if tt.wantDegraded != "" {
				if d := a.condition(t, "Degraded"); d.Status != "True" || d.Reason != tt.wantDegraded {
					t.Errorf("Degraded = %s %s, want True %s", d.Status, d.Reason, tt.wantDegraded)
				}
			}
		})
	}
}

// TestStatusPods checks what the status says of the Pods: nodes are the
// parent's live Pods' names, sorted; endpoints the ready ones' ip:11211,
// sorted, IPv6 in brackets; Pods that are terminating, finished, in another
// namespace or of another Memcached are not counted.
func TestStatusPods(t *testing.T) {
	tests := []struct {
		name          string
		pods          []pod
		wantNodes     []string
		wantEndpoints []string
		wantReady     int32
	}{
		{
			name:          "none",
			wantNodes:     []string{},
			wantEndpoints: []string{},
		},
		{
			name: "sorted whatever the order",
			pods: []pod{
				{name: "c", ready: true, ip: "10.0.0.3"},
				{name: "a", ready: true, ip: "10.0.0.20"},
				{name: "b", ready: true, ip: "10.0.0.1"},
			},
			wantNodes:     []string{"a", "b", "c"},
			wantEndpoints: []string{"10.0.0.1:11211", "10.0.0.20:11211", "10.0.0.3:11211"},
			wantReady:     3,
		},
		{
			name: "only ready Pods are endpoints",
			pods: []pod{
				{name: "ready", ready: true, ip: "10.0.0.1"},
				{name: "not-ready", ip: "10.0.0.2"},
				{name: "pending", phase: "Pending"},
				{name: "crashing", waiting: "CrashLoopBackOff", ip: "10.0.0.4"},
			},
			wantNodes:     []string{"crashing", "not-ready", "pending", "ready"},
			wantEndpoints: []string{"10.0.0.1:11211"},
			wantReady:     1,
		},
		{
			name:          "IPv6",
			pods:          []pod{{name: "a", ready: true, ip: "fd00:10:244::5"}, {name: "b", ready: true, ip: "10.0.0.1"}},
			wantNodes:     []string{"a", "b"},
			wantEndpoints: []string{"10.0.0.1:11211", "[fd00:10:244::5]:11211"},
			wantReady:     2,
		},
		{
			name: "terminating, foreign and unlabelled Pods are not counted",
			pods: []pod{
				{name: "a", ready: true, ip: "10.0.0.1"},
				{name: "gone", ready: true, ip: "10.0.0.2", deleting: true},
				{name: "elsewhere", namespace: "other", ready: true, ip: "10.0.0.3"},
				{name: "sibling", ready: true, ip: "10.0.0.4", labels: map[string]string{"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": "cache-b"}},
				{name: "redis", ready: true, ip: "10.0.0.5", labels: map[string]string{"app.kubernetes.io/name": "redis", "app.kubernetes.io/instance": "cache-a"}},
			},
			wantNodes:     []string{"a"},
			wantEndpoints: []string{"10.0.0.1:11211"},
			wantReady:     1,
		},
		{
			// The ReplicaSet controller does not count finished Pods
			// either: an evicted Pod stays around, Failed, until the
			// Pod garbage collector's threshold, and must not keep
			// Progressing True for ever.
			name: "finished Pods are not live",
			pods: []pod{
				{name: "a", ready: true, ip: "10.0.0.1"},
				{name: "b", ready: true, ip: "10.0.0.2"},
				{name: "evicted", phase: "Failed"},
				{name: "done", phase: "Succeeded"},
			},
			wantNodes:     []string{"a", "b"},
			wantEndpoints: []string{"10.0.0.1:11211", "10.0.0.2:11211"},
			wantReady:     2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := fixture{spec: `{"size":2}`, deployment: convergedDeploy(2), pods: tt.pods}.run(t, fixedNow)
			st := a.status
			if diff := cmp.Diff(st.Nodes, tt.wantNodes); diff != "" {
				t.Errorf("nodes (-got +want):\n%s", diff)
			}
			if diff := cmp.Diff(st.Endpoints, tt.wantEndpoints); diff != "" {
				t.Errorf("endpoints (-got +want):\n%s", diff)
			}
			if st.Replicas != int32(len(tt.wantNodes)) || st.ReadyReplicas != tt.wantReady {
				t.Errorf("replicas/readyReplicas = %d/%d, want %d/%d", st.Replicas, st.ReadyReplicas, len(tt.wantNodes), tt.wantReady)
			}
		})
	}
}

// TestStatusKeepsEmptyLists checks that nodes, endpoints and conditions are
// [] rather than null when empty, and that replicas and readyReplicas are
// written when 0: the status replaces the parent's whole, and its printer
// columns and clients read these fields.
func TestStatusKeepsEmptyLists(t *testing.T) {
	a := fixture{spec: `{"size":0}`}.run(t, fixedNow)
	st := testutil.GetObject(testutil.DecodeAny(t, a.statusRaw))
	for _, k := range []string{"nodes", "endpoints"} {
		if v, ok := st[k]; !ok || v == nil {
			t.Errorf("status.%s = %v, want []", k, v)
		}
	}
	for _, k := range []string{"replicas", "readyReplicas", "selector", "conditions"} {
		if _, ok := st[k]; !ok {
			t.Errorf("status has no %s", k)
		}
	}
}

// TestOldStatusShapes checks that a parent status of any shape, as an older
// hook may have written it, is answered rather than refused, and that the
// well-formed observed conditions are still carried forward.
func TestOldStatusShapes(t *testing.T) {
	available := `{"type":"Available","status":"True","reason":"Old","message":"old","lastTransitionTime":"2026-11-21T12:00:00Z"}`
	tests := []struct {
		name   string
		status string
		// wantCarried is whether Available keeps the observed
		// lastTransitionTime (earlier) rather than getting now.
		wantCarried bool
	}{
		{"null", `null`, false},
		{"a list", `[1,2]`, false},
		{"a string", `"ok"`, false},
		{"conditions as a string", `{"conditions":"fine"}`, false},
		{"fields of other types, conditions well-formed", `{"nodes":"a,b","replicas":"3","conditions":[` + available + `]}`, true},
		{"one malformed condition beside a well-formed one", `{"conditions":[` + available + `,{"type":"Degraded","status":"False","lastTransitionTime":"yesterday"}]}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := testutil.DecodeObject(t, fixture{spec: `{"size":3}`, deployment: convergedDeploy(3), pods: readyPods("p", 3)}.body(t))
			testutil.GetObject(req, "parent")["status"] = json.RawMessage(tt.status)
			raw, err := tryHook("sync", testutil.MustMarshal(t, req), fixedNow)
			if err != nil {
				t.Fatalf("sync failed: %v", err)
			}
			got := parseAnswer(t, raw).condition(t, "Available").LastTransitionTime
			want := metav1.NewTime(fixedNow)
			if tt.wantCarried {
				want = earlier
			}
			if !got.Equal(&want) {
				t.Errorf("Available lastTransitionTime = %v, want %v", got, want)
			}
		})
	}
}
