package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

func TestBenchmarkLine(t *testing.T) {
	tests := []struct {
		name   string
		bench  string
		format string
		args   []any
		want   string
	}{
		{name: "one value", bench: "BenchmarkKill", format: "%.1f ms", args: []any{16.04}, want: "BenchmarkKill 1 16.0 ms"},
		{name: "several values", bench: "BenchmarkHandoff/keepwarm/scale-down-4-to-3", format: "%.3f hit-ratio %d stale", args: []any{0.95, 0},
			want: "BenchmarkHandoff/keepwarm/scale-down-4-to-3 1 0.950 hit-ratio 0 stale"},
		{name: "a step's name with spaces", bench: "BenchmarkDiscovery/first list/status-to-client", format: "%.3f s", args: []any{0.25},
			want: "BenchmarkDiscovery/first-list/status-to-client 1 0.250 s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := BenchmarkLine(tt.bench, tt.format, tt.args...); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestBenchmarkLineRefusesOtherNames(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("a name without the Benchmark prefix was printed")
		}
	}()
	BenchmarkLine("Kill", "%d ms", 1)
}

// TestPrintBenchmarkLine checks that the lines are kept in the file
// $BENCHMARK_LINES names, each whole, after what was there.
func TestPrintBenchmarkLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lines.txt")
	if err := os.WriteFile(path, []byte("BenchmarkEarlier 1 1 s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvBenchmarkLines, path)
	Benchmark("BenchmarkKept/a b", "%d ms", 7)
	PrintBenchmarkLine("BenchmarkKept/c 1 2 s")
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "BenchmarkEarlier 1 1 s\nBenchmarkKept/a-b 1 7 ms\nBenchmarkKept/c 1 2 s\n"; string(got) != want {
		t.Errorf("the file holds %q, want %q", got, want)
	}
}
