package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/cmd/internal/program"
)

// TestREADMEListsEveryFlag checks the flags table of README.md against the
// flags the agent takes: a row names each, and none other, and where the
// agent has a default the row gives it.
func TestREADMEListsEveryFlag(t *testing.T) {
	cfg, err := parseFlags([]string{"memcached-agent", "--memcached=cache", "--from-file=/x"}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	flags := map[string]string{}
	cfg.VisitAll(func(f *flag.Flag) { flags[f.Name] = f.DefValue })

	problems, err := program.FlagTableProblems("README.md", "| flag | default | what |", flags, func(cell, def string) string {
		if def != "" && def != "false" && !sameDefault(cell, def) {
			return fmt.Sprintf("defaults to %s; the agent's default is %s", cell, def)
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
