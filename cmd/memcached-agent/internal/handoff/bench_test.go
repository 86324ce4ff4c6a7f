package handoff

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/test/testutil"
)

// BenchmarkHandoffCopy measures the copy between memcached 1.6.45 on
// loopback against its floor, printed as benchmark lines: the copy's MiB
// per second (a Replaced hand-off, through a Runner as the agent runs it),
// and in the same run a plain pipelined reader of the same items out of
// the source (floorRead) and a plain pipelined writer of them into an
// empty memcached (floorWrite), and the copy over the slower of the two.
// Items of 50 KiB and of 1 KiB, one copy at a time and two at once (a
// rollout's hand-offs overlap: two sources to two successors, with two
// readers and two writers at once for the floor).
//
// Each case runs the reader, the writer and the copy in turn, benchRounds
// times, into memcacheds started empty for each, and prints the fastest
// of each: on a machine shared with other work (two cores, three
// processes per copy) a single run says more of the load than of the
// copy. make bench runs it without -race (-benchtime 1x), as the agent is
// built: the race detector slows the copy several times. The tests hold
// the copy to its items elsewhere (TestReplaced and the rest). Each case
// runs the same whatever b.N.
func BenchmarkHandoffCopy(b *testing.B) {
	for _, tt := range []struct {
		name string
		// mib of items of size bytes on each of copies sources.
		mib, size, copies int
	}{
		{name: "50KiB", mib: 1024, size: 50 << 10, copies: 1},
		// Small items show the cost of each item.
		{name: "1KiB", mib: 128, size: 1 << 10, copies: 1},
		{name: "50KiB-two-at-once", mib: 512, size: 50 << 10, copies: 2},
		{name: "1KiB-two-at-once", mib: 64, size: 1 << 10, copies: 2},
	} {
		b.Run(tt.name, func(b *testing.B) {
			count := tt.mib << 20 / tt.size
			total := int64(count) * int64(tt.size) * int64(tt.copies)
			memory := tt.mib*3/2 + 64
			start := func() []*server {
				s := make([]*server, tt.copies)
				for i := range s {
					s[i] = startServer(b, nextIP(b), memory)
				}
				return s
			}
			kill := func(servers []*server) {
				for _, s := range servers {
					s.kill()
				}
			}
			srcs := start()
			keys := make([]string, count)
			for i := range keys {
				keys[i] = "item-" + strconv.Itoa(i)
			}
			for _, s := range srcs {
				fill(b, s.addr, "item", count, func(int) int { return tt.size }, 0)
			}
			b.ResetTimer()

			var read, write, copied time.Duration
			for round := range benchRounds {
				read = fastest(read, atOnce(b, srcs, func(s *server) error { return floorRead(s.addr, keys) }))
				empties := start()
				write = fastest(write, atOnce(b, empties, func(s *server) error { return floorWrite(s.addr, keys, tt.size) }))
				kill(empties)
				dsts := start()
				copied = fastest(copied, copyAll(b, round, srcs, dsts, int64(count), int64(tt.size)))
				kill(dsts)
			}
			b.StopTimer()

			mibps := func(d time.Duration) float64 { return float64(total) / (1 << 20) / d.Seconds() }
			testutil.Benchmark("BenchmarkHandoffCopy/"+tt.name,
				"%.1f copy-MiB/s %.1f reader-MiB/s %.1f writer-MiB/s %.2f copy/floor %d items %.2f s",
				mibps(copied), mibps(read), mibps(write), mibps(copied)/min(mibps(read), mibps(write)), count*tt.copies, copied.Seconds())
		})
	}
}

// benchRounds is how often BenchmarkHandoffCopy measures each figure.
const benchRounds = 3

// fastest is the shorter of two times, the first 0 before any.
func fastest(best, d time.Duration) time.Duration {
	if best == 0 || d < best {
		return d
	}
	return best
}

// copyAll hands every source's items on to the destination beside it, all
// at once (Replaced, through one Runner, as an agent does a rollout's
// overlapping hand-offs), and returns the time until the last reported
// Done. Each round's hand-offs name other Pods, and the sources' markers
// of the round before are deleted first, so that each copies again.
func copyAll(b *testing.B, round int, srcs, dsts []*server, count, size int64) time.Duration {
	b.Helper()
	for _, s := range srcs[:min(round, 1)*len(srcs)] {
		cl := newClient(b, s.addr)
		cl.delete(CopiedKey)
		cl.delete(contract.DoneKey)
		cl.Close()
	}
	rec := newRecorder()
	r, _ := newRunner(b, "agent-a", rec, Options{ReportEvery: time.Hour})
	defer r.Stop()
	var handoffs []v1alpha1.Handoff
	var table []v1alpha1.Slot
	for i := range srcs {
		from, to := fmt.Sprintf("cache-old-%d-%d", round, i), fmt.Sprintf("cache-new-%d-%d", round, i)
		handoffs = append(handoffs, v1alpha1.Handoff{Pod: from, IP: srcs[i].ip, Reason: v1alpha1.HandoffReplaced, Slot: slot(int32(i)), To: to, ToIP: dsts[i].ip})
		table = append(table, serving(i, to, dsts[i].ip))
	}
	began := time.Now()
	r.Update(handoffs, table)
	for _, h := range handoffs {
		if p := rec.final(b, h.Pod, 5*time.Minute); p.State != "Done" || p.Items != count || p.Bytes != count*size {
			b.Fatalf("%s's copy: final report %+v, want Done, %d items, %d bytes", h.Pod, p, count, count*size)
		}
	}
	return time.Since(began)
}

// atOnce runs f on every server at once and returns the time the last
// took, failing b if any failed.
func atOnce(b *testing.B, servers []*server, f func(*server) error) time.Duration {
	b.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(servers))
	began := time.Now()
	for i, s := range servers {
		wg.Go(func() {
			errs[i] = f(s)
		})
	}
	wg.Wait()
	took := time.Since(began)
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	return took
}

// floorBatch is the floor's pipelined batch, the copy's default.
const floorBatch = 100

// floorRead reads every key's value from addr, as a plain client would
// at its fastest: mg <key> v pipelined in batches by one goroutine while
// another reads the answers, the values read past.
func floorRead(addr string, keys []string) error {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer nc.Close()
	sent := make(chan error, 1)
	go func() {
		w := bufio.NewWriterSize(nc, getBufs.write)
		for i, k := range keys {
			w.WriteString("mg ")
			w.WriteString(k)
			w.WriteString(" v\r\n")
			if i%floorBatch == floorBatch-1 || i == len(keys)-1 {
				if err := w.Flush(); err != nil {
					sent <- err
					return
				}
			}
		}
		sent <- nil
	}()
	r := bufio.NewReaderSize(nc, getBufs.read)
	for _, k := range keys {
		l, err := r.ReadSlice('\n')
		if err != nil {
			return err
		}
		size, ok := bytes.CutPrefix(bytes.TrimSuffix(l, []byte("\r\n")), []byte("VA "))
		n, err := strconv.Atoi(string(size))
		if !ok || err != nil {
			return fmt.Errorf("mg %s answered %q", k, l)
		}
		if _, err := r.Discard(n + 2); err != nil {
			return err
		}
	}
	return <-sent
}

// floorWrite writes an item of size bytes under every key into addr, as
// a plain client would at its fastest: ms <key> <size> pipelined in
// batches by one goroutine while another reads the answers (HD each).
func floorWrite(addr string, keys []string, size int) error {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer nc.Close()
	answered := make(chan error, 1)
	go func() {
		r := bufio.NewReaderSize(nc, destBufs.read)
		for _, k := range keys {
			l, err := r.ReadSlice('\n')
			if err != nil {
				answered <- err
				return
			}
			if string(l) != "HD\r\n" {
				answered <- fmt.Errorf("ms %s answered %q", k, l)
				return
			}
		}
		answered <- nil
	}()
	value := valueFor("floor", size)
	w := bufio.NewWriterSize(nc, destBufs.write)
	var line []byte
	for i, k := range keys {
		line = append(line[:0], "ms "...)
		line = append(line, k...)
		line = append(line, ' ')
		line = strconv.AppendInt(line, int64(size), 10)
		line = append(line, " T0 F0\r\n"...)
		w.Write(line)
		w.Write(value)
		w.WriteString("\r\n")
		if i%floorBatch == floorBatch-1 || i == len(keys)-1 {
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
	if err := <-answered; err != nil {
		return err
	}
	return nil
}
