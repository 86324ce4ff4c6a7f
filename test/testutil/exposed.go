package testutil

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ExposedNames are the names of the series in a /metrics answer in
// Prometheus's text format that start with prefix, sorted: each family's name; a histogram's as
// name_bucket, name_sum and name_count, a summary's as name, name_sum and
// name_count, as Prometheus stores them.
func ExposedNames(tb testing.TB, text []byte, prefix string) []string {
	tb.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		tb.Fatalf("parsing /metrics: %v", err)
	}
	var names []string
	for name, f := range families {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			names = append(names, name+"_bucket", name+"_sum", name+"_count")
		case dto.MetricType_SUMMARY:
			names = append(names, name, name+"_sum", name+"_count")
		default:
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// ExposedNamesFile is where the names program's /metrics shows are kept
// (one a line), for test/monitoring, which holds the alerts' and the
// dashboard's metric names to them.
func ExposedNamesFile(program string) string {
	return filepath.Join(Root(), "test", "monitoring", "testdata", "exposed", program+".txt")
}

// CheckExposedNames compares the names starting with prefix (the
// program's own: the Go runtime's change with Go's version) of the series
// in a /metrics answer of program, scraped by a test that runs it, with
// ExposedNamesFile(program), or under -update rewrites that file: so a
// metric renamed or removed shows here, and the rules and panels that read
// it fail test/monitoring.
func CheckExposedNames(tb testing.TB, program, prefix string, text []byte) {
	tb.Helper()
	GoldenBytes(tb, ExposedNamesFile(program), []byte(strings.Join(ExposedNames(tb, text, prefix), "\n")+"\n"))
}
