package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/test/dataplane"
	"github.com/example/memcached-operator/test/playground"
	"github.com/example/memcached-operator/test/testutil"
)

// slotStatus is the part of a Memcached's status the data plane reads.
type slotStatus struct {
	Metadata struct {
		Generation int64 `json:"generation"`
	} `json:"metadata"`
	Status struct {
		ObservedGeneration int64              `json:"observedGeneration"`
		SlotTable          v1alpha1.SlotTable `json:"slotTable"`
		Handoffs           []v1alpha1.Handoff `json:"handoffs"`
		Endpoints          []string           `json:"endpoints"`
	} `json:"status"`
}

// agentKubeconfig writes a kubeconfig for the Memcached's agent: the
// cluster's server and CA, and a token of the ServiceAccount the hook made
// for it, so that the agent runs with exactly the RBAC the hook generated.
func (s *scenario) agentKubeconfig(name string) string {
	s.t.Helper()
	token := strings.TrimSpace(s.kubectl("create", "token", name+"-agent", "--duration=1h"))
	cfg, err := playground.TokenKubeconfig(s.c.Kubeconfig(), token, s.ns)
	if err != nil {
		s.t.Fatal(err)
	}
	path := filepath.Join(s.t.TempDir(), "agent.kubeconfig")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		s.t.Fatal(err)
	}
	return path
}

// servedList asks the agent for its list: the version and the nodes'
// "ip:port" in order.
func servedList(addr string) (int64, []string, error) {
	answer, err := dataplane.ConfigGetCluster(addr)
	if err != nil {
		return 0, nil, err
	}
	lines := strings.Split(answer, "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "CONFIG cluster 0 ") {
		return 0, nil, fmt.Errorf("answer %q", answer)
	}
	version, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		return 0, nil, fmt.Errorf("answer %q: %v", answer, err)
	}
	var nodes []string
	for _, n := range strings.Fields(lines[2]) {
		parts := strings.Split(n, "|")
		if len(parts) != 3 {
			return 0, nil, fmt.Errorf("node %q in %q", n, answer)
		}
		nodes = append(nodes, parts[1]+":"+parts[2])
	}
	return version, nodes, nil
}

// testAgentOnLoopback runs the agent of a Memcached with discovery on
// loopback, against the suite's API server, as the ServiceAccount the hook
// made for it: through a scale-up, a scale-down and a deleted Pod, once the
// Memcached converged it serves exactly its Ready Pods in slot order, with
// a higher version each time; the time from the status change to the
// endpoint serving it is printed. With its token the agent reads its own
// Memcached and is refused another one.
func testAgentOnLoopback(s *scenario) {
	const name = "found"
	s.create(name, "{size: 3, discovery: {enabled: true}}")
	s.waitConverged(name, 3, "")
	kubeconfig := s.agentKubeconfig(name)
	agent := dataplane.StartAgent(s.t, "--kubeconfig="+kubeconfig, "--memcached="+name, "--namespace="+s.ns, "--listen=127.0.0.1:0")

	// version is the last version the agent served, statusVersion the
	// status's version then: the agent may serve a status's list under a
	// higher version than the status's own.
	version, statusVersion := int64(0), int64(0)
	check := func(step string, size int32) {
		s.t.Helper()
		obs, _ := s.waitConverged(name, size, "")
		var st slotStatus
		s.getJSON(&st, "memcached", name)
		want := []string{}
		for _, e := range st.Status.SlotTable.Slots {
			if e.State == v1alpha1.SlotServing {
				want = append(want, fmt.Sprintf("%s:%d", e.IP, memcachedPort))
			}
		}
		ready := []string{}
		for _, p := range obs.pods {
			if podReady(&p) && p.DeletionTimestamp == nil {
				ready = append(ready, fmt.Sprintf("%s:%d", p.Status.PodIP, memcachedPort))
			}
		}
		if a, b := slices.Sorted(slices.Values(want)), slices.Sorted(slices.Values(ready)); !slices.Equal(a, b) {
			s.t.Errorf("%s: the slot table serves %v, kubectl get pods has %v Ready", step, want, ready)
		}
		// The agent serves the list of the status that landed last, under
		// the status's version or, when a status computed from an older
		// copy landed last with a lower one, a higher one of its own.
		var served []string
		var got int64
		s.poll(step+": the agent serving the status's list", convergeTimeout, func() error {
			v, nodes, err := servedList(agent.Addr)
			if err != nil {
				return err
			}
			got, served = v, nodes
			if !slices.Equal(nodes, want) || v < st.Status.SlotTable.Version {
				return fmt.Errorf("the agent serves %v under version %d, the status says %v under %d", nodes, v, want, st.Status.SlotTable.Version)
			}
			return nil
		})
		if got <= version {
			s.t.Errorf("%s: version %d did not rise from %d", step, got, version)
		}
		version, statusVersion = got, st.Status.SlotTable.Version
		s.t.Logf("%s: version %d, %v", step, got, served)
	}
	// timeToServe measures, from the moment the watch shows the status
	// with a new version, how long until the agent serves it.
	timeToServe := func(step string, change func()) {
		s.t.Helper()
		v, seen := s.slotTableChange(name, step, statusVersion, change)
		testutil.EventuallyEvery(s.t, time.Until(seen.Add(convergeTimeout)), 5*time.Millisecond, func() error {
			if got, _, err := servedList(agent.Addr); err != nil || got < v {
				return fmt.Errorf("%s: the agent never served version %d (%d, %v)", step, v, got, err)
			}
			return nil
		})
		record(s.t, "status-to-agent/"+step, time.Since(seen), "")
	}
	check("first list", 3)

	timeToServe("scale-3-to-5", func() { s.kubectl("scale", "memcached/"+name, "--replicas=5") })
	check("scaled to 5", 5)
	timeToServe("scale-5-to-2", func() { s.kubectl("scale", "memcached/"+name, "--replicas=2") })
	check("scaled to 2", 2)
	var pods corev1.PodList
	s.getJSON(&pods, "pods", "-l", "app.kubernetes.io/name=memcached,app.kubernetes.io/instance="+name)
	timeToServe("deleted-pod", func() { s.kubectl("delete", "pod", pods.Items[0].Name, "--wait=false") })
	check("a deleted Pod replaced", 2)

	// The token reads its own Memcached and nothing else.
	s.create("other", "{size: 1}")
	run := func(args ...string) (string, error) {
		stdout, stderr, err := s.c.Kubectl(append([]string{"--kubeconfig=" + kubeconfig, "-n", s.ns}, args...)...)
		return stdout + stderr, err
	}
	if out, err := run("get", "memcached", name, "-o", "name"); err != nil {
		s.t.Errorf("the agent's token cannot read its own Memcached: %v: %s", err, out)
	}
	for _, args := range [][]string{
		{"get", "memcached", "other"},
		{"get", "memcached"},
		{"get", "pods"},
		{"get", "secrets"},
		{"patch", "memcached", name, "--type=merge", "-p", `{"spec":{"size":3}}`},
	} {
		if out, err := run(args...); err == nil || !strings.Contains(out, "forbidden") {
			s.t.Errorf("kubectl %s with the agent's token: %v: %s, want forbidden", strings.Join(args, " "), err, out)
		}
	}
	other := dataplane.StartAgent(s.t, "--kubeconfig="+kubeconfig, "--memcached=other", "--namespace="+s.ns, "--listen=127.0.0.1:0")
	// Once it logs the refusal, its read of the Memcached has been
	// answered: only then does its having no list say anything.
	s.poll("the agent for another Memcached saying it is forbidden", convergeTimeout, func() error {
		if !strings.Contains(strings.ToLower(other.Log()), "forbidden") {
			return fmt.Errorf("its log:\n%s", other.Log())
		}
		return nil
	})
	if answer, _ := dataplane.ConfigGetCluster(other.Addr); !strings.HasPrefix(answer, "SERVER_ERROR") {
		s.t.Errorf("an agent with this token for another Memcached serves %q, want no list", answer)
	}
}

// slotTableChange runs change and waits until the Memcached's status shows
// a slot table version above version, and returns that version and the
// time the watch showed it. The watch shows the object as it is before
// change runs, so that the time is when the new status landed, not when a
// watch started after it did.
func (s *scenario) slotTableChange(name, step string, version int64, change func()) (int64, time.Time) {
	s.t.Helper()
	f := s.follow("memcached", name)
	defer f.close()
	f.until(step+": kubectl get --watch showing memcached "+name, convergeTimeout, func([]byte) error { return nil })
	change()
	var v int64
	_, seen := f.until(fmt.Sprintf("%s: a slot table version above %d", step, version), convergeTimeout, func(b []byte) error {
		var st slotStatus
		if err := json.Unmarshal(b, &st); err != nil {
			return err
		}
		if v = st.Status.SlotTable.Version; v <= version {
			return fmt.Errorf("status.slotTable.version is %d", v)
		}
		return nil
	})
	return v, seen
}

// testKeepWarmRollout changes the image of a Memcached with keepWarm and
// follows its status with a watch while it rolls (kwok runs no container,
// so this checks the plan, not the copy): each old Pod shows in
// status.handoffs leaving, Replaced by the new Pod that took its slot;
// every slot changes owner only to a Ready Pod, Filling from the Pod that
// held it (clients are still served that one until the copy, which no
// agent reports here: until the bound), and keeps its place. The old Pods are held Terminating by a finalizer of the test's, as
// their preStop would hold them, and let go once their hand-off was seen.
func testKeepWarmRollout(s *scenario) {
	const name = "warm"
	const size = 3
	// handoffSeconds 10 (the least): a new Pod is served from the old one's deletion
	// plus 10 + 10 - 2 - 2 s whatever the copy (no agent copies here).
	const bound = 16 * time.Second
	s.create(name, fmt.Sprintf("{size: %d, rollout: {keepWarm: true, handoffSeconds: 10}}", size))
	obs, _ := s.waitConverged(name, size, "")
	var st slotStatus
	s.getJSON(&st, "memcached", name)
	slotOf := map[string]int32{}
	for _, e := range st.Status.SlotTable.Slots {
		slotOf[e.Pod] = e.Slot
	}
	const hold = `{"metadata":{"finalizers":["e2e.example.com/hold"]}}`
	released := map[string]bool{}
	var lastRelease time.Time
	release := func(pod string) {
		if !released[pod] {
			released[pod], lastRelease = true, time.Now()
			s.c.Kubectl("patch", "pod", pod, "-n", s.ns, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
		}
	}
	for _, p := range obs.pods {
		s.kubectl("patch", "pod", p.Name, "--type=merge", "-p", hold)
		s.t.Cleanup(func() { release(p.Name) })
	}

	events, stop := s.watch("memcached", name)
	defer stop()
	began := s.patchSpec(name, fmt.Sprintf(`{"image":%q}`, rolloutImage))
	prev := st.Status.SlotTable.Slots
	replaced := map[string]v1alpha1.Handoff{}
	timeout := time.After(convergeTimeout)
	for len(replaced) < size {
		var ev watchEvent
		select {
		case e, ok := <-events:
			if !ok {
				s.t.Fatalf("the watch ended: %s", stop())
			}
			ev = e
		case <-timeout:
			s.t.Fatalf("hand-offs seen within %s: %v, want one per old Pod %v", convergeTimeout, replaced, obs.pods)
		}
		var now slotStatus
		if err := json.Unmarshal(ev.Object, &now); err != nil {
			s.t.Fatal(err)
		}
		// Make before break: a slot's new Pod is Filling, clients still
		// served the Pod it took the slot from, until the agent reports the
		// copy (no agent copies here: until the bound).
		// (The old Pods are held until their hand-off appears: each is
		// there to be filled from.)
		for i, e := range now.Status.SlotTable.Slots {
			if i < len(prev) && e.Pod != prev[i].Pod && e.Pod != "" && (e.State != v1alpha1.SlotFilling || e.From != prev[i].Pod) {
				s.t.Errorf("slot %d went from %s to %s, which is %s from %q, not Filling from it", i, prev[i].Pod, e.Pod, e.State, e.From)
			}
		}
		for _, h := range now.Status.Handoffs {
			if _, old := slotOf[h.Pod]; !old || h.Reason != v1alpha1.HandoffReplaced {
				continue
			}
			if _, seen := replaced[h.Pod]; seen {
				continue
			}
			replaced[h.Pod] = h
			successor, successorIP, _ := h.Successor()
			if taken, ok := h.TakenSlot(); !ok || taken != slotOf[h.Pod] {
				s.t.Errorf("%s left slot %d, its hand-off names slot %v", h.Pod, slotOf[h.Pod], h.Slot)
			} else if owner := now.Status.SlotTable.Slots[taken]; owner.Pod != successor || (owner.State != v1alpha1.SlotServing && owner.State != v1alpha1.SlotFilling) {
				s.t.Errorf("%s's hand-off names %s, slot %d is held by %s (%s)", h.Pod, successor, taken, owner.Pod, owner.State)
			}
			s.t.Logf("%s leaves slot %d: %s takes it (%s)", h.Pod, slotOf[h.Pod], successor, successorIP)
			release(h.Pod)
		}
		prev = now.Status.SlotTable.Slots
	}
	stop()
	obs, at := s.waitConverged(name, size, rolloutImage)
	record(s.t, "keepwarm-rollout-to-status-right/size-3", at.Sub(began), s.callsSince(began))
	s.getJSON(&st, "memcached", name)
	if len(st.Status.Handoffs) != 0 {
		s.t.Errorf("converged, status.handoffs still lists %v", st.Status.Handoffs)
	}
	for pod, h := range replaced {
		if got := st.Status.SlotTable.Slots[slotOf[pod]].Pod; got != h.To {
			s.t.Errorf("slot %d, %s's, is held by %s after the rollout, want %s, which took it", slotOf[pod], pod, got, h.To)
		}
	}
	// Each sync that marked a slot Filling asked Metacontroller to sync
	// again at its bound; a released Pod ends the Filling sooner, and
	// those syncs, which change nothing, come after: wait them out, so
	// that the steady state sees none.
	time.Sleep(time.Until(lastRelease.Add(bound + 2*time.Second)))
}
