package handoff

import (
	"testing"
	"time"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/test/testutil"
)

// BenchmarkHandoffCopy measures the copy between two memcached 1.6.45 on
// loopback, printed as benchmark lines: items and MiB per second for
// 64 MiB and 1 GiB of items from 1 KiB to 100 KiB, and 64 MiB of 1 KiB
// items. make bench runs it (-benchtime 1x); the tests hold the copy to
// its items elsewhere (TestHandoff and the rest), so make test need not
// copy a GiB for a figure. Each case makes one copy whatever b.N.
func BenchmarkHandoffCopy(b *testing.B) {
	mixed := func(i int) int { return 1<<10 + (i*7919)%(99<<10) }
	for _, tt := range []struct {
		name string
		mib  int
		size func(int) int
	}{
		{name: "64MiB", mib: 64, size: mixed},
		{name: "1GiB", mib: 1024, size: mixed},
		// Small items show the cost of each item.
		{name: "64MiB-of-1KiB", mib: 64, size: func(int) int { return 1 << 10 }},
	} {
		b.Run(tt.name, func(b *testing.B) {
			mib, size := tt.mib, tt.size
			memory := mib*3/2 + 64
			src := startServer(b, nextIP(b), memory)
			dst := startServer(b, nextIP(b), memory)
			var count int
			var total int64
			for total < int64(mib)<<20 {
				total += int64(size(count))
				count++
			}
			fill(b, src.addr, "item", count, size, 0)
			rec := newRecorder()
			r, _ := newRunner(b, "agent-a", rec, Options{ReportEvery: time.Hour})
			b.ResetTimer()
			start := time.Now()
			r.Update([]v1alpha1.Handoff{{Pod: "cache-old", IP: src.ip, Reason: v1alpha1.HandoffReplaced, Slot: slot(0), To: "cache-new", ToIP: dst.ip}},
				[]v1alpha1.Slot{serving(0, "cache-new", dst.ip)})
			p := rec.final(b, "cache-old", 5*time.Minute)
			took := time.Since(start).Seconds()
			b.StopTimer()
			if p.State != "Done" || p.Items != int64(count) || p.Bytes != total {
				b.Fatalf("final report %+v, want Done, %d items, %d bytes", p, count, total)
			}
			testutil.Benchmark("BenchmarkHandoffCopy/"+tt.name, "%.0f items/s %.1f MiB/s %d items %.2f s", float64(count)/took, float64(total)/(1<<20)/took, count, took)
		})
	}
}
