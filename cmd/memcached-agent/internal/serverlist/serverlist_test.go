package serverlist

import (
	"bytes"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/memcached-operator/cmd/memcached-agent/internal/follow"
	"github.com/example/memcached-operator/sync/api/v1alpha1"
)

// memcachedWith is Memcached cache in namespace shop with a slot table of
// version and the given IPs as Serving slots ("" is an Empty slot).
func memcachedWith(version int64, ips ...string) *v1alpha1.Memcached {
	m := &v1alpha1.Memcached{}
	m.ObjectMeta = metav1.ObjectMeta{Name: "cache", Namespace: "shop"}
	m.Status.SlotTable.Version = version
	for i, ip := range ips {
		s := v1alpha1.Slot{Slot: int32(i), State: v1alpha1.SlotEmpty}
		if ip != "" {
			s.Pod, s.IP, s.State = "cache-"+ip, ip, v1alpha1.SlotServing
		}
		m.Status.SlotTable.Slots = append(m.Status.SlotTable.Slots, s)
	}
	return m
}

type recorder struct {
	published []int64
	refused   map[string]int
}

func (r *recorder) Published(s *Snapshot) { r.published = append(r.published, s.Version) }
func (r *recorder) Refused(reason string) {
	if r.refused == nil {
		r.refused = map[string]int{}
	}
	r.refused[reason]++
}

// TestPublisher offers a sequence of objects, as a follower would, and
// checks after each what is served and why anything was refused.
func TestPublisher(t *testing.T) {
	// The follower checks the object is the one followed: another is
	// refused, never offered.
	other := &follow.Refusal{Reason: follow.WrongObject, Err: errors.New(`the object is Memcached "other", the agent follows "cache"`)}
	elsewhere := &follow.Refusal{Reason: follow.WrongObject, Err: errors.New(`the object is in namespace "prod", the agent follows "shop"`)}
	steps := []struct {
		name        string
		offer       *v1alpha1.Memcached
		refuse      error
		wantVersion int64 // 0: nothing served
		wantServers int
		wantRefused string
		unchanged   bool // the list served stays, and nothing is published
	}{
		{name: "empty before any list", offer: memcachedWith(100), wantRefused: NoServers},
		{name: "no Serving slot before any list", offer: memcachedWith(100, "", ""), wantRefused: NoServers},
		{name: "first good list", offer: memcachedWith(100, "10.0.0.1", "10.0.0.2"), wantVersion: 100, wantServers: 2},
		{name: "same list again", offer: memcachedWith(100, "10.0.0.1", "10.0.0.2"), wantVersion: 100, wantServers: 2, unchanged: true},
		{name: "emptied", offer: memcachedWith(101), wantVersion: 100, wantServers: 2, wantRefused: NoServers},
		{name: "a bad address", offer: memcachedWith(102, "10.0.0.1", "not-an-ip"), wantVersion: 100, wantServers: 2, wantRefused: BadAddress},
		{name: "version zero", offer: memcachedWith(0, "10.0.0.1"), wantVersion: 100, wantServers: 2, wantRefused: BadVersion},
		{name: "negative version", offer: memcachedWith(-5, "10.0.0.1"), wantVersion: 100, wantServers: 2, wantRefused: BadVersion},
		// A status computed from an older copy landed last: its list is
		// served, under a version above the one served.
		{name: "another list under a lower version", offer: memcachedWith(99, "10.0.0.1"), wantVersion: 101, wantServers: 1},
		{name: "another list under the version served", offer: memcachedWith(101, "10.0.0.1", "10.0.0.3"), wantVersion: 102, wantServers: 2},
		{name: "the same list under a lower version", offer: memcachedWith(90, "10.0.0.1", "10.0.0.3"), wantVersion: 102, wantServers: 2, unchanged: true},
		{name: "another Memcached", refuse: other, wantVersion: 102, wantServers: 2, wantRefused: WrongObject},
		{name: "another namespace", refuse: elsewhere, wantVersion: 102, wantServers: 2, wantRefused: WrongObject},
		{name: "scale-up", offer: memcachedWith(103, "10.0.0.1", "10.0.0.2", "10.0.0.4"), wantVersion: 103, wantServers: 3},
		{name: "a hole keeps its place out of the list", offer: memcachedWith(104, "10.0.0.1", "", "10.0.0.4"), wantVersion: 104, wantServers: 2},
		{name: "IPv6", offer: memcachedWith(105, "fd00::1"), wantVersion: 105, wantServers: 1},
	}
	var logs bytes.Buffer
	rec := &recorder{}
	p := New(slog.New(slog.NewTextHandler(&logs, nil)), rec, time.Now)
	for _, s := range steps {
		before := rec.refused[s.wantRefused]
		changed := p.Changed()
		if s.refuse != nil {
			p.Refuse("test", s.refuse)
		} else {
			p.Offer("test", s.offer)
		}
		cur := p.Current()
		switch {
		case s.wantVersion == 0 && cur != nil:
			t.Errorf("%s: serving version %d, want nothing", s.name, cur.Version)
		case s.wantVersion != 0 && (cur == nil || cur.Version != s.wantVersion || len(cur.Nodes) != s.wantServers):
			t.Errorf("%s: serving %+v, want version %d with %d servers", s.name, cur, s.wantVersion, s.wantServers)
		}
		if s.wantRefused != "" && rec.refused[s.wantRefused] != before+1 {
			t.Errorf("%s: refusals %v, want one more %s", s.name, rec.refused, s.wantRefused)
		}
		published := false
		select {
		case <-changed:
			published = true
		default:
		}
		if wantPublished := s.wantRefused == "" && !s.unchanged; published != wantPublished {
			t.Errorf("%s: Changed fired = %v, want %v", s.name, published, wantPublished)
		}
	}
	if got, want := rec.published, []int64{100, 101, 102, 103, 104, 105}; !equal(got, want) {
		t.Errorf("published versions %v, want %v", got, want)
	}
	cur := p.Current()
	if got, want := string(cur.Answers.Config()), "CONFIG cluster 0 41\r\n105\nfd00--1.cache.shop.svc|fd00::1|11211\n\r\nEND\r\n"; got != want {
		t.Errorf("answer %q, want %q", got, want)
	}
	// The hosts are the Pods' names in the headless Service cache.
	if h := p.Current().Nodes[0].Host; h != "fd00--1.cache.shop.svc" {
		t.Errorf("host %q", h)
	}
	if n := strings.Count(logs.String(), "server list refused"); n != 7 {
		t.Errorf("%d refusals logged, want 7 (one per distinct problem: the first two are the same):\n%s", n, logs.String())
	}
}

// TestPublisherServesStableNames checks the host column with
// spec.stableNames: the slots' names the status gives, so that a client
// that hashes on the host keeps its keys when a Pod is replaced; turning
// the names on is a new list, under a new version, even when the status's
// version did not move (the hook's version follows the Pods only).
func TestPublisherServesStableNames(t *testing.T) {
	p := New(slog.New(slog.DiscardHandler), nil, time.Now)
	p.Offer("test", memcachedWith(100, "10.0.0.1", "10.0.0.2"))
	named := memcachedWith(100, "10.0.0.1", "10.0.0.2")
	named.Status.SlotAddresses = []string{"cache-0.cache-slots.shop.svc:11211", "cache-1.cache-slots.shop.svc:11211"}
	p.Offer("test", named)
	want := "CONFIG cluster 0 92\r\n101\ncache-0.cache-slots.shop.svc|10.0.0.1|11211 cache-1.cache-slots.shop.svc|10.0.0.2|11211\n\r\nEND\r\n"
	if got := string(p.Current().Answers.Config()); got != want {
		t.Errorf("answer %q, want %q", got, want)
	}
	// A replacement: slot 1's name, another address.
	replaced := memcachedWith(200, "10.0.0.1", "10.0.0.9")
	replaced.Status.SlotAddresses = named.Status.SlotAddresses
	p.Offer("test", replaced)
	want = "CONFIG cluster 0 92\r\n200\ncache-0.cache-slots.shop.svc|10.0.0.1|11211 cache-1.cache-slots.shop.svc|10.0.0.9|11211\n\r\nEND\r\n"
	if got := string(p.Current().Answers.Config()); got != want {
		t.Errorf("answer %q, want %q", got, want)
	}
}

// TestPublisherLogsOnce checks that the same problem seen again is logged
// once and counted each time, and that a new problem, or the same after a
// good list, is logged again.
func TestPublisherLogsOnce(t *testing.T) {
	var logs bytes.Buffer
	rec := &recorder{}
	p := New(slog.New(slog.NewTextHandler(&logs, nil)), rec, time.Now)
	for range 3 {
		p.Offer("watch", memcachedWith(5))
	}
	p.Refuse("file", errors.New("bad yaml"))
	p.Refuse("file", errors.New("bad yaml"))
	p.Offer("watch", memcachedWith(5, "10.0.0.1"))
	p.Offer("watch", memcachedWith(6))
	if got := strings.Count(logs.String(), "server list refused"); got != 3 {
		t.Errorf("%d refusals logged, want 3:\n%s", got, logs.String())
	}
	if rec.refused[NoServers] != 4 || rec.refused[Unreadable] != 2 {
		t.Errorf("refusals counted %v, want 4 no_servers and 2 unreadable", rec.refused)
	}
}

// TestPublisherNamespaceFromObject checks that the object's namespace
// (the follower sets the one given, if any) names the hosts, and that an
// object with none is not served.
func TestPublisherNamespaceFromObject(t *testing.T) {
	p := New(slog.New(slog.DiscardHandler), nil, time.Now)
	p.Offer("file", memcachedWith(9, "10.0.0.1"))
	if cur := p.Current(); cur == nil || cur.Nodes[0].Host != "10-0-0-1.cache.shop.svc" {
		t.Fatalf("serving %+v, want a host in namespace shop", cur)
	}
	noNS := memcachedWith(10, "10.0.0.2")
	noNS.Namespace = ""
	p.Offer("file", noNS)
	if cur := p.Current(); cur.Version != 9 {
		t.Errorf("an object without a namespace was served")
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestTwoAgentsOutOfOrder lands statuses out of order (a status computed
// from an older copy of the Memcached, with a lower version, after a newer
// one) on two agents, one of which misses some of them as a watch may
// after a relist, and follows an Auto Discovery client that asks either
// agent at random: it applies a list only under a higher version than the
// one it has, as the clients do. Both agents serve the list of the status
// that landed last, and the client ends on it.
func TestTwoAgentsOutOfOrder(t *testing.T) {
	type landing struct {
		version int64
		ips     []string
		// missedByB: the second agent does not see this status.
		missedByB bool
	}
	tests := []struct {
		name     string
		landings []landing
	}{{
		name: "an older status with the old list lands last",
		landings: []landing{
			{version: 100, ips: []string{"10.0.0.1", "10.0.0.2"}},
			{version: 200, ips: []string{"10.0.0.1", "10.0.0.3"}},
			{version: 100, ips: []string{"10.0.0.1", "10.0.0.2"}},
		},
	}, {
		name: "an older status with a third list lands last",
		landings: []landing{
			{version: 100, ips: []string{"10.0.0.1"}},
			{version: 300, ips: []string{"10.0.0.1", "10.0.0.2"}},
			{version: 200, ips: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}},
		},
	}, {
		name: "one agent misses the newer status",
		landings: []landing{
			{version: 100, ips: []string{"10.0.0.1"}},
			{version: 300, ips: []string{"10.0.0.2"}, missedByB: true},
			{version: 200, ips: []string{"10.0.0.3"}},
		},
	}, {
		name: "one agent misses the out-of-order status, then a newer one lands",
		landings: []landing{
			{version: 100, ips: []string{"10.0.0.1"}},
			{version: 300, ips: []string{"10.0.0.2"}},
			{version: 150, ips: []string{"10.0.0.1"}, missedByB: true},
			{version: 301, ips: []string{"10.0.0.4"}},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := New(slog.New(slog.DiscardHandler), nil, time.Now)
			b := New(slog.New(slog.DiscardHandler), nil, time.Now)
			var clientVersion int64
			var clientIPs []string
			ask := func(p *Publisher) {
				if cur := p.Current(); cur != nil && cur.Version > clientVersion {
					clientVersion, clientIPs = cur.Version, nil
					for _, n := range cur.Nodes {
						clientIPs = append(clientIPs, n.IP)
					}
				}
			}
			for i, l := range tt.landings {
				for _, p := range []*Publisher{a, b} {
					before := p.Current()
					if p == b && l.missedByB {
						continue
					}
					p.Offer("watch", memcachedWith(l.version, l.ips...))
					cur := p.Current()
					var got []string
					for _, n := range cur.Nodes {
						got = append(got, n.IP)
					}
					if !slices.Equal(got, l.ips) {
						t.Errorf("landing %d: an agent serves %v, want the status's %v", i, got, l.ips)
					}
					if before != nil && cur.Version < before.Version {
						t.Errorf("landing %d: an agent's version went down from %d to %d", i, before.Version, cur.Version)
					}
				}
				// The client asks both, in either order.
				if i%2 == 0 {
					ask(a)
					ask(b)
				} else {
					ask(b)
					ask(a)
				}
			}
			last := tt.landings[len(tt.landings)-1].ips
			if !slices.Equal(clientIPs, last) {
				t.Errorf("the client ends on %v (version %d), want the last status's %v (agents serve %d and %d)",
					clientIPs, clientVersion, last, a.Current().Version, b.Current().Version)
			}
		})
	}
}
