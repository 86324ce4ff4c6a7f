package follow_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/cmd/memcached-agent/internal/follow"
	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/test/testutil"
)

// firstSink keeps the first thing a follower hands it.
type firstSink chan any

func (s firstSink) Offer(_ string, m *v1alpha1.Memcached) { s.put(m) }
func (s firstSink) Refuse(_ string, err error)            { s.put(err) }
func (s firstSink) put(v any) {
	select {
	case s <- v:
	default:
	}
}

// followOnce runs the file follower for Memcached name in namespace over
// content, and returns what it offered or refused first.
func followOnce(t *testing.T, content, name, namespace string) any {
	t.Helper()
	path := filepath.Join(t.TempDir(), "memcached.json")
	testutil.WriteFileAtomic(t, path, []byte(content))
	sink := make(firstSink, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		follow.File(ctx, path, 10*time.Millisecond, name, namespace, sink, func(string) {}, slog.New(slog.DiscardHandler))
	}()
	defer func() { cancel(); <-done }()
	select {
	case v := <-sink:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("the follower handed nothing on within 10 s")
		return nil
	}
}

// TestFollowerOffersOnlyItsMemcached checks the one place the agent tells
// its Memcached from another: the follower offers the Memcached named in
// the namespace given (or any, when none is given), setting the namespace
// given on an object without one, and refuses any other as WrongObject.
func TestFollowerOffersOnlyItsMemcached(t *testing.T) {
	noNamespace := strings.Replace(object(1, "a=10.0.0.1"), `"namespace":"shop",`, "", 1)
	tests := []struct {
		name            string
		content         string
		follow, ns      string
		wantReason      string // "": offered
		wantNS          string
		wantProblemText string
	}{
		{name: "its Memcached", content: object(1, "a=10.0.0.1"), follow: "cache", ns: "shop", wantNS: "shop"},
		{name: "no namespace given: the object's", content: object(1, "a=10.0.0.1"), follow: "cache", wantNS: "shop"},
		{name: "an object without a namespace takes the one given", content: noNamespace, follow: "cache", ns: "shop", wantNS: "shop"},
		{name: "without a namespace anywhere", content: noNamespace, follow: "cache", wantNS: ""},
		{name: "another Memcached", content: object(1, "a=10.0.0.1"), follow: "other", ns: "shop", wantReason: follow.WrongObject, wantProblemText: `the object is Memcached "cache", the agent follows "other"`},
		{name: "another namespace", content: object(1, "a=10.0.0.1"), follow: "cache", ns: "prod", wantReason: follow.WrongObject, wantProblemText: `the object is in namespace "shop", the agent follows "prod"`},
		{name: "unreadable", content: "{", follow: "cache", ns: "shop", wantReason: follow.Unreadable, wantProblemText: "memcached.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			switch got := followOnce(t, tt.content, tt.follow, tt.ns).(type) {
			case *v1alpha1.Memcached:
				if tt.wantReason != "" || got.Namespace != tt.wantNS {
					t.Errorf("offered the Memcached in namespace %q, want it refused as %q, or offered in %q", got.Namespace, tt.wantReason, tt.wantNS)
				}
			case error:
				if r := follow.Reason(got); r != tt.wantReason || !strings.Contains(got.Error(), tt.wantProblemText) {
					t.Errorf("refused as %s: %v; want %q naming %q", r, got, tt.wantReason, tt.wantProblemText)
				}
			}
		})
	}
}

// TestDecodeTakesTheTableAsTheHook checks that a slot table whose entries
// are out of order or have a gap is no table to the agent, as to the hook
// (contract.Ordered): no list or pool is made of it.
func TestDecodeTakesTheTableAsTheHook(t *testing.T) {
	for _, table := range []string{
		`{"version":3,"slots":[{"slot":1,"pod":"b","ip":"10.0.0.2","state":"Serving"},{"slot":0,"pod":"a","ip":"10.0.0.1","state":"Serving"}]}`,
		`{"version":3,"slots":[{"slot":0,"pod":"a","ip":"10.0.0.1","state":"Serving"},{"slot":2,"pod":"c","ip":"10.0.0.3","state":"Serving"}]}`,
	} {
		m, err := follow.Decode([]byte(`{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":"c"},"status":{"slotTable":` + table + `}}`))
		if err != nil || m.Status.SlotTable.Version != 0 || m.Status.SlotTable.Slots != nil {
			t.Errorf("slot table %s: %+v, %v; want it left out", table, m, err)
		}
	}
}

// TestDecodeTakesEachZonesTableAsTheHook checks that a zone's slot table
// whose entries are out of order is no table to the agent, and that the
// other zones' tables are taken as they are.
func TestDecodeTakesEachZonesTableAsTheHook(t *testing.T) {
	const (
		ordered    = `{"version":3,"slots":[{"slot":0,"pod":"a","ip":"10.0.0.1","state":"Serving"},{"slot":1,"pod":"b","ip":"10.0.0.2","state":"Serving"}]}`
		outOfOrder = `{"version":4,"slots":[{"slot":1,"pod":"d","ip":"10.0.1.2","state":"Serving"},{"slot":0,"pod":"c","ip":"10.0.1.1","state":"Serving"}]}`
	)
	m, err := follow.Decode([]byte(`{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":"c"},"status":{"zones":[` +
		`{"name":"a","slotTable":` + ordered + `},{"name":"b","slotTable":` + outOfOrder + `}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Status.Zones) != 2 {
		t.Fatalf("Decode() gave zones %+v, want a and b", m.Status.Zones)
	}
	if a := m.Status.Zones[0].SlotTable; a.Version != 3 || len(a.Slots) != 2 {
		t.Errorf("zone a's table is %+v, want it as it is", a)
	}
	if b := m.Status.Zones[1].SlotTable; b.Version != 0 || b.Slots != nil {
		t.Errorf("zone b's table is %+v, want it left out", b)
	}
}
