//go:build linux

package handoff_test

import (
	"flag"
	"os"
	"testing"
)

// parallel is how many of the measurements run at once unless -parallel
// says: each waits on Pods that stop and copies that settle more than it
// computes, so four at once take about half the time of GOMAXPROCS (two
// on CI) at once; the figures they print are ratios within one run.
const parallel = "4"

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", parallel)
	}
	os.Exit(m.Run())
}
