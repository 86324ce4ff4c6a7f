package dataplane

import (
	"context"
	"testing"
	"time"
)

// TestStaleReads checks the load's count of stale reads against one real
// memcached: none while only the load writes, some once every key is
// overwritten behind its back with a value older than the last it wrote.
func TestStaleReads(t *testing.T) {
	m := StartMemcached(t, "127.0.23.1")
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
