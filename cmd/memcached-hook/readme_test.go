package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestREADMEListsEveryFlag checks the flags table of README.md against the
// flags the hook takes (as its -h prints them): one row each, none other,
// and each default as the hook has it.
func TestREADMEListsEveryFlag(t *testing.T) {
	var usage bytes.Buffer
	if _, err := parseFlags([]string{"memcached-hook", "-h"}, env(nil), &usage); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("parseFlags -h: %v, want flag.ErrHelp", err)
	}
	// PrintDefaults: "  -name [type]\n    \tusage (default value)".
	flagRE := regexp.MustCompile(`(?m)^  -([a-z-]+)(?: \S+)?\n\s+\t(.*)$`)
	defaultRE := regexp.MustCompile(`\(default (.*)\)$`)
	flags := map[string]string{}
	for _, m := range flagRE.FindAllStringSubmatch(usage.String(), -1) {
		def := ""
		if d := defaultRE.FindStringSubmatch(m[2]); d != nil {
			def = d[1]
			if u, err := strconv.Unquote(def); err == nil {
				def = u
			}
		}
		flags[m[1]] = def
	}
	if len(flags) < 10 {
		t.Fatalf("read only the flags %v from:\n%s", flags, usage.String())
	}

	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "| flag | default | meaning |")
	if !ok {
		t.Fatal("README.md has no flags table")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	rowRE := regexp.MustCompile("(?m)^\\| `--([a-z-]+)` \\|([^|]*)\\|")
	rows := map[string]string{}
	for _, m := range rowRE.FindAllStringSubmatch(table, -1) {
		rows[m[1]] = strings.TrimSpace(m[2])
	}
	for name, def := range flags {
		cell, ok := rows[name]
		switch {
		case !ok:
			t.Errorf("README.md has no row for --%s", name)
		case def == "" || def == "false":
			if cell != "none" && cell != "" {
				t.Errorf("README.md: --%s defaults to %s; it has none", name, cell)
			}
		case !strings.HasPrefix(strings.ToLower(cell), "`"+strings.ToLower(def)+"`"):
			t.Errorf("README.md: --%s defaults to %s; the hook's default is %s", name, cell, def)
		}
	}
	for name := range rows {
		if _, ok := flags[name]; !ok {
			t.Errorf("README.md has a row for --%s, which the hook does not take", name)
		}
	}
}
