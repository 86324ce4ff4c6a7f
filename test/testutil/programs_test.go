package testutil

import "testing"

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
