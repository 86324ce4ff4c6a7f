package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/example/memcached-operator/cmd/internal/program"
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

	problems, err := program.FlagTableProblems("README.md", "| flag | default | meaning |", flags, func(cell, def string) string {
		switch {
		case def == "" || def == "false":
			if cell != "none" && cell != "" {
				return fmt.Sprintf("defaults to %s; it has none", cell)
			}
		case !strings.HasPrefix(strings.ToLower(cell), "`"+strings.ToLower(def)+"`"):
			return fmt.Sprintf("defaults to %s; the hook's default is %s", cell, def)
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}
