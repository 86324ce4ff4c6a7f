package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Unavailable skips t for what this machine lacks (msg names it, and how
// to get it), or fails t when the environment sets CI: make test and CI
// run every test, and a skip there would pass a test that never ran.
func Unavailable(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(msg + " (CI is set, so this is an error)")
	}
	t.Skip(msg)
}

// Program is the real program a test runs, at the path environment
// variable env names (make test builds it into .cache and sets env), or
// Unavailable naming what it is and what is wrong.
func Program(t testing.TB, env, what string) string {
	t.Helper()
	path, problem := ProgramAt(os.Getenv, env)
	if problem == "" {
		return path
	}
	Unavailable(t, fmt.Sprintf("no %s: %s (make test builds it and sets %s; make test-tools builds the tools alone)", what, problem, env))
	return ""
}

// ProgramAt is the program at the path environment variable env names
// (through getenv), or what is wrong with it: the variable is not set, or
// nothing is there.
func ProgramAt(getenv func(string) string, env string) (path, problem string) {
	path = getenv(env)
	switch _, err := os.Stat(path); {
	case path == "":
		return "", env + " is not set"
	case err != nil:
		return "", fmt.Sprintf("%s=%s: %v", env, path, err)
	}
	return path, ""
}

// Installed is a program the machine must have on its PATH (git, node),
// or Unavailable saying what the test needs it for.
func Installed(t testing.TB, name, forWhat string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		Unavailable(t, fmt.Sprintf("no %s on PATH: %s", name, forWhat))
	}
	return path
}

// Benchmark prints a figure a test measured as a line benchstat reads,
// "BenchmarkName 1 VALUE UNIT [VALUE UNIT]...", with PrintBenchmarkLine.
// name is the whole benchmark name, Benchmark included (the READMEs and
// BENCHMARKS.md quote it); format and args are the values and their
// units. A figure is printed, never asserted: a loaded machine is slower.
// A real benchmark (testing.B) reports with b.ReportMetric instead.
func Benchmark(name, format string, args ...any) {
	PrintBenchmarkLine(BenchmarkLine(name, format, args...))
}

// EnvBenchmarkLines names the file PrintBenchmarkLine appends each line
// to. go test shows a passing package's output only with -v, so make test
// sets it and prints the file once the tests end.
const EnvBenchmarkLines = "BENCHMARK_LINES"

// PrintBenchmarkLine prints a benchmark line on the standard output (not
// wrapped in t.Log's file and line) and appends it to the file
// $BENCHMARK_LINES names, if it names one: one write of a whole line,
// which the packages go test runs at once append to without interleaving.
func PrintBenchmarkLine(line string) {
	fmt.Println(line)
	path := os.Getenv(EnvBenchmarkLines)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err == nil {
		_, err = f.WriteString(line + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "testutil: keeping a benchmark line in $%s: %v\n", EnvBenchmarkLines, err)
	}
}

// BenchmarkLine is the line Benchmark prints, for a test that collects its
// figures and prints them at the end. Spaces in name (a step's name) become
// dashes: benchstat ends the name at the first space.
func BenchmarkLine(name, format string, args ...any) string {
	if !strings.HasPrefix(name, "Benchmark") {
		panic(fmt.Sprintf("testutil.Benchmark: %q is no benchmark name (Benchmark...)", name))
	}
	return strings.Join(strings.Fields(name), "-") + " 1 " + fmt.Sprintf(format, args...)
}
