package dataplane

import (
	"context"
	"testing"
	"time"

	"github.com/example/memcached-operator/test/testutil"
)

// TestStaleReads checks the load's count of stale reads against one real
// memcached: none while only the load writes, some once every key is
// overwritten behind its back with a value older than the last it wrote.
func TestStaleReads(t *testing.T) {
	m := StartMemcached(t, testutil.Loopback("test/dataplane").IP(1))
	load := &Load{Addr: m.Addr(), Keys: 200, ValueSize: 50, SetShare: 0.1, Workers: 2}
	if err := load.Fill(context.Background()); err != nil {
		t.Fatal(err)
	}
	load.Start()
	defer load.Stop()
	time.Sleep(500 * time.Millisecond)
	c := load.Counts()
	if c.Hits == 0 || c.Stale != 0 || c.Errors != 0 {
		t.Fatalf("counts %+v, want hits and no stale read or error", c)
	}
	for i := range load.Keys {
		m.Set(t, Key(i), "0:older than any write of the load")
	}
	time.Sleep(500 * time.Millisecond)
	if d := load.Counts().Sub(c); d.Stale == 0 {
		t.Errorf("counts since the overwrite %+v, want stale reads", d)
	}
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
