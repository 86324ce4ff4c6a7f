package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestREADMEListsEveryFlag checks the flags table of README.md against the
// flags the agent takes (as its --help prints them): a row names each, and
// none other, and where the agent has a default the row gives it.
func TestREADMEListsEveryFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"memcached-agent", "--help"}, env(nil), &stdout, &stderr); err != nil {
		t.Fatalf("run(--help) = %v", err)
	}
	// PrintDefaults: "  -name [type]\n    \tusage (default value)".
	flagRE := regexp.MustCompile(`(?m)^  -([a-z-]+)(?: \S+)?\n\s+\t(.*)$`)
	defaultRE := regexp.MustCompile(`\(default (.*)\)$`)
	flags := map[string]string{}
	for _, m := range flagRE.FindAllStringSubmatch(stderr.String(), -1) {
		def := ""
		if d := defaultRE.FindStringSubmatch(m[2]); d != nil {
			def = d[1]
			if u, err := strconv.Unquote(def); err == nil {
				def = u
			}
		}
		flags[m[1]] = def
	}
	if len(flags) < 20 {
		t.Fatalf("read only the flags %v from:\n%s", flags, stderr.String())
	}

	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "| flag | default | what |")
	if !ok {
		t.Fatal("README.md has no flags table")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	// A row names one flag or several ("`--tls-cert-file`, `--tls-key-file`").
	rowRE := regexp.MustCompile(`(?m)^\| ([^|]*) \|([^|]*)\|`)
	nameRE := regexp.MustCompile("`--([a-z-]+)[^`]*`")
	rows := map[string]string{}
	for _, m := range rowRE.FindAllStringSubmatch(table, -1) {
		for _, n := range nameRE.FindAllStringSubmatch(m[1], -1) {
			rows[n[1]] = strings.TrimSpace(m[2])
		}
	}
	for name, def := range flags {
		cell, ok := rows[name]
		switch {
		case !ok:
			t.Errorf("README.md has no row for --%s", name)
		case def == "" || def == "false":
		case !sameDefault(cell, def):
			t.Errorf("README.md: --%s defaults to %s; the agent's default is %s", name, cell, def)
		}
	}
	for name := range rows {
		if _, ok := flags[name]; !ok {
			t.Errorf("README.md has a row for --%s, which the agent does not take", name)
		}
	}
}

// sameDefault tells whether a README cell begins with def, in backquotes
// and in any case (durations compared as durations: `10m` is 10m0s).
func sameDefault(cell, def string) bool {
	if strings.HasPrefix(strings.ToLower(cell), "`"+strings.ToLower(def)+"`") {
		return true
	}
	quoted, _, _ := strings.Cut(strings.TrimPrefix(cell, "`"), "`")
	a, errA := time.ParseDuration(quoted)
	b, errB := time.ParseDuration(def)
	return errA == nil && errB == nil && a == b
}
