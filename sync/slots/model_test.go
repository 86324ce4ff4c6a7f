package slots_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/sync/slots"
)

// TestModel runs the slot table, its hand-offs and its versions through a
// model of the cluster: a Deployment that rolls with maxSurge 1 and
// maxUnavailable 0 and deletes old Pods in random order, kubelets that
// stamp events to the second, a Pod cache that sees each event up to a
// second late, and Metacontroller as its README describes it: each sync
// starts from its cache's copy of the Memcached, the live one or one a
// write or two old (never older than the last sync's), sees several
// events at once, and its status lands over whatever the live object
// holds. The agent serves every status that lands, in order.
//
// Every landed status is checked: a Pod published Serving in a slot keeps
// it while it is not terminating (a scale-down's move aside); a leaving
// Pod's Replaced hand-off never names another slot than the first one did,
// and names the Pod that holds it; the version the agent serves never goes
// down and its list is the status's. A Grown hand-off is made by a Pod
// that holds a slot below the first one added, and its plan names the Pod
// of that slot only once every added slot below size serves (one plan for
// several added slots). Once events stop, the table converges: every slot
// Serving, every hand-off ended (the agent reports some Grown copies
// Failed: those end too), a sync more changes nothing, and nothing is
// pending. In the scenarios that add slots, some Grown plan is made.
func TestModel(t *testing.T) {
	tests := []struct {
		name string
		size int32
		// script runs at the given second of the model's clock.
		script map[int]func(w *world)
		// grows: the script adds slots, and some Grown plan is made.
		grows bool
	}{{
		name:   "rolling replacement",
		size:   5,
		script: map[int]func(*world){5: rollout},
	}, {
		name:   "two rollouts back to back",
		size:   3,
		script: map[int]func(*world){5: rollout, 12: rollout},
	}, {
		name: "scale-up, scale-down",
		size: 3,
		script: map[int]func(*world){
			5:  scale(6),
			15: scale(2),
			25: scale(4),
		},
		grows: true,
	}, {
		name:   "a scale-up by one",
		size:   3,
		script: map[int]func(*world){5: scale(4)},
		grows:  true,
	}, {
		// The table may not have shrunk yet: then nothing was added.
		name: "a scale-up right after a scale-down",
		size: 5,
		script: map[int]func(*world){
			5: scale(3),
			7: scale(5),
		},
	}, {
		name: "a scale-up while a scale-down's hand-offs run",
		size: 5,
		script: map[int]func(*world){
			5:  scale(3),
			10: scale(5),
		},
		grows: true,
	}, {
		name: "a scale-down right after a scale-up",
		size: 3,
		script: map[int]func(*world){
			5: scale(6),
			6: scale(4),
		},
		grows: true,
	}, {
		name: "an autoscaler's steps, up and down",
		size: 2,
		script: map[int]func(*world){
			5:  scale(3),
			9:  scale(5),
			14: scale(4),
			16: scale(6),
			30: scale(3),
		},
		grows: true,
	}, {
		name: "a scale-up during a rollout",
		size: 4,
		script: map[int]func(*world){
			5: rollout,
			8: scale(6),
		},
		grows: true,
	}, {
		name: "a rollout during a scale-up",
		size: 3,
		script: map[int]func(*world){
			5: scale(5),
			7: rollout,
		},
		grows: true,
	}, {
		name: "a scale-down during a rollout",
		size: 6,
		script: map[int]func(*world){
			5: rollout,
			9: scale(3),
		},
	}, {
		name: "a lost Pod",
		size: 4,
		script: map[int]func(*world){
			5:  lose,
			15: lose,
		},
	}, {
		name: "a NotReady Pod comes back",
		size: 4,
		script: map[int]func(*world){
			5:  flap,
			6:  flap,
			12: rollout,
			13: flap,
		},
	}}
	for _, tt := range tests {
		for seed := range uint64(40) {
			t.Run(fmt.Sprintf("%s/seed-%d", tt.name, seed), func(t *testing.T) {
				w := newWorld(t, seed, tt.size)
				w.run(tt.script, 45*time.Second)
				w.converge()
				if tt.grows && w.grownPlans == 0 {
					t.Errorf("slots were added, and no Grown plan was made")
				}
			})
		}
	}
}

// The script's steps.
func rollout(w *world) { w.writeSpec(func(o *object) { o.template++ }) }
func scale(n int32) func(*world) {
	return func(w *world) { w.writeSpec(func(o *object) { o.size = n }) }
}

// lose makes a random Serving Pod vanish at once, as a lost node's do
// once the node controller gives up on them.
func lose(w *world) {
	if p := w.randomServing(); p != nil {
		w.set(p, func(s *podState) { s.gone = true })
	}
}

// flap makes a random Serving Pod NotReady for a few seconds.
func flap(w *world) {
	if p := w.randomServing(); p != nil {
		w.set(p, func(s *podState) { s.ready = false })
		p.readyDue = w.now.Add(time.Duration(2000+w.rng.IntN(3000)) * time.Millisecond)
	}
}

// object is the Memcached as the API server holds it at one revision.
type object struct {
	rev      int
	size     int32
	template int
	status   status
}

type status struct {
	table    v1alpha1.SlotTable
	handoffs []v1alpha1.Handoff
}

// podState is a Pod as one event left it; the cache shows it from
// visible on.
type podState struct {
	ready        bool
	readySince   time.Time
	leaving      bool
	leavingSince time.Time
	gone         bool
	visible      time.Time
}

type modelPod struct {
	name     string
	ip       string
	template int
	history  []podState
	// readyDue is when it turns Ready (zero: not due); goneDue when a
	// terminating Pod ends.
	readyDue, goneDue time.Time
}

// now is the Pod as it really is.
func (p *modelPod) now() podState { return p.history[len(p.history)-1] }

type world struct {
	t   *testing.T
	rng *rand.Rand
	now time.Time

	pods    []*modelPod
	nextIP  int
	objects []object // every revision, the last one live
	// copyRev is the revision of the copy the last sync started from:
	// the cache never goes back.
	copyRev int
	// specRev is the revision of the last spec change.
	specRev int
	// resyncAt is when the hook asked to be called again.
	resyncAt time.Time
	reports  map[string]v1alpha1.HandoffProgress
	// reportDue are the reports the agent will write, by key: Done, or
	// Failed for those in fails.
	reportDue map[string]time.Time
	fails     map[string]bool

	// What the checks remember.
	published    map[string]int32 // Pod: the slot it was first published Serving in
	publishedRev map[string]int   // and the revision that did
	firstSlot    map[string]int32 // leaving Pod: the slot its first Replaced entry named
	served       int64            // the agent's version
	servedIPs    []string
	landed       int
	grownPlans   int // Grown entries that landed with a plan (To)
}

func newWorld(t *testing.T, seed uint64, size int32) *world {
	w := &world{
		t:            t,
		rng:          rand.New(rand.NewPCG(seed, 25)),
		now:          time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(seed) * 137 * time.Millisecond),
		objects:      []object{{rev: 1, size: size}},
		reports:      map[string]v1alpha1.HandoffProgress{},
		reportDue:    map[string]time.Time{},
		fails:        map[string]bool{},
		published:    map[string]int32{},
		publishedRev: map[string]int{},
		firstSlot:    map[string]int32{},
		copyRev:      1,
	}
	return w
}

func (w *world) live() object { return w.objects[len(w.objects)-1] }

// write changes the live object: a new revision.
func (w *world) write(change func(*object)) {
	o := w.live()
	o.rev++
	change(&o)
	w.objects = append(w.objects, o)
}

// writeSpec changes the live object's spec.
func (w *world) writeSpec(change func(*object)) {
	w.write(change)
	w.specRev = w.live().rev
}

// set records an event on a Pod, stamped now, seen by the cache up to a
// second later (and never before an earlier event of the Pod).
func (w *world) set(p *modelPod, change func(*podState)) {
	s := p.now()
	change(&s)
	s.visible = w.now.Add(time.Duration(w.rng.IntN(1000)) * time.Millisecond)
	if last := p.history[len(p.history)-1].visible; s.visible.Before(last) {
		s.visible = last
	}
	p.history = append(p.history, s)
}

// stamp is a time as Kubernetes records it: to the second.
func (w *world) stamp() time.Time { return w.now.Truncate(time.Second) }

// randomServing picks a Pod that has been Serving for a while: published
// at least three writes ago, so that every copy a sync may start from has
// it in its slot (losing a Pod, or its readiness, within a write or two of
// the decision that placed it is what Assign cannot promise).
func (w *world) randomServing() *modelPod {
	var serving []*modelPod
	for _, p := range w.pods {
		s := p.now()
		rev, published := w.publishedRev[p.name]
		if s.ready && !s.leaving && !s.gone && published && rev <= w.live().rev-3 {
			serving = append(serving, p)
		}
	}
	if len(serving) == 0 {
		return nil
	}
	return serving[w.rng.IntN(len(serving))]
}

// run steps the model for d: the script, the kubelets, the Deployment,
// the agent's reports, and syncs.
func (w *world) run(script map[int]func(*world), d time.Duration) {
	start := w.now
	done := map[int]bool{}
	for w.now.Sub(start) < d {
		w.now = w.now.Add(time.Duration(50+w.rng.IntN(600)) * time.Millisecond)
		for sec, step := range script {
			if !done[sec] && w.now.Sub(start) >= time.Duration(sec)*time.Second {
				done[sec] = true
				step(w)
			}
		}
		w.kubelets()
		w.deployment()
		w.agentReports()
		// Metacontroller syncs on most changes; several events may
		// reach one sync.
		if w.rng.IntN(3) > 0 || (!w.resyncAt.IsZero() && !w.now.Before(w.resyncAt)) {
			w.sync()
		}
	}
}

// converge lets the model run without new events until the table is
// whole, then checks that another sync changes nothing.
func (w *world) converge() {
	w.run(nil, 60*time.Second)
	o := w.live()
	tb := o.status.table.Slots
	if len(tb) != int(o.size) {
		w.t.Fatalf("after the events stopped, the table has %d slots, want %d: %s", len(tb), o.size, show(tb))
	}
	var want []string
	for _, p := range w.pods {
		if s := p.now(); !s.gone && !s.leaving {
			want = append(want, p.name)
		}
	}
	var got []string
	for _, e := range tb {
		if e.State != v1alpha1.SlotServing {
			w.t.Errorf("after the events stopped, slot %d is %s: %s", e.Slot, e.State, show(tb))
		}
		got = append(got, e.Pod)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		w.t.Errorf("after the events stopped, the table holds %v, the Pods are %v", got, want)
	}
	if len(o.status.handoffs) != 0 {
		w.t.Errorf("after the events stopped, hand-offs remain: %s", handoffs(o.status.handoffs))
	}
	w.copyRev = o.rev
	st, pending := w.compute(o)
	if !reflect.DeepEqual(st, o.status) || pending != 0 {
		w.t.Errorf("a sync on the converged table changes it (pending %s):\n got %s\nwant %s", pending, show(st.table.Slots), show(tb))
	}
}

// kubelets turn Pods Ready when due, and end terminating Pods.
func (w *world) kubelets() {
	for _, p := range w.pods {
		s := p.now()
		switch {
		case s.gone:
		case s.leaving && !p.goneDue.After(w.now):
			w.set(p, func(s *podState) { s.gone = true })
		case !s.leaving && !s.ready && !p.readyDue.IsZero() && !p.readyDue.After(w.now):
			w.set(p, func(s *podState) { s.ready, s.readySince = true, w.stamp() })
			p.readyDue = time.Time{}
		}
	}
}

// deployment is the Deployment controller with maxSurge 1 and
// maxUnavailable 0: it makes a Pod of the current template while it has
// fewer than size (or size+1 during a rollout), deletes an old Pod once
// size+1 are Ready, and deletes Pods past size, old and not Ready first,
// otherwise at random.
func (w *world) deployment() {
	o := w.live()
	var old, cur []*modelPod
	ready := 0
	for _, p := range w.pods {
		s := p.now()
		if s.gone || s.leaving {
			continue
		}
		if s.ready {
			ready++
		}
		if p.template == o.template {
			cur = append(cur, p)
		} else {
			old = append(old, p)
		}
	}
	total := len(old) + len(cur)
	limit := int(o.size)
	if len(old) > 0 {
		limit++ // the surge
	}
	switch {
	case total < limit && (len(old) == 0 || !w.anyUnready(cur)):
		w.create(o.template)
	case total > limit || (len(old) > 0 && ready > int(o.size)):
		// Old Pods first, not Ready ones first, else at random.
		victims := old
		if len(victims) == 0 {
			victims = cur
		}
		w.rng.Shuffle(len(victims), func(i, j int) { victims[i], victims[j] = victims[j], victims[i] })
		if i := slices.IndexFunc(victims, func(p *modelPod) bool { return !p.now().ready }); i >= 0 {
			victims[0] = victims[i]
		}
		w.delete(victims[0])
	}
}

func (w *world) anyUnready(pods []*modelPod) bool {
	return slices.ContainsFunc(pods, func(p *modelPod) bool { return !p.now().ready })
}

// create makes a Pod whose name sorts at random against the others, that
// turns Ready within three seconds.
func (w *world) create(template int) {
	w.nextIP++
	const letters = "bcdfghjklmnpqrstvwxz2456789"
	var suffix strings.Builder
	for range 5 {
		suffix.WriteByte(letters[w.rng.IntN(len(letters))])
	}
	p := &modelPod{
		name:     fmt.Sprintf("cache-%d-%s", template, suffix.String()),
		ip:       fmt.Sprintf("10.0.%d.%d", w.nextIP/250, w.nextIP%250+1),
		template: template,
		readyDue: w.now.Add(time.Duration(100+w.rng.IntN(2900)) * time.Millisecond),
	}
	p.history = []podState{{visible: w.now.Add(time.Duration(w.rng.IntN(1000)) * time.Millisecond)}}
	w.pods = append(w.pods, p)
}

// delete starts a Pod's termination: it ends 10 to 15 s later (its
// preStop and hand-off).
func (w *world) delete(p *modelPod) {
	w.set(p, func(s *podState) { s.leaving, s.leavingSince = true, w.stamp() })
	p.goneDue = w.now.Add(time.Duration(10000+w.rng.IntN(5000)) * time.Millisecond)
}

// agentReports writes the reports that are due: the agent copies each
// hand-off within a few seconds of its entry landing.
func (w *world) agentReports() {
	for key, due := range w.reportDue {
		if !due.After(w.now) {
			w.reports[key] = v1alpha1.HandoffProgress{State: v1alpha1.HandoffDone}
			if w.fails[key] {
				w.reports[key] = v1alpha1.HandoffProgress{State: v1alpha1.HandoffFailed}
			}
			delete(w.reportDue, key)
		}
	}
}

// cachedPods are the Pods as Metacontroller's cache shows them now.
func (w *world) cachedPods() []slots.Pod {
	var out []slots.Pod
	for _, p := range w.pods {
		var s *podState
		for i := range p.history {
			if !p.history[i].visible.After(w.now) {
				s = &p.history[i]
			}
		}
		if s == nil || s.gone {
			continue
		}
		out = append(out, slots.Pod{Name: p.name, IP: p.ip, Ready: s.ready, ReadySince: s.readySince, Leaving: s.leaving, LeavingSince: s.leavingSince})
	}
	return out
}

// compute is the hook: the status for a copy of the object.
func (w *world) compute(copy object) (status, time.Duration) {
	pods := w.cachedPods()
	prev := copy.status
	a := slots.Assign(prev.table, copy.size, pods, w.now)
	st := status{table: v1alpha1.SlotTable{Version: slots.Version(prev.table, a.Slots, w.now), Slots: a.Slots, Waiting: a.Waiting, EventsUntil: a.EventsUntil}}
	st.handoffs = slots.Handoffs(slots.HandoffInput{Cells: []slots.Cell{{Prev: prev.table.Slots, Assigned: a, Pods: pods}},
		Size: copy.size, KeepWarm: true, Prev: prev.handoffs, Reports: w.reports})
	return st, a.Pending
}

// sync is one of Metacontroller's: from a copy the live object or up to
// two writes older (never older than the last sync's), and the status
// lands on the live object when it differs. A spec change does not race a
// sync: the table cannot promise that (see Assign), so the copy is never
// older than the last spec change.
func (w *world) sync() {
	live := w.live()
	from := max(w.copyRev, live.rev-w.rng.IntN(3), w.specRev)
	w.copyRev = from
	copy := w.objects[from-1]
	st, pending := w.compute(copy)
	w.resyncAt = time.Time{}
	if pending > 0 {
		w.resyncAt = w.now.Add(pending)
	}
	if testing.Verbose() && os.Getenv("MODEL_TRACE") != "" {
		var view []string
		for _, p := range w.cachedPods() {
			view = append(view, fmt.Sprintf("%s(r%v@%s l%v@%s)", p.Name, p.Ready, p.ReadySince.Format("05"), p.Leaving, p.LeavingSince.Format("05")))
		}
		w.t.Logf("%s sync from rev %d (live %d) size %d: prev %s\n  pods %v\n  -> %s %s", w.now.Format("04:05.000"), from, live.rev, copy.size, show(copy.status.table.Slots), view, show(st.table.Slots), handoffs(st.handoffs))
	}
	if reflect.DeepEqual(st, live.status) {
		return
	}
	w.write(func(o *object) { o.status = st })
	w.check(copy, st)
}

// checkGrown checks a Grown entry that landed: its Pod holds a slot
// below the first one added, and a plan (To) names that slot's Pod only
// once every added slot below size serves.
func (w *world) checkGrown(copy object, st status, h v1alpha1.Handoff) {
	tb := st.table.Slots
	added, ok := h.FirstAdded()
	if !ok {
		w.t.Errorf("landing %d: %s's Grown hand-off names no slot", w.landed, h.Pod)
		return
	}
	first := int(added)
	own := slices.IndexFunc(tb, func(e v1alpha1.Slot) bool { return e.Pod == h.Pod })
	if own < 0 || own >= first {
		w.t.Errorf("landing %d: %s hands on slots from %d, and holds slot %d: %s", w.landed, h.Pod, first, own, show(tb))
	}
	if !h.Planned() {
		return
	}
	w.grownPlans++
	for s := first; s < int(copy.size); s++ {
		if s >= len(tb) || tb[s].State != v1alpha1.SlotServing {
			w.t.Errorf("landing %d: %s's Grown plan was made while added slot %d does not serve: %s", w.landed, h.Pod, s, show(tb))
		}
	}
	if first >= len(tb) || tb[first].Pod != h.To || tb[first].IP != h.ToIP {
		w.t.Errorf("landing %d: %s's Grown plan names %s@%s, which does not hold slot %d: %s", w.landed, h.Pod, h.To, h.ToIP, first, show(tb))
	}
}

// check checks a status that landed.
func (w *world) check(copy object, st status) {
	w.landed++
	tb := st.table.Slots
	at := map[string]v1alpha1.Slot{}
	for _, e := range tb {
		if e.Pod != "" {
			at[e.Pod] = e
		}
	}
	moved := map[string]int32{}
	for _, h := range st.handoffs {
		if into, ok := h.MovedInto(); ok {
			moved[h.Pod] = into
		}
	}
	for _, p := range w.cachedPods() {
		s, ok := w.published[p.Name]
		if !ok || p.Leaving {
			continue
		}
		e, listed := at[p.Name]
		switch {
		case !listed:
			w.t.Errorf("landing %d: %s, published Serving in slot %d and not terminating, is not in the table: %s", w.landed, p.Name, s, show(tb))
		case e.Slot == s:
		case s >= copy.size && moved[p.Name] == e.Slot:
			// A scale-down's move, which a Moved entry records.
			w.published[p.Name] = e.Slot
		default:
			w.t.Errorf("landing %d: %s, published Serving in slot %d, is in slot %d: %s", w.landed, p.Name, s, e.Slot, show(tb))
		}
	}
	for _, e := range tb {
		if _, ok := w.published[e.Pod]; !ok && e.State == v1alpha1.SlotServing {
			w.published[e.Pod] = e.Slot
			w.publishedRev[e.Pod] = w.live().rev
		}
	}
	for _, h := range st.handoffs {
		// The agent copies what the entry asks for: nothing while a
		// slot waits, or while a Grown plan is not made.
		if key := contract.ReportKey(h); h.Reason != v1alpha1.HandoffWaiting && !(h.Reason == v1alpha1.HandoffGrown && !h.Planned()) {
			if _, due := w.reportDue[key]; !due && w.reports[key].State == "" {
				w.reportDue[key] = w.now.Add(time.Duration(500+w.rng.IntN(3000)) * time.Millisecond)
				if h.Reason == v1alpha1.HandoffGrown {
					w.fails[key] = w.rng.IntN(6) == 0
				}
			}
		}
		if h.Reason == v1alpha1.HandoffGrown {
			w.checkGrown(copy, st, h)
			continue
		}
		taken, ok := h.TakenSlot()
		if !ok {
			continue
		}
		if first, ok := w.firstSlot[h.Pod]; ok && first != taken {
			w.t.Errorf("landing %d: %s's hand-off names slot %d, an earlier one named slot %d: %s", w.landed, h.Pod, taken, first, show(tb))
		}
		w.firstSlot[h.Pod] = taken
		if successor, _, _ := h.Successor(); int(taken) >= len(tb) || tb[taken].Pod != successor {
			w.t.Errorf("landing %d: %s's hand-off names %s in slot %d, which the table does not: %s", w.landed, h.Pod, successor, taken, show(tb))
		}
	}

	// The agent serves it.
	var ips []string
	for _, n := range slots.Served(tb, nil, "cache", "shop", 11211) {
		ips = append(ips, n.IP)
	}
	if len(ips) == 0 {
		return // refused: the agent keeps its list
	}
	v := slots.ServedVersion(w.served, slices.Equal(ips, w.servedIPs), st.table.Version)
	switch {
	case v < w.served:
		w.t.Errorf("landing %d: the agent's version went down from %d to %d", w.landed, w.served, v)
	case v == w.served && !slices.Equal(ips, w.servedIPs):
		w.t.Errorf("landing %d: the list changed under version %d", w.landed, v)
	}
	w.served, w.servedIPs = v, ips
}
