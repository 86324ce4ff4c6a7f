// Package serverlist decides which server list the agent serves: every
// version of the Memcached the followers (the watch, or --from-file) see
// is offered here, checked, and either published as an immutable snapshot
// (its version, its nodes, the answers rendered once) or refused, keeping
// the list served before.
//
// Clients apply a list only when its version is higher than the last they
// applied, forever (the AWS cluster clients, gomemcache forks and npm
// memcache parse it as an int64), so a list is never served that would
// make them stop following: no empty list, no unparseable address, no
// version that is not positive. The list served is the one of the status
// that landed last, under a version that never goes down
// (slots.ServedVersion): a status computed from a stale copy can land
// after a newer one with a lower version, and its list is still the
// current one.
package serverlist

import (
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/example/memcached-operator/cmd/memcached-agent/internal/follow"
	"github.com/example/memcached-operator/cmd/memcached-agent/internal/protocol"
	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/sync/slots"
)

// Reasons a list is refused, as metrics label them.
const (
	// NoServers: the slot table has no Serving slot.
	NoServers = "no_servers"
	// BadAddress: a Serving slot's IP does not parse.
	BadAddress = "bad_address"
	// BadVersion: the version is not positive.
	BadVersion = "bad_version"
	// WrongObject: the follower refused another Memcached than the one
	// followed, or the object has no namespace to name its hosts in.
	WrongObject = follow.WrongObject
	// Unreadable: the follower could not read or decode the object.
	Unreadable = follow.Unreadable
)

// Reasons are every refusal reason, for metrics that show each from the
// start.
var Reasons = []string{NoServers, BadAddress, BadVersion, WrongObject, Unreadable}

// Snapshot is a published list. It is never changed once published.
type Snapshot struct {
	Version int64
	Nodes   []slots.Node
	Answers *protocol.Answers
	// Published is when this list began to be served.
	Published time.Time
}

// Observer is told what is published and refused, for metrics.
type Observer interface {
	Published(*Snapshot)
	Refused(reason string)
}

// Publisher holds the list served and takes the lists the followers see.
// Current is safe to call from any goroutine at any rate: it is one
// atomic load.
type Publisher struct {
	logger   *slog.Logger
	observer Observer
	now      func() time.Time

	current atomic.Pointer[Snapshot]

	mu sync.Mutex
	// lastProblem is the last refusal logged, so that a problem is logged
	// once however often it is seen again, until a list is published.
	lastProblem string
	// changed is closed when a list is published, and replaced.
	changed chan struct{}
}

// New returns a Publisher of the lists of the Memcached a follower
// offers.
func New(logger *slog.Logger, observer Observer, now func() time.Time) *Publisher {
	return &Publisher{logger: logger, observer: observer, now: now, changed: make(chan struct{})}
}

// Current returns the list served, or nil before the first good one.
func (p *Publisher) Current() *Snapshot { return p.current.Load() }

// Changed returns a channel that is closed when the next list is
// published.
func (p *Publisher) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

// Offer checks the Memcached the source (a follower: "watch" or "file")
// sees, and publishes its list or refuses it.
func (p *Publisher) Offer(source string, m *v1alpha1.Memcached) {
	p.mu.Lock()
	defer p.mu.Unlock()
	reason, problem, next := p.check(m)
	switch {
	case reason != "":
		p.refuse(source, reason, problem)
	case next != nil:
		p.current.Store(next)
		p.lastProblem = ""
		close(p.changed)
		p.changed = make(chan struct{})
		p.logger.Info("serving a new server list", "source", source, "version", next.Version, "servers", len(next.Nodes))
		if p.observer != nil {
			p.observer.Published(next)
		}
	}
}

// Refuse records that the source could not read the object at all, or
// refused it as another one (follow.Reason).
func (p *Publisher) Refuse(source string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse(source, follow.Reason(err), err.Error())
}

func (p *Publisher) refuse(source, reason, problem string) {
	if p.observer != nil {
		p.observer.Refused(reason)
	}
	if key := source + "\x00" + reason + "\x00" + problem; key != p.lastProblem {
		p.lastProblem = key
		attrs := []any{"source", source, "reason", reason, "problem", problem}
		if cur := p.current.Load(); cur != nil {
			attrs = append(attrs, "serving_version", cur.Version, "serving_servers", len(cur.Nodes))
		} else {
			attrs = append(attrs, "serving", "nothing yet: clients are answered SERVER_ERROR")
		}
		p.logger.Warn("server list refused; keeping the one served", attrs...)
	}
}

// check returns why m's list is refused, or the snapshot to publish (nil
// when the list is the one served).
func (p *Publisher) check(m *v1alpha1.Memcached) (reason, problem string, next *Snapshot) {
	if m.Namespace == "" {
		// The hosts are named in the namespace's headless Service.
		return WrongObject, "the object has no namespace and none was given (--namespace)", nil
	}
	table := m.Status.SlotTable
	nodes := slots.Served(table.Slots, m.Status.SlotAddresses, m.Name, m.Namespace, contract.Port)
	if len(nodes) == 0 {
		return NoServers, fmt.Sprintf("status.slotTable (version %d) has no Serving slot", table.Version), nil
	}
	for _, n := range nodes {
		if _, err := netip.ParseAddr(n.IP); err != nil {
			return BadAddress, fmt.Sprintf("a Serving slot's ip %q is not an IP address", n.IP), nil
		}
	}
	if table.Version <= 0 {
		return BadVersion, fmt.Sprintf("status.slotTable.version is %d, not positive", table.Version), nil
	}
	version := table.Version
	if cur := p.current.Load(); cur != nil {
		same := slices.Equal(nodes, cur.Nodes)
		version = slots.ServedVersion(cur.Version, same, table.Version)
		if same && version == cur.Version {
			return "", "", nil
		}
		if version != table.Version {
			p.logger.Info("the status's version is not above the one served (a status computed from an older copy landed last): serving its list under a higher one",
				"status_version", table.Version, "serving_version", version)
		}
	}
	return "", "", &Snapshot{Version: version, Nodes: nodes, Answers: protocol.NewAnswers(version, nodes), Published: p.now()}
}
