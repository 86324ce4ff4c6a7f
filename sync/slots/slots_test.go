package slots_test

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/slots"
)

// table writes a slot table compactly, one "pod@ip:State" or "-" per slot,
// so that a case reads like the table it expects.
func table(t *testing.T, spec string) []v1alpha1.Slot {
	t.Helper()
	var out []v1alpha1.Slot
	for i, f := range strings.Fields(spec) {
		e := v1alpha1.Slot{Slot: int32(i), State: v1alpha1.SlotEmpty}
		if f != "-" {
			pod, rest, ok := strings.Cut(f, "@")
			i := strings.LastIndex(rest, ":")
			if !ok || i < 0 {
				t.Fatalf("bad slot %q in %q", f, spec)
			}
			e.Pod, e.IP, e.State = pod, rest[:i], v1alpha1.SlotState(rest[i+1:])
		}
		out = append(out, e)
	}
	return out
}

// show is table's inverse, for failure messages.
func show(tb []v1alpha1.Slot) string {
	var parts []string
	for i, e := range tb {
		if int(e.Slot) != i {
			parts = append(parts, fmt.Sprintf("#%d?", e.Slot))
		}
		if e.State == v1alpha1.SlotEmpty && e.Pod == "" {
			parts = append(parts, "-")
			continue
		}
		parts = append(parts, e.Pod+"@"+e.IP+":"+string(e.State))
	}
	return strings.Join(parts, " ")
}

// ready, notReady and leaving make Pods.
func ready(name, ip string) slots.Pod    { return slots.Pod{Name: name, IP: ip, Ready: true} }
func notReady(name, ip string) slots.Pod { return slots.Pod{Name: name, IP: ip} }
func leaving(name, ip string) slots.Pod {
	return slots.Pod{Name: name, IP: ip, Ready: true, Leaving: true}
}

func TestAssign(t *testing.T) {
	tests := []struct {
		name string
		prev string
		size int32
		pods []slots.Pod
		want string
	}{{
		name: "first Pods take slots by name",
		size: 3,
		pods: []slots.Pod{ready("c", "10.0.0.3"), ready("a", "10.0.0.1"), ready("b", "10.0.0.2")},
		want: "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving",
	}, {
		name: "converged table stays",
		prev: "c@10.0.0.3:Serving a@10.0.0.1:Serving b@10.0.0.2:Serving",
		size: 3,
		pods: []slots.Pod{ready("a", "10.0.0.1"), ready("b", "10.0.0.2"), ready("c", "10.0.0.3")},
		want: "c@10.0.0.3:Serving a@10.0.0.1:Serving b@10.0.0.2:Serving",
	}, {
		name: "a Pod not yet Ready gets no slot",
		size: 3,
		pods: []slots.Pod{ready("a", "10.0.0.1"), notReady("b", "10.0.0.2"), ready("c", "10.0.0.3")},
		want: "a@10.0.0.1:Serving c@10.0.0.3:Serving -",
	}, {
		name: "a Ready Pod without an IP gets no slot",
		size: 2,
		pods: []slots.Pod{ready("a", "10.0.0.1"), ready("b", "")},
		want: "a@10.0.0.1:Serving -",
	}, {
		name: "a slot's Pod that is not Ready keeps its slot",
		prev: "a@10.0.0.1:Serving b@10.0.0.2:Serving",
		size: 2,
		pods: []slots.Pod{ready("a", "10.0.0.1"), notReady("b", "10.0.0.2")},
		want: "a@10.0.0.1:Serving b@10.0.0.2:NotReady",
	}, {
		name: "a slot's Pod that is not Ready keeps it even from a Ready newcomer",
		prev: "a@10.0.0.1:Serving b@10.0.0.2:Serving",
		size: 2,
		pods: []slots.Pod{ready("a", "10.0.0.1"), notReady("b", "10.0.0.2"), ready("c", "10.0.0.3")},
		want: "a@10.0.0.1:Serving b@10.0.0.2:NotReady",
	}, {
		name: "a terminating Pod is Leaving until a Ready Pod takes its slot",
		prev: "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving",
		size: 3,
		pods: []slots.Pod{ready("a", "10.0.0.1"), leaving("b", "10.0.0.2"), ready("c", "10.0.0.3"), notReady("d", "10.0.0.4")},
		want: "a@10.0.0.1:Serving b@10.0.0.2:Leaving c@10.0.0.3:Serving",
	}, {
		// Leaving slots are served until their Pod stops; one that
		// stopped answering first is not.
		name: "a terminating Pod that is not Ready is not served: NotReady",
		prev: "a@10.0.0.1:Serving b@10.0.0.2:NotReady",
		size: 2,
		pods: []slots.Pod{ready("a", "10.0.0.1"), {Name: "b", IP: "10.0.0.2", Leaving: true}},
		want: "a@10.0.0.1:Serving b@10.0.0.2:NotReady",
	}, {
		name: "a replacement takes the slot of the Pod it replaces",
		prev: "a@10.0.0.1:Serving b@10.0.0.2:Leaving c@10.0.0.3:Serving",
		size: 3,
		pods: []slots.Pod{ready("a", "10.0.0.1"), leaving("b", "10.0.0.2"), ready("c", "10.0.0.3"), ready("d", "10.0.0.4")},
		want: "a@10.0.0.1:Serving d@10.0.0.4:Serving c@10.0.0.3:Serving",
	}, {
		name: "a lost Pod's slot is Empty, then its replacement's",
		prev: "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving",
		size: 3,
		pods: []slots.Pod{ready("a", "10.0.0.1"), ready("c", "10.0.0.3")},
		want: "a@10.0.0.1:Serving - c@10.0.0.3:Serving",
	}, {
		name: "the replacement of a lost Pod takes its slot",
		prev: "a@10.0.0.1:Serving - c@10.0.0.3:Serving",
		size: 3,
		pods: []slots.Pod{ready("a", "10.0.0.1"), ready("c", "10.0.0.3"), ready("z", "10.0.0.9")},
		want: "a@10.0.0.1:Serving z@10.0.0.9:Serving c@10.0.0.3:Serving",
	}, {
		name: "a surge Pod waits while every slot is held",
		prev: "a@10.0.0.1:Serving b@10.0.0.2:Serving",
		size: 2,
		pods: []slots.Pod{ready("a", "10.0.0.1"), ready("b", "10.0.0.2"), ready("a2", "10.0.0.5")},
		want: "a@10.0.0.1:Serving b@10.0.0.2:Serving",
	}, {
		name: "scale up: new Pods take the new slots",
		prev: "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving",
		size: 5,
		pods: []slots.Pod{ready("a", "10.0.0.1"), ready("b", "10.0.0.2"), ready("c", "10.0.0.3"), ready("e", "10.0.0.5"), ready("d", "10.0.0.4")},
		want: "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving d@10.0.0.4:Serving e@10.0.0.5:Serving",
	}, {
		name: "scale up: a new Pod takes the lowest free slot",
		prev: "a@10.0.0.1:Serving - c@10.0.0.3:Serving",
		size: 4,
		pods: []slots.Pod{ready("a", "10.0.0.1"), ready("c", "10.0.0.3"), ready("d", "10.0.0.4")},
		want: "a@10.0.0.1:Serving d@10.0.0.4:Serving c@10.0.0.3:Serving -",
	}, {
		name: "scale down: the table keeps its slots until Pods leave",
		prev: "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving d@10.0.0.4:Serving",
		size: 3,
		pods: []slots.Pod{ready("a", "10.0.0.1"), ready("b", "10.0.0.2"), ready("c", "10.0.0.3"), ready("d", "10.0.0.4")},
		want: "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving d@10.0.0.4:Serving",
	}, {
		name: "scale down: the last slot's Pod leaves, the slot goes",
		prev: "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving d@10.0.0.4:Serving",
		size: 3,
		pods: []slots.Pod{ready("a", "10.0.0.1"), ready("b", "10.0.0.2"), ready("c", "10.0.0.3"), leaving("d", "10.0.0.4")},
		want: "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving",
	}, {
		name: "scale down: a middle Pod leaves, the last slot's Pod moves into its slot",
		prev: "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving d@10.0.0.4:Serving",
		size: 3,
		pods: []slots.Pod{ready("a", "10.0.0.1"), leaving("b", "10.0.0.2"), ready("c", "10.0.0.3"), ready("d", "10.0.0.4")},
		want: "a@10.0.0.1:Serving d@10.0.0.4:Serving c@10.0.0.3:Serving",
	}, {
		name: "scale down: a middle Pod is gone, the last slot's Pod moves into its slot",
		prev: "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving d@10.0.0.4:Serving",
		size: 3,
		pods: []slots.Pod{ready("a", "10.0.0.1"), ready("c", "10.0.0.3"), ready("d", "10.0.0.4")},
		want: "a@10.0.0.1:Serving d@10.0.0.4:Serving c@10.0.0.3:Serving",
	}, {
		name: "scale down by two: the highest slot moves first, the other waits",
		prev: "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving d@10.0.0.4:Serving",
		size: 2,
		pods: []slots.Pod{leaving("a", "10.0.0.1"), ready("b", "10.0.0.2"), ready("c", "10.0.0.3"), ready("d", "10.0.0.4")},
		want: "d@10.0.0.4:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving",
	}, {
		name: "scale down: a Pod above size that is not Ready cannot move and holds its place",
		prev: "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving",
		size: 2,
		pods: []slots.Pod{ready("a", "10.0.0.1"), leaving("b", "10.0.0.2"), notReady("c", "10.0.0.3")},
		want: "a@10.0.0.1:Serving b@10.0.0.2:Leaving c@10.0.0.3:NotReady",
	}, {
		name: "scale down: a slot below a waiting slot keeps its place, then empties",
		prev: "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving d@10.0.0.4:Serving",
		size: 2,
		pods: []slots.Pod{ready("a", "10.0.0.1"), ready("b", "10.0.0.2"), leaving("c", "10.0.0.3"), ready("d", "10.0.0.4")},
		want: "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Leaving d@10.0.0.4:Serving",
	}, {
		name: "scale down: a hole below a waiting slot keeps its place",
		prev: "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Leaving d@10.0.0.4:Serving",
		size: 2,
		pods: []slots.Pod{ready("a", "10.0.0.1"), ready("b", "10.0.0.2"), ready("d", "10.0.0.4")},
		want: "a@10.0.0.1:Serving b@10.0.0.2:Serving - d@10.0.0.4:Serving",
	}, {
		name: "scaled to zero: Pods keep their slots until they leave",
		prev: "a@10.0.0.1:Serving b@10.0.0.2:Serving",
		size: 0,
		pods: []slots.Pod{ready("a", "10.0.0.1"), leaving("b", "10.0.0.2")},
		want: "a@10.0.0.1:Serving",
	}, {
		name: "scaled to zero and gone: no slot",
		prev: "a@10.0.0.1:Serving b@10.0.0.2:Serving",
		size: 0,
		want: "",
	}, {
		name: "status wiped: rebuilt from the Pods, terminating ones left out",
		size: 3,
		pods: []slots.Pod{leaving("a", "10.0.0.1"), ready("c", "10.0.0.3"), ready("b", "10.0.0.2"), notReady("d", "10.0.0.4")},
		want: "b@10.0.0.2:Serving c@10.0.0.3:Serving -",
	}, {
		name: "a Pod's new IP is taken from the Pod",
		prev: "a@10.0.0.1:Serving",
		size: 1,
		pods: []slots.Pod{ready("a", "10.0.0.7")},
		want: "a@10.0.0.7:Serving",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := assign(table(t, tt.prev), tt.size, tt.pods)
			if diff := cmp.Diff(show(got), show(table(t, tt.want))); diff != "" {
				t.Errorf("Assign(%q, %d) = %q, want %q", tt.prev, tt.size, show(got), tt.want)
			}
		})
	}
}

// TestAssignEditedTable feeds tables no hook writes: each nonsense entry is
// dropped, the rest kept.
func TestAssignEditedTable(t *testing.T) {
	pods := []slots.Pod{ready("a", "10.0.0.1"), ready("b", "10.0.0.2"), ready("c", "10.0.0.3")}
	tests := []struct {
		name string
		prev []v1alpha1.Slot
		want string
	}{{
		name: "a slot far out of range",
		prev: []v1alpha1.Slot{{Slot: 1_000_000, Pod: "a"}, {Slot: 1, Pod: "b"}},
		want: "a@10.0.0.1:Serving b@10.0.0.2:Serving c@10.0.0.3:Serving",
	}, {
		name: "a negative slot",
		prev: []v1alpha1.Slot{{Slot: -1, Pod: "c"}, {Slot: 0, Pod: "b"}},
		want: "b@10.0.0.2:Serving a@10.0.0.1:Serving c@10.0.0.3:Serving",
	}, {
		name: "a slot listed twice",
		prev: []v1alpha1.Slot{{Slot: 2, Pod: "a"}, {Slot: 2, Pod: "b"}},
		want: "b@10.0.0.2:Serving c@10.0.0.3:Serving a@10.0.0.1:Serving",
	}, {
		name: "a Pod in two slots",
		prev: []v1alpha1.Slot{{Slot: 2, Pod: "a"}, {Slot: 0, Pod: "a"}},
		want: "b@10.0.0.2:Serving c@10.0.0.3:Serving a@10.0.0.1:Serving",
	}, {
		// Its slot is free since it went, after the slots that were
		// free before it.
		name: "a Pod that does not exist",
		prev: []v1alpha1.Slot{{Slot: 0, Pod: "x", IP: "10.9.9.9", State: v1alpha1.SlotServing}},
		want: "c@10.0.0.3:Serving a@10.0.0.1:Serving b@10.0.0.2:Serving",
	}, {
		name: "entries out of order",
		prev: []v1alpha1.Slot{{Slot: 2, Pod: "a"}, {Slot: 0, Pod: "c"}, {Slot: 1, Pod: "b"}},
		want: "c@10.0.0.3:Serving b@10.0.0.2:Serving a@10.0.0.1:Serving",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := assign(tt.prev, 3, pods)
			if show(got) != tt.want {
				t.Errorf("Assign = %q, want %q", show(got), tt.want)
			}
		})
	}
}

// TestRollingUpdate replays a rolling update as a Deployment with
// maxSurge 1 and maxUnavailable 0 runs it (a new Pod, Ready; an old Pod
// terminating; gone), through Assign, and checks what a client sees at
// every step: every slot keeps its place, a slot changes owner only to a
// Ready Pod, the served list never has fewer than size-1 Pods, and at the
// end every slot is held by a new Pod.
func TestRollingUpdate(t *testing.T) {
	const size = 4
	pods := map[string]slots.Pod{}
	for i := range size {
		pods[fmt.Sprintf("old-%d", i)] = ready(fmt.Sprintf("old-%d", i), fmt.Sprintf("10.0.0.%d", i+1))
	}
	list := func() []slots.Pod {
		var out []slots.Pod
		for _, p := range pods {
			out = append(out, p)
		}
		return out
	}
	tb := assign(nil, size, list())
	ready := map[string]bool{}
	check := func(step string) {
		t.Helper()
		next := assign(tb, size, list())
		if len(next) != size {
			t.Fatalf("%s: %d slots, want %d: %s", step, len(next), size, show(next))
		}
		serving := 0
		for i, e := range next {
			if e.Pod != tb[i].Pod && e.Pod != "" && !pods[e.Pod].Ready {
				t.Errorf("%s: slot %d went to %s, which is not Ready", step, i, e.Pod)
			}
			if e.State == v1alpha1.SlotServing {
				serving++
			}
		}
		if serving < size-1 {
			t.Errorf("%s: %d slots serving, want at least %d: %s", step, serving, size-1, show(next))
		}
		tb = next
	}
	for i := range size {
		n := fmt.Sprintf("new-%d", i)
		pods[n] = notReady(n, fmt.Sprintf("10.0.1.%d", i+1))
		check("new Pod " + n + " created")
		pods[n] = slots.Pod{Name: n, IP: pods[n].IP, Ready: true}
		ready[n] = true
		check("new Pod " + n + " Ready")
		o := fmt.Sprintf("old-%d", size-1-i) // the controller's choice, not the table's
		p := pods[o]
		p.Leaving = true
		pods[o] = p
		check("old Pod " + o + " terminating")
		delete(pods, o)
		check("old Pod " + o + " gone")
	}
	for i, e := range tb {
		if !strings.HasPrefix(e.Pod, "new-") || e.State != v1alpha1.SlotServing {
			t.Errorf("after the rollout slot %d is %s@%s:%s, want a new Pod serving", i, e.Pod, e.IP, e.State)
		}
	}
}

func TestAssignIsDeterministic(t *testing.T) {
	pods := []slots.Pod{ready("c", "10.0.0.3"), ready("a", "10.0.0.1"), leaving("d", "10.0.0.4"), ready("b", "10.0.0.2"), ready("e", "10.0.0.5")}
	prev := table(t, "- d@10.0.0.4:Serving e@10.0.0.5:Serving")
	want := show(assign(prev, 4, pods))
	for range 50 {
		// Reverse the order Pods arrive in: maps in the request have none.
		for i, j := 0, len(pods)-1; i < j; i, j = i+1, j-1 {
			pods[i], pods[j] = pods[j], pods[i]
		}
		if got := show(assign(prev, 4, pods)); got != want {
			t.Fatalf("Assign gave %q, then %q", want, got)
		}
	}
	// Slots 0 and 3 are free from the start, and go first, to a and b by
	// name (they turned Ready in the same second); d's slot 1 is freed
	// after them, and goes to c, which waited.
	if want != "a@10.0.0.1:Serving c@10.0.0.3:Serving e@10.0.0.5:Serving b@10.0.0.2:Serving" {
		t.Errorf("Assign = %q", want)
	}
}

func TestServed(t *testing.T) {
	// d is leaving and serves until its hand-off ends; f took e's slot
	// and is being filled: e is served for it meanwhile.
	tb := table(t, "a@10.244.1.7:Serving b@10.244.2.3:NotReady - c@fd00::5:Serving d@10.244.3.1:Leaving f@10.244.4.2:Serving")
	tb[5].State, tb[5].From, tb[5].FromIP = v1alpha1.SlotFilling, "e", "10.244.4.1"
	names := []string{"cache-0.cache-slots.shop.svc:11211", "cache-1.cache-slots.shop.svc:11211",
		"cache-2.cache-slots.shop.svc:11211", "cache-3.cache-slots.shop.svc:11211", "cache-4.cache-slots.shop.svc:11211",
		"cache-5.cache-slots.shop.svc:11211"}
	tests := []struct {
		name      string
		addresses []string
		want      []slots.Node
	}{{
		name: "the Pods' names in the headless Service",
		want: []slots.Node{
			{Host: "10-244-1-7.cache.shop.svc", IP: "10.244.1.7", Port: 11211},
			{Host: "fd00--5.cache.shop.svc", IP: "fd00::5", Port: 11211},
			{Host: "10-244-3-1.cache.shop.svc", IP: "10.244.3.1", Port: 11211},
			{Host: "10-244-4-1.cache.shop.svc", IP: "10.244.4.1", Port: 11211},
		},
	}, {
		name:      "the slots' stable names",
		addresses: names,
		want: []slots.Node{
			{Host: "cache-0.cache-slots.shop.svc", IP: "10.244.1.7", Port: 11211},
			{Host: "cache-3.cache-slots.shop.svc", IP: "fd00::5", Port: 11211},
			{Host: "cache-4.cache-slots.shop.svc", IP: "10.244.3.1", Port: 11211},
			{Host: "cache-5.cache-slots.shop.svc", IP: "10.244.4.1", Port: 11211},
		},
	}, {
		// A slot past the addresses (a status written before the table
		// grew) keeps the Pod's name rather than none.
		name:      "fewer addresses than slots",
		addresses: names[:1],
		want: []slots.Node{
			{Host: "cache-0.cache-slots.shop.svc", IP: "10.244.1.7", Port: 11211},
			{Host: "fd00--5.cache.shop.svc", IP: "fd00::5", Port: 11211},
			{Host: "10-244-3-1.cache.shop.svc", IP: "10.244.3.1", Port: 11211},
			{Host: "10-244-4-1.cache.shop.svc", IP: "10.244.4.1", Port: 11211},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := slots.Served(tb, tt.addresses, "cache", "shop", 11211)
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("Served (-got +want):\n%s", diff)
			}
			if got, want := got[1].Addr(), "[fd00::5]:11211"; got != want {
				t.Errorf("Addr = %q, want %q", got, want)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	served := "a@10.0.0.1:Serving b@10.0.0.2:Serving"
	tests := []struct {
		name string
		prev v1alpha1.SlotTable
		next string
		want int64
	}{{
		name: "nothing served changed",
		prev: v1alpha1.SlotTable{Version: 42, Slots: table(t, served)},
		next: served,
		want: 42,
	}, {
		name: "a Pod not serving changed, the served list did not",
		prev: v1alpha1.SlotTable{Version: 42, Slots: table(t, served+" -")},
		next: served + " c@10.0.0.3:NotReady",
		want: 42,
	}, {
		name: "a Pod was replaced at the same address",
		prev: v1alpha1.SlotTable{Version: 42, Slots: table(t, served)},
		next: "a@10.0.0.1:Serving z@10.0.0.2:Serving",
		want: 42,
	}, {
		name: "changed: rises to the clock",
		prev: v1alpha1.SlotTable{Version: 42, Slots: table(t, served)},
		next: "a@10.0.0.1:Serving b@10.0.0.2:NotReady",
		want: now.UnixMilli(),
	}, {
		name: "changed, order only",
		prev: v1alpha1.SlotTable{Version: 42, Slots: table(t, served)},
		next: "b@10.0.0.2:Serving a@10.0.0.1:Serving",
		want: now.UnixMilli(),
	}, {
		name: "changed twice in a millisecond: rises past the clock",
		prev: v1alpha1.SlotTable{Version: now.UnixMilli(), Slots: table(t, served)},
		next: "a@10.0.0.1:Serving",
		want: now.UnixMilli() + 1,
	}, {
		name: "changed, the last version ahead of this clock: still rises",
		prev: v1alpha1.SlotTable{Version: now.UnixMilli() + 3600, Slots: table(t, served)},
		next: "a@10.0.0.1:Serving",
		want: now.UnixMilli() + 3601,
	}, {
		name: "status wiped: starts at the clock",
		prev: v1alpha1.SlotTable{},
		next: served,
		want: now.UnixMilli(),
	}, {
		name: "nothing ever served",
		prev: v1alpha1.SlotTable{},
		next: "- -",
		want: 0,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := slots.Version(tt.prev, table(t, tt.next), now); got != tt.want {
				t.Errorf("Version = %d, want %d", got, tt.want)
			}
		})
	}
}

// testNow is the time the tests assign at: long after every event their
// Pods record (they record none, the zero time), so all have settled.
var testNow = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// assign is slots.Assign at testNow, for tests that wait on nothing.
func assign(prev []v1alpha1.Slot, size int32, pods []slots.Pod) []v1alpha1.Slot {
	return slots.Assign(v1alpha1.SlotTable{Slots: prev}, size, pods, testNow).Slots
}

// TestAssignReplaysInOrder is issue 25's e2e failure, table by table: a
// rolling update in which the new Pod that turned Ready first (tlwg6) took
// the slot freed first (0), and a sync that starts from the table before
// that (stale) must reach the same decision, though another new Pod
// (5mds2) sorts first by name and another slot (2) is free too.
func TestAssignReplaysInOrder(t *testing.T) {
	at := func(sec int) time.Time { return testNow.Add(time.Duration(sec-60) * time.Second) }
	old := func(name, ip string) slots.Pod {
		return slots.Pod{Name: name, IP: ip, Ready: true, ReadySince: at(0)}
	}
	gone := func(p slots.Pod, sec int) slots.Pod { p.Leaving, p.LeavingSince = true, at(sec); return p }
	ready := func(name, ip string, sec int) slots.Pod {
		return slots.Pod{Name: name, IP: ip, Ready: true, ReadySince: at(sec)}
	}
	start := v1alpha1.SlotTable{
		Slots:       table(t, "old-48jdx@10.0.0.1:Serving old-b@10.0.0.2:Serving old-wqgpz@10.0.0.3:Serving"),
		EventsUntil: &metav1.Time{Time: at(0)},
	}
	// First tlwg6 turns Ready and 48jdx is deleted: tlwg6 takes slot 0.
	first := []slots.Pod{gone(old("old-48jdx", "10.0.0.1"), 11), old("old-b", "10.0.0.2"), old("old-wqgpz", "10.0.0.3"), ready("new-tlwg6", "10.0.0.4", 10)}
	fresh := slots.Assign(start, 3, first, at(20))
	if got, want := show(fresh.Slots), "new-tlwg6@10.0.0.4:Serving old-b@10.0.0.2:Serving old-wqgpz@10.0.0.3:Serving"; got != want {
		t.Fatalf("first table %q, want %q", got, want)
	}
	// Then 5mds2 turns Ready and wqgpz is deleted. A sync from the fresh
	// table and one from the table before it agree.
	later := []slots.Pod{gone(old("old-48jdx", "10.0.0.1"), 11), old("old-b", "10.0.0.2"), gone(old("old-wqgpz", "10.0.0.3"), 13), ready("new-tlwg6", "10.0.0.4", 10), ready("new-5mds2", "10.0.0.5", 12)}
	want := "new-tlwg6@10.0.0.4:Serving old-b@10.0.0.2:Serving new-5mds2@10.0.0.5:Serving"
	for name, prev := range map[string]v1alpha1.SlotTable{"fresh": {Slots: fresh.Slots, Waiting: fresh.Waiting, EventsUntil: fresh.EventsUntil}, "stale": start} {
		a := slots.Assign(prev, 3, later, at(20))
		if got := show(a.Slots); got != want {
			t.Errorf("from the %s table: %q, want %q", name, got, want)
		}
		// From the stale table the replay sees 48jdx's slot taken again
		// (the fresh one took that in before: Handoffs carries it).
		if got := a.Took["old-48jdx"].Pod; name == "stale" && got != "new-tlwg6" {
			t.Errorf("from the %s table: 48jdx's slot went to %q, want tlwg6", name, got)
		}
	}
	// An event waits until Settle after its second: the table does not
	// change, and Assign says when to come back.
	early := slots.Assign(start, 3, first, at(12))
	if got, want := show(early.Slots), "old-48jdx@10.0.0.1:Leaving old-b@10.0.0.2:Serving old-wqgpz@10.0.0.3:Serving"; got != want {
		t.Errorf("before the events settled: %q, want %q", got, want)
	}
	if early.Pending != time.Second {
		t.Errorf("pending %s, want 1s (48jdx's deletion at second 11 settles at 13)", early.Pending)
	}
}

// TestAssignClockAhead gives a Pod that turned Ready by a clock a minute
// ahead of the hook's: it is listed at once, not a minute later.
func TestAssignClockAhead(t *testing.T) {
	p := slots.Pod{Name: "a", IP: "10.0.0.1", Ready: true, ReadySince: testNow.Add(time.Minute)}
	a := slots.Assign(v1alpha1.SlotTable{}, 1, []slots.Pod{p}, testNow)
	if got, want := show(a.Slots), "a@10.0.0.1:Serving"; got != want || a.Pending != 0 {
		t.Errorf("Assign = %q, pending %s; want %q, nothing pending", got, a.Pending, want)
	}
	// Turned Ready a second ahead (the clocks nearly agree): it waits.
	p.ReadySince = testNow.Add(time.Second)
	a = slots.Assign(v1alpha1.SlotTable{EventsUntil: &metav1.Time{Time: testNow.Add(-time.Minute)}}, 1, []slots.Pod{p}, testNow)
	if got, want := show(a.Slots), "-"; got != want || a.Pending != 3*time.Second {
		t.Errorf("Assign = %q, pending %s; want %q, 3s pending", got, a.Pending, want)
	}
}

// TestAssignStale runs syncs one after another, each from the table the
// last one wrote, and checks each against a sync given the table one or
// two writes older, as Metacontroller's stale copy of the status can be
// (see Assign's Stale statuses): both write the same table, so that a Pod
// published Serving in a slot keeps it whichever earlier status a sync is
// given.
func TestAssignStale(t *testing.T) {
	at := func(sec int) time.Time { return testNow.Add(time.Duration(sec) * time.Second) }
	pod := func(name, ip string) slots.Pod {
		return slots.Pod{Name: name, IP: ip, Ready: true, ReadySince: at(0)}
	}
	deleted := func(p slots.Pod, sec int) slots.Pod { p.Leaving, p.LeavingSince = true, at(sec); return p }
	readyAt := func(p slots.Pod, sec int) slots.Pod { p.ReadySince = at(sec); return p }
	type sync struct {
		// after is the sync's time since second 0, pods what it sees,
		// and want the table it writes.
		after time.Duration
		pods  []slots.Pod
		want  string
		// cannot, when set, is the table a sync from the table one
		// write older writes instead: what Assign cannot promise.
		cannot string
	}
	tests := []struct {
		name  string
		size  int32
		start string // the table at second 0, every event before it taken in
		syncs []sync
	}{{
		// A scale-down to 1: a's deletion frees slot 0 first, while d,
		// above size, is not yet deleted: d moves into it, the highest
		// mover first, and c into it when d's deletion settles. A
		// sync that saw d's deletion before it settled must keep d in
		// its table, or a sync from that table moves c in at once, and
		// one from the table before moves d in: c served in slot 0,
		// then in slot 1.
		name:  "scale-down: a Pod above size whose deletion has not settled still moves down first",
		size:  1,
		start: "a@10.0.0.1:Serving c@10.0.0.3:Serving d@10.0.0.4:Serving",
		syncs: []sync{{
			after: 11500 * time.Millisecond, // neither deletion settled
			pods:  []slots.Pod{deleted(pod("a", "10.0.0.1"), 10), pod("c", "10.0.0.3"), deleted(pod("d", "10.0.0.4"), 11)},
			want:  "a@10.0.0.1:Leaving c@10.0.0.3:Serving d@10.0.0.4:Leaving",
		}, {
			after: 12500 * time.Millisecond, // a's settled
			pods:  []slots.Pod{deleted(pod("a", "10.0.0.1"), 10), pod("c", "10.0.0.3"), deleted(pod("d", "10.0.0.4"), 11)},
			want:  "d@10.0.0.4:Leaving c@10.0.0.3:Serving",
		}, {
			after: 13500 * time.Millisecond, // d's settled
			pods:  []slots.Pod{deleted(pod("a", "10.0.0.1"), 10), pod("c", "10.0.0.3"), deleted(pod("d", "10.0.0.4"), 11)},
			want:  "c@10.0.0.3:Serving",
		}},
	}, {
		// A Pod lost (gone with no deletion: its node lost) is gone
		// when prev lists it, at no recorded time. Its slot is free
		// after the Empty ones: x turned Ready while g still held
		// slot 0 and took slot 1, and a sync from the table before,
		// that sees g gone, must not give x slot 0.
		name:  "a Pod lost after a Pod turned Ready: its slot is free after the Empty ones",
		size:  2,
		start: "g@10.0.0.7:Serving -",
		syncs: []sync{{
			after: 12500 * time.Millisecond, // x's Ready settled
			pods:  []slots.Pod{pod("g", "10.0.0.7"), readyAt(pod("x", "10.0.0.8"), 10)},
			want:  "g@10.0.0.7:Serving x@10.0.0.8:Serving",
		}, {
			after: 12700 * time.Millisecond, // g lost
			pods:  []slots.Pod{readyAt(pod("x", "10.0.0.8"), 10)},
			want:  "- x@10.0.0.8:Serving",
		}},
	}, {
		// The same loss seen before x's Ready settles: the table that
		// sync writes lists slot 0 Empty (g is not recorded), and a
		// sync from it gives x slot 0, the lowest Empty one; a sync
		// from the table before still sees slot 0 freed by g, after
		// slot 1. Assign cannot promise this one (a Pod lost while
		// other slots are free).
		name:  "a Pod lost before a Pod turned Ready, other slots free: cannot promise",
		size:  2,
		start: "g@10.0.0.7:Serving -",
		syncs: []sync{{
			after: 10500 * time.Millisecond, // g lost, x's Ready not settled
			pods:  []slots.Pod{readyAt(pod("x", "10.0.0.8"), 10)},
			want:  "- -",
		}, {
			after:  12500 * time.Millisecond, // x's Ready settled
			pods:   []slots.Pod{readyAt(pod("x", "10.0.0.8"), 10)},
			want:   "x@10.0.0.8:Serving -",
			cannot: "- x@10.0.0.8:Serving",
		}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			written := []v1alpha1.SlotTable{{Slots: table(t, tt.start), EventsUntil: &metav1.Time{Time: at(0)}}}
			for i, s := range tt.syncs {
				now := at(0).Add(s.after)
				fresh := slots.Assign(written[len(written)-1], tt.size, s.pods, now)
				if got := show(fresh.Slots); got != s.want {
					t.Errorf("sync %d at %s: %q, want %q", i+1, s.after, got, s.want)
				}
				for back := 2; back <= 3 && back <= len(written); back++ {
					want := show(fresh.Slots)
					if s.cannot != "" && back == 2 {
						want = s.cannot
					}
					stale := slots.Assign(written[len(written)-back], tt.size, s.pods, now)
					if got := show(stale.Slots); got != want {
						t.Errorf("sync %d at %s from the table %d writes old: %q, want %q", i+1, s.after, back-1, got, want)
					}
				}
				written = append(written, v1alpha1.SlotTable{Slots: fresh.Slots, Waiting: fresh.Waiting, EventsUntil: fresh.EventsUntil})
			}
		})
	}
}
