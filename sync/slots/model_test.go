package slots_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
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
//
// Every scenario runs with one cell (a Memcached without zones) and with
// three (spec.zones: a Deployment, Pods and table per zone, one size, the
// hand-offs planned across them). With three, each landed Refill is
// checked too: its Pod serves the slot in its zone, its source serves the
// same slot in another zone of as many slots, no Pod is in two entries,
// and it flushes first exactly when the filled Pod comes back to a slot
// it was published Serving in (a partition, a NotReady spell); a slot
// Filling with no Pod to serve it is a landed Refill's, and was not
// served from its Pod in the status the sync started from (checkFill).
// The zones' own scenarios (a Pod lost without grace in one zone, a zone
// added, a zone cut off and back) must plan some Refill, and land its
// slot Filling, and the partition a Flush.
func TestModel(t *testing.T) {
	tests := []struct {
		name string
		size int32
		// script runs at the given second of the model's clock.
		script map[int]func(w *world)
		// grows: the script adds slots, and some Grown plan is made.
		grows bool
		// zones: the scenario is the zones' own and runs with three
		// cells only; refills: some Refill is planned, flushes: some
		// with Flush.
		zones, refills, flushes bool
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
	}, {
		name:    "a Pod lost without grace in one zone",
		size:    4,
		script:  map[int]func(*world){5: lose, 15: lose},
		zones:   true,
		refills: true,
	}, {
		name:    "a zone added",
		size:    3,
		script:  map[int]func(*world){5: addZone("d")},
		zones:   true,
		refills: true,
	}, {
		name:    "a zone cut off and back",
		size:    3,
		script:  map[int]func(*world){10: partition, 25: partition},
		zones:   true,
		refills: true,
		flushes: true,
	}, {
		name:    "a zone cut off during a rollout",
		size:    3,
		script:  map[int]func(*world){5: rollout, 7: partition},
		zones:   true,
		refills: true,
	}}
	for _, tt := range tests {
		for _, cells := range []int{1, 3} {
			if tt.zones && cells == 1 {
				continue
			}
			// Three cells cost three times the work: fewer seeds.
			// MODEL_SEEDS=N runs N of each, to hunt for a failure.
			seeds := uint64(40)
			if cells > 1 {
				seeds = 15
			}
			if n, err := strconv.ParseUint(os.Getenv("MODEL_SEEDS"), 10, 32); err == nil && n > 0 {
				seeds = n
			}
			for seed := range seeds {
				t.Run(fmt.Sprintf("%s/cells-%d/seed-%d", tt.name, cells, seed), func(t *testing.T) {
					w := newWorld(t, seed, tt.size, cells)
					w.run(tt.script, 45*time.Second)
					w.converge()
					if tt.grows && w.grownPlans == 0 {
						t.Errorf("slots were added, and no Grown plan was made")
					}
					if tt.refills && w.refills == 0 {
						t.Errorf("a slot was taken cold, and no Refill was planned")
					}
					if tt.refills && w.refills > 0 && w.refilling == 0 {
						t.Errorf("a Refill was planned, and no table landed with its slot Filling")
					}
					if tt.flushes && len(w.away) == 0 {
						t.Errorf("the script cut off no Pod")
					}
					if tt.flushes && w.flushes == 0 {
						t.Errorf("a zone came back, and no Refill flushed it first")
					}
				})
			}
		}
	}
}

// The script's steps.
func rollout(w *world) { w.writeSpec(func(o *object) { o.template++ }) }
func scale(n int32) func(*world) {
	return func(w *world) { w.writeSpec(func(o *object) { o.size = n }) }
}

// addZone adds a cell: its Deployment starts with no Pod.
func addZone(zone string) func(*world) {
	return func(w *world) { w.writeSpec(func(o *object) { o.zones = append(slices.Clone(o.zones), zone) }) }
}

// partition makes every settled Serving Pod of one random zone NotReady
// for a few seconds, as a zone cut off from the kubelets' probes would be
// (a Pod published within the last writes is left out, as randomServing
// leaves it).
func partition(w *world) {
	p := w.randomServing()
	if p == nil {
		return
	}
	back := w.now.Add(time.Duration(2000+w.rng.IntN(3000)) * time.Millisecond)
	for _, q := range w.pods {
		if q.zone == p.zone && w.settledServing(q) {
			w.set(q, func(s *podState) { s.ready = false })
			q.readyDue = back
			w.away[q.name] = true
		}
	}
}

// lose makes a random Serving Pod vanish at once, as a lost node's do
// once the node controller gives up on them; only one whose zone's table
// has no Empty slot in any copy a sync may start from. A Pod lost while
// other slots are free is what Assign cannot promise: when it went is not
// recorded, so its slot is free after the Empty ones from a table that
// lists it, and among them, ascending, from one written since, and a Pod
// that turns Ready meanwhile may take either (TestAssignStale).
func lose(w *world) {
	var full []*modelPod
	for _, p := range w.pods {
		if w.settledServing(p) && !w.anyEmpty(p.zone) {
			full = append(full, p)
		}
	}
	if len(full) > 0 {
		w.set(full[w.rng.IntN(len(full))], func(s *podState) { s.gone = true })
	}
}

// anyEmpty tells whether a zone's table has an Empty slot below size in
// a copy the next sync may start from.
func (w *world) anyEmpty(zone string) bool {
	live := w.live()
	for _, o := range w.objects[max(w.copyRev, live.rev-2, w.specRev)-1:] {
		tb := o.status.tables[zone].Slots
		if len(tb) < int(o.size) || slices.ContainsFunc(tb[:o.size], func(e v1alpha1.Slot) bool { return e.State == v1alpha1.SlotEmpty }) {
			return true
		}
	}
	return false
}

// flap makes a random Serving Pod NotReady for a few seconds.
func flap(w *world) {
	if p := w.randomServing(); p != nil {
		w.set(p, func(s *podState) { s.ready = false })
		p.readyDue = w.now.Add(time.Duration(2000+w.rng.IntN(3000)) * time.Millisecond)
		w.away[p.name] = true
	}
}

// object is the Memcached as the API server holds it at one revision.
type object struct {
	rev      int
	size     int32
	template int
	// zones are the cells: "" alone for a Memcached without zones.
	zones  []string
	status status
}

type status struct {
	tables   map[string]v1alpha1.SlotTable // by zone
	handoffs []v1alpha1.Handoff
	// assigned are the tables as Assign left them, before Fill marked
	// them (not in the status: what the checks hold the hand-offs to).
	assigned map[string][]v1alpha1.Slot
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
	zone     string
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
	served       map[string]int64 // the agent's version, by zone
	servedIPs    map[string][]string
	landed       int
	grownPlans   int               // Grown entries that landed with a plan (To)
	refills      int               // Refill entries that landed
	flushes      int               // of which with Flush
	refillSeen   map[string]bool   // Refills that landed, by report key
	away         map[string]bool   // Pods that were NotReady after they served
	servedFrom   map[string]string // zone/slot: the Pod a landed table served it from last
	filled       int               // landed tables with a Filling slot
	refilling    int               // of them, with a Refill's (no From)
	// forgetDue are the reports the agent will remove, by key.
	forgetDue map[string]time.Time
}

func newWorld(t *testing.T, seed uint64, size int32, cells int) *world {
	zones := []string{""}
	if cells > 1 {
		zones = []string{"a", "b", "c"}[:cells]
	}
	w := &world{
		t:            t,
		rng:          rand.New(rand.NewPCG(seed, 25)),
		now:          time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(seed) * 137 * time.Millisecond),
		objects:      []object{{rev: 1, size: size, zones: zones}},
		reports:      map[string]v1alpha1.HandoffProgress{},
		reportDue:    map[string]time.Time{},
		fails:        map[string]bool{},
		published:    map[string]int32{},
		publishedRev: map[string]int{},
		firstSlot:    map[string]int32{},
		served:       map[string]int64{},
		servedIPs:    map[string][]string{},
		refillSeen:   map[string]bool{},
		away:         map[string]bool{},
		servedFrom:   map[string]string{},
		forgetDue:    map[string]time.Time{},
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
		if w.settledServing(p) {
			serving = append(serving, p)
		}
	}
	if len(serving) == 0 {
		return nil
	}
	return serving[w.rng.IntN(len(serving))]
}

// settledServing tells whether a Pod is Ready and was published at least
// three writes ago, or by the copy the last sync started from: the cache
// never goes back, so every later copy has it too. (Once the tables
// converge, no more writes come, and a script step found no Pod to lose
// or cut off.)
func (w *world) settledServing(p *modelPod) bool {
	s := p.now()
	rev, published := w.publishedRev[p.name]
	return s.ready && !s.leaving && !s.gone && published && (rev <= w.live().rev-3 || rev <= w.copyRev)
}

// run steps the model for d: the script, the kubelets, the Deployment,
// the agent's reports, and syncs.
func (w *world) run(script map[int]func(*world), d time.Duration) {
	start := w.now
	done := map[int]bool{}
	for w.now.Sub(start) < d {
		w.now = w.now.Add(time.Duration(50+w.rng.IntN(600)) * time.Millisecond)
		for _, sec := range slices.Sorted(maps.Keys(script)) {
			if !done[sec] && w.now.Sub(start) >= time.Duration(sec)*time.Second {
				done[sec] = true
				script[sec](w)
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
	for _, zone := range o.zones {
		tb := o.status.tables[zone].Slots
		if len(tb) != int(o.size) {
			w.t.Fatalf("after the events stopped, zone %q's table has %d slots, want %d: %s", zone, len(tb), o.size, show(tb))
		}
		var want []string
		for _, p := range w.pods {
			if s := p.now(); p.zone == zone && !s.gone && !s.leaving {
				want = append(want, p.name)
			}
		}
		var got []string
		for _, e := range tb {
			if e.State != v1alpha1.SlotServing {
				w.t.Errorf("after the events stopped, zone %q's slot %d is %s: %s", zone, e.Slot, e.State, show(tb))
			}
			got = append(got, e.Pod)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			w.t.Errorf("after the events stopped, zone %q's table holds %v, the Pods are %v", zone, got, want)
		}
	}
	if len(o.status.handoffs) != 0 {
		w.t.Errorf("after the events stopped, hand-offs remain: %s", handoffs(o.status.handoffs))
	}
	w.copyRev = o.rev
	st, pending := w.compute(o)
	if !reflect.DeepEqual(st, o.status) || pending != 0 {
		w.t.Errorf("a sync on the converged tables changes them (pending %s):\n got %v\nwant %v", pending, st, o.status)
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
	for _, zone := range o.zones {
		w.zoneDeployment(o, zone)
	}
}

// zoneDeployment is one zone's Deployment (the one cell's without zones).
func (w *world) zoneDeployment(o object, zone string) {
	var old, cur []*modelPod
	ready := 0
	for _, p := range w.pods {
		s := p.now()
		if p.zone != zone || s.gone || s.leaving {
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
		w.create(o.template, zone)
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
func (w *world) create(template int, zone string) {
	w.nextIP++
	const letters = "bcdfghjklmnpqrstvwxz2456789"
	var suffix strings.Builder
	for range 5 {
		suffix.WriteByte(letters[w.rng.IntN(len(letters))])
	}
	p := &modelPod{
		zone:     zone,
		name:     fmt.Sprintf("cache-%s%d-%s", zone, template, suffix.String()),
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
	for key, due := range w.forgetDue {
		if !due.After(w.now) {
			delete(w.reports, key)
			delete(w.forgetDue, key)
		}
	}
}

// cachedPods are the Pods as Metacontroller's cache shows them now, of
// the zones given (every zone: none given).
func (w *world) cachedPods(zones ...string) []slots.Pod {
	var out []slots.Pod
	for _, p := range w.pods {
		if len(zones) > 0 && !slices.Contains(zones, p.zone) {
			continue
		}
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
	prev := copy.status
	st := status{tables: map[string]v1alpha1.SlotTable{}, assigned: map[string][]v1alpha1.Slot{}}
	in := slots.HandoffInput{Size: copy.size, KeepWarm: true, Prev: prev.handoffs, Reports: w.reports}
	var pending time.Duration
	wait := func(d time.Duration) {
		if d > 0 && (pending == 0 || d < pending) {
			pending = d
		}
	}
	for _, zone := range copy.zones {
		pods := w.cachedPods(zone)
		a := slots.Assign(prev.tables[zone], copy.size, pods, w.now)
		in.Cells = append(in.Cells, slots.Cell{Zone: zone, Prev: prev.tables[zone].Slots, Assigned: a, Pods: pods})
		wait(a.Pending)
	}
	st.handoffs = slots.Handoffs(in)
	// Make before break, as the hook marks the tables (the bound of a
	// 64 MiB keepWarm Pod: 10 + 32 - 2 - 2 s).
	tables, filling := slots.Fill(slots.FillInput{KeepWarm: true, Cells: in.Cells, Handoffs: st.handoffs, Size: copy.size, Bound: 38 * time.Second, Now: w.now})
	wait(filling)
	for i, c := range in.Cells {
		st.assigned[c.Zone] = c.Assigned.Slots
		st.tables[c.Zone] = v1alpha1.SlotTable{Version: slots.Version(prev.tables[c.Zone], tables[i], w.now), Slots: tables[i], Waiting: c.Assigned.Waiting, EventsUntil: c.Assigned.EventsUntil}
	}
	return st, pending
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
		w.t.Logf("%s sync from rev %d (live %d) size %d: prev %v\n  pods %v\n  -> %v %s", w.now.Format("04:05.000"), from, live.rev, copy.size, copy.status.tables, view, st.tables, handoffs(st.handoffs))
	}
	if reflect.DeepEqual(st.tables, live.status.tables) && reflect.DeepEqual(st.handoffs, live.status.handoffs) {
		return
	}
	w.write(func(o *object) { o.status = st })
	w.check(copy, st)
}

// checkGrown checks a Grown entry that landed: its Pod holds a slot
// below the first one added, and a plan (To) names that slot's Pod only
// once every added slot below size serves.
func (w *world) checkGrown(copy object, st status, h v1alpha1.Handoff) {
	tb := st.assigned[h.Zone]
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
	at := map[string]v1alpha1.Slot{} // each Pod's entry, in its zone's table
	for _, zone := range copy.zones {
		// A scale-down's Removing slots are listed for clients, past the
		// table: their Pods hold the slots kept, or none.
		for _, e := range v1alpha1.Kept(st.tables[zone].Slots) {
			if e.Pod != "" {
				at[e.Pod] = e
			}
		}
		w.checkFill(zone, st.tables[zone].Slots, copy.status.tables[zone].Slots, st.handoffs)
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
			w.t.Errorf("landing %d: %s, published Serving in slot %d and not terminating, is not in the table: %v", w.landed, p.Name, s, st.tables)
		case e.Slot == s:
		case s >= copy.size && moved[p.Name] == e.Slot:
			// A scale-down's move, which a Moved entry records.
			w.published[p.Name] = e.Slot
		default:
			w.t.Errorf("landing %d: %s, published Serving in slot %d, is in slot %d: %v", w.landed, p.Name, s, e.Slot, st.tables)
		}
	}
	for _, e := range at {
		if _, ok := w.published[e.Pod]; !ok && e.State == v1alpha1.SlotServing {
			w.published[e.Pod] = e.Slot
			w.publishedRev[e.Pod] = w.live().rev
		}
	}
	w.checkHandoffs(copy, st)
	w.forgetReports(st)
	for _, zone := range copy.zones {
		w.checkServed(zone, st.tables[zone])
	}
}

// checkHandoffs checks the hand-offs of a status that landed, and has
// the agent report on those it copies.
func (w *world) checkHandoffs(copy object, st status) {
	inEntry := map[string]bool{}
	for _, h := range st.handoffs {
		if inEntry[h.Pod] {
			w.t.Errorf("landing %d: %s is in two hand-offs: %s", w.landed, h.Pod, handoffs(st.handoffs))
		}
		inEntry[h.Pod] = true
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
		switch h.Reason {
		case v1alpha1.HandoffGrown:
			w.checkGrown(copy, st, h)
			continue
		case v1alpha1.HandoffRefill:
			w.checkRefill(copy, st, h)
			continue
		}
		taken, ok := h.TakenSlot()
		if !ok {
			continue
		}
		tb := st.tables[h.Zone].Slots
		if first, ok := w.firstSlot[h.Pod]; ok && first != taken {
			w.t.Errorf("landing %d: %s's hand-off names slot %d, an earlier one named slot %d: %s", w.landed, h.Pod, taken, first, show(tb))
		}
		w.firstSlot[h.Pod] = taken
		if successor, _, _ := h.Successor(); int(taken) >= len(tb) || tb[taken].Pod != successor {
			w.t.Errorf("landing %d: %s's hand-off names %s in slot %d, which the table does not: %s", w.landed, h.Pod, successor, taken, show(tb))
		}
	}
}

// forgetReports has the agent remove the reports of the Pods that have
// no hand-off in a status that landed, as it does once their jobs end
// (handoff.Runner.ended), a little later: a Pod's report must not end
// a later hand-off of the same key (a Pod refilled again by the same
// source after it came back).
func (w *world) forgetReports(st status) {
	in := map[string]bool{}
	for _, h := range st.handoffs {
		in[h.Pod] = true
	}
	// In key order: the model draws from its seeded source here, and a
	// map's order would make a seed's run differ from run to run.
	for _, key := range slices.Sorted(maps.Keys(w.reports)) {
		r, ok := contract.ParseReportKey(key)
		switch _, due := w.forgetDue[key]; {
		case ok && in[r.Pod]:
			delete(w.forgetDue, key) // its job goes on, or another starts
		case !due:
			// The agent keeps it contract.ReportLinger.
			w.forgetDue[key] = w.now.Add(contract.ReportLinger + time.Duration(100+w.rng.IntN(900))*time.Millisecond)
		}
	}
}

// checkRefill checks a Refill that landed: the filled Pod serves the slot
// in its zone, the source serves the same slot in another zone of as many
// slots, no Pod is filled twice, and it flushes first exactly when the
// filled Pod comes back: the status the decision was made from had
// published it Serving in that slot (it may hold values the other zones
// changed while it was away; a Pod filled for the first time holds only
// what clients wrote to it since, which a flush would lose). An entry
// carried from the status the sync started from is not decided again.
func (w *world) checkRefill(copy object, st status, h v1alpha1.Handoff) {
	s, to, toIP, ok := h.Refilled()
	// As Assign made the tables: what the rules decide from.
	tb := st.assigned[h.Zone]
	if !ok || int(s) >= len(tb) || tb[s].Pod != to || tb[s].IP != toIP || tb[s].State != v1alpha1.SlotServing {
		w.t.Errorf("landing %d: %s's Refill names %s@%s in zone %q's slot %d, which does not serve it: %s", w.landed, h.Pod, to, toIP, h.Zone, s, show(tb))
		return
	}
	source := false
	for _, zone := range copy.zones {
		y := st.assigned[zone]
		source = source || (zone != h.Zone && len(y) == len(tb) && y[s].Pod == h.Pod && y[s].IP == h.IP && y[s].State == v1alpha1.SlotServing)
	}
	if !source {
		w.t.Errorf("landing %d: %s's Refill of zone %q's slot %d has a source that serves it in no other zone: %v", w.landed, h.Pod, h.Zone, s, st.tables)
	}
	for _, o := range st.handoffs {
		if o.Reason == v1alpha1.HandoffRefill && o.Pod != h.Pod && o.To == h.To {
			w.t.Errorf("landing %d: %s is refilled twice, by %s and %s", w.landed, h.To, h.Pod, o.Pod)
		}
	}
	key := contract.ReportKey(h)
	if slices.ContainsFunc(copy.status.handoffs, func(o v1alpha1.Handoff) bool { return contract.ReportKey(o) == key }) {
		return // carried from the status it started from, not decided now
	}
	if !w.refillSeen[key] {
		w.refillSeen[key] = true
		w.refills++
		if h.Flush {
			w.flushes++
		}
	}
	// It comes back if the status the decision started from (copy) had
	// already published it Serving in that slot: it then held the slot,
	// stopped serving, and serves again.
	rev, published := w.publishedRev[h.To]
	back := published && rev <= copy.rev && w.published[h.To] == s
	if h.Flush != back {
		w.t.Errorf("landing %d: %s's Refill of %s in slot %d has Flush %v; the status it was decided from had published it there: %v", w.landed, h.Pod, h.To, s, h.Flush, back)
	}
}

// checkFill checks make before break in a zone's table that landed: a slot
// served from a Pod in a published status is never Filling again with
// that Pod (it moves to its successor once, and never back), and the
// table's pool is one the proxy takes (a Pod listed once).
//
// A Filling slot with no From (a Refill's: no Pod serves it, and its
// zone's proxies read it from another zone) is the slot of a Pod a Refill
// of the status fills, and not one the status the sync started from
// (prev) served from that Pod: a Pod listed once its copy ended stays
// listed. It may be Filling again after its Pod served it, once it
// stopped serving and came back (a Refill with Flush): that sends no
// client back to an older copy.
func (w *world) checkFill(zone string, table, prev []v1alpha1.Slot, hs []v1alpha1.Handoff) {
	for _, e := range table {
		key := fmt.Sprintf("%s/%d", zone, e.Slot)
		switch {
		case e.State == v1alpha1.SlotServing:
			w.servedFrom[key] = e.Pod
		case e.State == v1alpha1.SlotFilling && e.From == "":
			if !slices.ContainsFunc(hs, func(h v1alpha1.Handoff) bool {
				s, to, toIP, ok := h.Refilled()
				return ok && h.Zone == zone && s == e.Slot && to == e.Pod && toIP == e.IP
			}) {
				w.t.Errorf("landing %d: zone %q's slot %d is Filling with no Pod to serve it, and no Refill fills %s there: %s %s", w.landed, zone, e.Slot, e.Pod, show(table), handoffs(hs))
			}
			if int(e.Slot) < len(prev) && prev[e.Slot].Pod == e.Pod && prev[e.Slot].State == v1alpha1.SlotServing {
				w.t.Errorf("landing %d: zone %q's slot %d served %s in the status the sync started from, and is Filling again: %s", w.landed, zone, e.Slot, e.Pod, show(table))
			}
		case e.State == v1alpha1.SlotFilling:
			if w.servedFrom[key] == e.Pod {
				w.t.Errorf("landing %d: zone %q's slot %d served %s, and is Filling with it again: %s", w.landed, zone, e.Slot, e.Pod, show(table))
			}
		}
	}
	if _, err := contract.RenderPool([]v1alpha1.ZoneStatus{{SlotTable: v1alpha1.SlotTable{Slots: table}}}); err != nil {
		w.t.Errorf("landing %d: zone %q's table is no pool: %v: %s", w.landed, zone, err, show(table))
	}
	if e := slices.IndexFunc(table, func(e v1alpha1.Slot) bool { return e.State == v1alpha1.SlotFilling }); e >= 0 {
		w.filled++
	}
	if e := slices.IndexFunc(table, func(e v1alpha1.Slot) bool { return e.State == v1alpha1.SlotFilling && e.From == "" }); e >= 0 {
		w.refilling++
	}
}

// checkServed has the agent serve a zone's table that landed: its version
// never goes down, and its list never changes under one version.
func (w *world) checkServed(zone string, table v1alpha1.SlotTable) {
	var ips []string
	for _, n := range slots.Served(table.Slots, nil, "cache", "shop", 11211) {
		ips = append(ips, n.IP)
	}
	if len(ips) == 0 {
		return // refused: the agent keeps its list
	}
	v := slots.ServedVersion(w.served[zone], slices.Equal(ips, w.servedIPs[zone]), table.Version)
	switch {
	case v < w.served[zone]:
		w.t.Errorf("landing %d: the agent's version of zone %q went down from %d to %d", w.landed, zone, w.served[zone], v)
	case v == w.served[zone] && !slices.Equal(ips, w.servedIPs[zone]):
		w.t.Errorf("landing %d: zone %q's list changed under version %d", w.landed, zone, v)
	}
	w.served[zone], w.servedIPs[zone] = v, ips
}
