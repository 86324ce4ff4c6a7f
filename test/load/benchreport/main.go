// Command benchreport reads the output of sync/memcached's benchmarks
// (go test -bench -benchmem, any -count) on standard input and prints the
// ratios of BENCHMARKS.md: the whole sync path against the floor (one
// validating JSON v2 scan of the same bytes) at each size, allocated bytes
// against the request's size, the cost per Pod across sizes, and the 3-Pod
// sync's time. With -count above 1 each figure is the median of its runs.
// It judges nothing: it prints the figures and the goals beside them.
package main

import (
	"bufio"
	"fmt"
	"log"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// result is one benchmark's runs: each metric ("ns/op", "B/op", "req-B")
// with one value per run.
type result map[string][]float64

// median is the median of a metric's runs, or 0 if it has none.
func (r result) median(metric string) float64 {
	v := slices.Clone(r[metric])
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// benchLine matches "BenchmarkSync/pods=3-2   1234   5678 ns/op ..." and
// captures the name without the -GOMAXPROCS suffix, and the metrics.
var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

func main() {
	log.SetFlags(0)
	results := map[string]result{}
	var header []string
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		line := sc.Text()
		for _, p := range []string{"goos:", "goarch:", "cpu:"} {
			if strings.HasPrefix(line, p) && !slices.Contains(header, line) {
				header = append(header, line)
			}
		}
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		r := results[m[1]]
		if r == nil {
			r = result{}
			results[m[1]] = r
		}
		fields := strings.Fields(m[2])
		for i := 0; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				continue
			}
			r[fields[i+1]] = append(r[fields[i+1]], v)
		}
	}
	if err := sc.Err(); err != nil {
		log.Fatal(err)
	}
	if len(results) == 0 {
		log.Fatal("benchreport: no benchmark results on standard input")
	}
	for _, h := range header {
		fmt.Println(h)
	}
	runs := len(results["BenchmarkSync/pods=1000"]["ns/op"])
	fmt.Printf("(medians of %d runs)\n\n", runs)

	sizes := []int{3, 100, 1000, 5000}
	fmt.Printf("%-6s %12s %12s %9s %12s %12s %10s %12s\n", "pods", "request", "sync", "floor", "sync/floor", "alloc", "alloc/req", "sync/Pod")
	perPod := map[int]float64{}
	for _, n := range sizes {
		s, f := results[fmt.Sprintf("BenchmarkSync/pods=%d", n)], results[fmt.Sprintf("BenchmarkFloor/pods=%d", n)]
		if s == nil || f == nil {
			continue
		}
		ns, fns, req, alloc := s.median("ns/op"), f.median("ns/op"), s.median("req-B"), s.median("B/op")
		perPod[n] = ns / float64(n)
		fmt.Printf("%-6d %12s %12s %9s %11.2fx %12s %9.2fx %12s\n", n, bytes(req), dur(ns), dur(fns), ns/fns, bytes(alloc), alloc/req, dur(ns/float64(n)))
	}
	fmt.Println()

	s1000, f1000 := results["BenchmarkSync/pods=1000"], results["BenchmarkFloor/pods=1000"]
	s3 := results["BenchmarkSync/pods=3"]
	if s1000 != nil && f1000 != nil {
		fmt.Printf("goal: 1,000-Pod sync at most 2x the floor:       %.2fx\n", s1000.median("ns/op")/f1000.median("ns/op"))
	}
	if s3 != nil {
		fmt.Printf("goal: 3-Pod sync under 100µs:                    %s\n", dur(s3.median("ns/op")))
	}
	worst := 0.0
	for _, n := range sizes {
		if s := results[fmt.Sprintf("BenchmarkSync/pods=%d", n)]; s != nil {
			worst = max(worst, s.median("B/op")/s.median("req-B"))
		}
	}
	fmt.Printf("goal: allocated bytes at most 2x the request:    %.2fx at worst\n", worst)
	if perPod[100] > 0 && perPod[1000] > 0 && perPod[5000] > 0 {
		fmt.Printf("goal: linear in Pods (cost per Pod, vs 1,000):   100: %.2fx, 5,000: %.2fx\n", perPod[100]/perPod[1000], perPod[5000]/perPod[1000])
	}

	if parts := partsOf(results, "BenchmarkSyncParts/pods=1000/"); len(parts) > 0 {
		fmt.Println()
		fmt.Println("1,000-Pod sync by step (against the floor):")
		for _, p := range parts {
			fmt.Printf("  %-10s %12s %7.2fx %12s\n", p.name, dur(p.ns), p.ns/f1000.median("ns/op"), bytes(p.alloc))
		}
	}
	if parts := partsOf(results, "BenchmarkSyncParts/pods=3/"); len(parts) > 0 && results["BenchmarkFloor/pods=3"] != nil {
		fmt.Println("3-Pod sync by step (against the floor):")
		for _, p := range parts {
			fmt.Printf("  %-10s %12s %7.2fx %12s\n", p.name, dur(p.ns), p.ns/results["BenchmarkFloor/pods=3"].median("ns/op"), bytes(p.alloc))
		}
	}
	if choices := partsOf(results, "BenchmarkDecodeChoices/"); len(choices) > 0 && f1000 != nil {
		fmt.Println()
		fmt.Println("decoding a 1,000-Pod request, each way (against the floor):")
		for _, c := range choices {
			fmt.Printf("  %-22s %12s %7.2fx %12s\n", c.name, dur(c.ns), c.ns/f1000.median("ns/op"), bytes(c.alloc))
		}
	}
}

// part is one sub-benchmark under a prefix.
type part struct {
	name      string
	ns, alloc float64
}

// partsOf lists the sub-benchmarks under prefix, sorted by name for a
// stable report.
func partsOf(results map[string]result, prefix string) []part {
	var out []part
	for name, r := range results {
		if rest, ok := strings.CutPrefix(name, prefix); ok {
			out = append(out, part{name: rest, ns: r.median("ns/op"), alloc: r.median("B/op")})
		}
	}
	slices.SortFunc(out, func(a, b part) int { return strings.Compare(a.name, b.name) })
	return out
}

func dur(ns float64) string {
	switch {
	case ns >= 1e6:
		return fmt.Sprintf("%.2fms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.1fµs", ns/1e3)
	}
	return fmt.Sprintf("%.0fns", ns)
}

func bytes(b float64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.2f MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	}
	return fmt.Sprintf("%.0f B", b)
}
