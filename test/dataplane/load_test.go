package dataplane

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/example/memcached-operator/test/testutil"
)

// TestStaleReads checks the load's count of stale reads against one real
// memcached: none while only the load writes, some once every key is
// overwritten behind its back with a value older than the last it wrote,
// and then every key stale in a sweep.
func TestStaleReads(t *testing.T) {
	m := StartMemcached(t, testutil.Loopback("test/dataplane").IP(1))
	load := &Load{Addr: m.Addr(), Keys: 200, ValueSize: 50, SetShare: 0.1, Workers: 2}
	if err := load.Fill(context.Background()); err != nil {
		t.Fatal(err)
	}
	load.Start()
	defer load.Stop()
	// Reads rather than time: a loaded machine may give the workers little
	// of either.
	c := waitCounts(t, load, Counts{}, func(d Counts) bool { return d.Hits >= 2*int64(load.Keys) })
	if c.Stale != 0 || c.Errors != 0 {
		t.Fatalf("counts %+v, want hits and no stale read or error", c)
	}
	for i := range load.Keys {
		m.Set(t, Key(i), "0:older than any write of the load")
	}
	waitCounts(t, load, c, func(d Counts) bool { return d.Stale > 0 })
	// A sweep reads every key: each is stale, once the load has stopped
	// rewriting them.
	load.Stop()
	for i := range load.Keys {
		m.Set(t, Key(i), "0:older than any write of the load")
	}
	got, err := load.Sweep(context.Background())
	if err != nil || got.Stale != int64(load.Keys) || got.Hits != int64(load.Keys) {
		t.Errorf("a sweep counted %+v (%v), want all %d keys hit and stale", got, err, load.Keys)
	}
}

// waitCounts waits until the load's counts since before satisfy ok, and
// returns them all; it fails the test if they do not within a minute.
func waitCounts(t *testing.T, load *Load, before Counts, ok func(Counts) bool) Counts {
	t.Helper()
	var c Counts
	testutil.EventuallyEvery(t, time.Minute, 10*time.Millisecond, func() error {
		if c = load.Counts(); !ok(c.Sub(before)) {
			return fmt.Errorf("counts since %+v: %+v", before, c.Sub(before))
		}
		return nil
	})
	return c
}

// TestRate checks that a load with a Rate sends no more requests than its
// rate allows, each worker at most one more than its schedule, and some.
func TestRate(t *testing.T) {
	m := StartMemcached(t, testutil.Loopback("test/dataplane").IP(2))
	load := &Load{Addr: m.Addr(), Keys: 200, ValueSize: 50, Workers: 2, Rate: 100}
	if err := load.Fill(context.Background()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	load.Start()
	time.Sleep(500 * time.Millisecond)
	load.Stop()
	elapsed := time.Since(start)
	c := load.Counts()
	got := c.Hits + c.Misses + c.Errors
	limit := int64(float64(load.Rate)*elapsed.Seconds()) + int64(load.Workers)
	if got == 0 || got > limit {
		t.Errorf("%d gets in %s at a rate of %d a second, want between 1 and %d", got, elapsed, load.Rate, limit)
	}
}
