// Package discovery_test proves the configuration endpoint with a real Auto
// Discovery client: memcached 1.6.45 processes stand in for the Pods, the
// hook's own logic answers the Memcached's status for them, the agent
// follows it from a file (--from-file), and the npm memcache client 1.10.0
// finds the servers through the agent and follows a scale-up, a
// scale-down and a replaced Pod, with nothing restarted.
package discovery_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/sync/slots"
	"github.com/example/memcached-operator/test/clients"
	"github.com/example/memcached-operator/test/dataplane"
	"github.com/example/memcached-operator/test/testutil"
)

// ipOf is the address of Pod m-N: a loopback alias of this package's own
// (testutil.Loopback), so that packages running at once do not collide.
func ipOf(n int) string { return testutil.Loopback("test/discovery").IP(n) }

func TestAutoDiscoveryClientFollowsTheCluster(t *testing.T) {
	servers := map[string]*dataplane.Memcached{}
	pod := func(n int) dataplane.Pod {
		name := fmt.Sprintf("m-%d", n)
		servers[name] = dataplane.StartMemcached(t, ipOf(n))
		return dataplane.Pod{Name: name, IP: ipOf(n), Ready: true}
	}
	c := &dataplane.Cluster{Name: "cache", Namespace: "shop", Spec: `{"size":3,"discovery":{"enabled":true}}`,
		Pods: []dataplane.Pod{pod(1), pod(2), pod(3)}}
	file := filepath.Join(t.TempDir(), "memcached.json")
	c.Sync(t)
	c.WriteFile(t, file)

	agent := dataplane.StartAgent(t, "--memcached=cache", "--namespace=shop", "--from-file="+file,
		"--listen=127.0.0.1:0", "--file-poll-interval=100ms")
	client := clients.Start(t, clients.Options{}, clients.NodeDiscover, agent.Addr, "200")
	agentPID, clientPID := agent.PID(), client.PID()

	version := int64(0)
	// follow checks that the client took the status's version and list,
	// that the list is the Serving slots in slot order, and that keys it
	// sets land on every server of the list and no other. It prints how
	// long the client took, from the file's rename.
	follow := func(step string, written time.Time) {
		t.Helper()
		st := c.Status()
		want := []string{}
		for _, n := range slots.Served(st.SlotTable.Slots, st.SlotAddresses, "cache", "shop", dataplane.Port) {
			want = append(want, n.Addr())
		}
		ev := client.Next(t, 30*time.Second, func(m map[string]any) bool {
			v, _ := m["version"].(float64)
			return m["event"] == "config" && int64(v) == st.SlotTable.Version
		})
		took := time.Since(written)
		if ev["applied"] != true {
			t.Fatalf("%s: the client did not apply %v", step, ev)
		}
		if got := strings.Fields(fmt.Sprint(ev["nodes"])); !slices.Equal(trim(got), want) {
			t.Errorf("%s: the client was given %v, want the Serving slots in slot order %v", step, got, want)
		}
		if st.SlotTable.Version <= version {
			t.Errorf("%s: version %d did not rise from %d", step, st.SlotTable.Version, version)
		}
		version = st.SlotTable.Version
		testutil.Benchmark(fmt.Sprintf("BenchmarkDiscovery/%s/status-to-client", step), "%.3f s", took.Seconds())

		prefix := strings.ReplaceAll(step, " ", "-") + ":"
		res := client.Do(t, map[string]any{"op": "set", "prefix": prefix, "n": 300})
		if res["ok"] != float64(300) {
			t.Fatalf("%s: set %v", step, res)
		}
		keys := make([]string, 300)
		for i := range keys {
			keys[i] = fmt.Sprintf("%s%d", prefix, i)
		}
		total := 0
		for name, m := range servers {
			if !m.Running() {
				continue
			}
			n := m.Keys(t, keys)
			total += n
			listed := slices.Contains(want, m.Addr())
			switch {
			case listed && n == 0:
				t.Errorf("%s: no key landed on %s (%s), which the list names", step, name, m.Addr())
			case !listed && n > 0:
				t.Errorf("%s: %d keys landed on %s (%s), which the list does not name", step, n, name, m.Addr())
			}
		}
		if total != 300 {
			t.Errorf("%s: the servers hold %d of the 300 keys", step, total)
		}
	}
	follow("first list", time.Now())

	// Scale up: two Pods more, in new slots.
	c.Spec = `{"size":5,"discovery":{"enabled":true}}`
	c.Pods = append(c.Pods, pod(4), pod(5))
	c.Sync(t)
	c.WriteFile(t, file)
	follow("scale up", time.Now())

	// Scale down: the Deployment removes m-2 (slot 1) and m-4 (slot 3);
	// m-5 moves from slot 4 into slot 1.
	c.Spec = `{"size":3,"discovery":{"enabled":true}}`
	c.Set(t, "m-2", func(p *dataplane.Pod) { p.Leaving = true })
	c.Set(t, "m-4", func(p *dataplane.Pod) { p.Leaving = true })
	c.Sync(t)
	c.WriteFile(t, file)
	written := time.Now()
	for _, name := range []string{"m-2", "m-4"} {
		c.Remove(name)
		servers[name].Kill()
	}
	follow("scale down", written)

	// A replaced Pod: m-3 is deleted, its replacement m-6 takes its slot.
	c.Pods = append(c.Pods, pod(6))
	c.Set(t, "m-3", func(p *dataplane.Pod) { p.Leaving = true })
	c.Sync(t)
	c.WriteFile(t, file)
	written = time.Now()
	c.Remove("m-3")
	servers["m-3"].Kill()
	follow("replaced pod", written)

	if agent.PID() != agentPID || client.PID() != clientPID {
		t.Errorf("a process was restarted")
	}
}

// trim takes fmt's brackets off a printed list.
func trim(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = strings.Trim(v, "[]")
	}
	return out
}

// TestAutoDiscoveryClientAnswersWhileAGoneServerIsDropped is the npm
// client losing a Pod without grace, as TestStableNamesThroughARollout's
// last phase does, made to happen many times: the list alternates between
// a live server and one whose memcached is gone (its address refuses
// connections, as an ended Pod's fails at once) and the live one alone,
// while the client reads keys. Every get of the gone server's keys
// reconnects, so the poll that drops it often lands while a get is
// connecting to it, and memcache 1.10.0 then never settles that get
// (client.mjs says where). The client must still answer each batch of
// gets, every key counted: a get that never settles is an error, not a
// client that stops answering.
func TestAutoDiscoveryClientAnswersWhileAGoneServerIsDropped(t *testing.T) {
	const (
		flips = 100 // lists written, alternately with the gone server and without
		batch = 200 // keys a get reads
	)
	live := dataplane.StartMemcached(t, ipOf(11))
	gone := dataplane.StartMemcached(t, ipOf(12))
	gone.Kill()
	c := &dataplane.Cluster{Name: "cache", Namespace: "shop", Spec: `{"size":1,"discovery":{"enabled":true}}`,
		Pods: []dataplane.Pod{{Name: "m-live", IP: live.IP, Ready: true}}}
	c.Sync(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "memcached.json")
	c.WriteFile(t, file)

	// The lists, written ahead: the hook's own answers, a Pod at the gone
	// address joining (size 2) and leaving (size 1) in turn, each time
	// under a new name, as Pods are replaced. The last is without it.
	served := func() int {
		st := c.Status()
		return len(slots.Served(st.SlotTable.Slots, st.SlotAddresses, "cache", "shop", dataplane.Port))
	}
	var lists []string
	for i := range flips {
		name := fmt.Sprintf("m-gone-%d", i/2)
		want := 2
		if i%2 == 0 {
			c.Spec = `{"size":2,"discovery":{"enabled":true}}`
			c.Pods = append(c.Pods, dataplane.Pod{Name: name, IP: gone.IP, Ready: true})
			c.Sync(t)
		} else {
			want = 1
			c.Spec = `{"size":1,"discovery":{"enabled":true}}`
			c.Set(t, name, func(p *dataplane.Pod) { p.Leaving = true })
			c.Sync(t)
			c.Remove(name)
			c.Sync(t)
		}
		if got := served(); got != want {
			t.Fatalf("list %d serves %d servers, want %d: %+v", i, got, want, c.Status().SlotTable)
		}
		lists = append(lists, filepath.Join(dir, fmt.Sprintf("list-%03d.json", i)))
		c.WriteFile(t, lists[i])
	}

	agent := dataplane.StartAgent(t, "--memcached=cache", "--namespace=shop", "--from-file="+file,
		"--listen=127.0.0.1:0", "--file-poll-interval=20ms")
	client := clients.Start(t, clients.Options{}, clients.NodeDiscover, agent.Addr, "20")
	client.Next(t, 30*time.Second, func(m map[string]any) bool { return m["event"] == "config" })

	// The lists are renamed into place from a goroutine of their own, so
	// that they keep changing while a batch waits on a get.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, l := range lists {
			if os.Rename(l, file) != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	var total clients.Counts
	for batches := 0; ; batches++ {
		finished := false
		select {
		case <-done:
			finished = true
		default:
		}
		got := client.Get(t, fmt.Sprintf("b%d:", batches), batch)
		if n := got.Hits + got.Misses + got.Errors; n != batch {
			t.Fatalf("batch %d counted %d of its %d keys: %+v", batches, n, batch, got)
		}
		total.Hits += got.Hits
		total.Misses += got.Misses
		total.Errors += got.Errors
		total.Stuck += got.Stuck
		if finished {
			t.Logf("%d batches of %d gets: %+v", batches+1, batch, total)
			break
		}
	}
	if total.Stuck == 0 {
		t.Logf("no get was left pending this time: the race this test provokes was not hit")
	}
	if total.Stuck > total.Errors {
		t.Errorf("%d stuck gets but %d errors: a stuck get is an error too", total.Stuck, total.Errors)
	}
}
