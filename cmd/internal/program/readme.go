package program

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
)

// FlagTableProblems compares the flags table of a program's README at path
// with flags, each flag the program takes to its default, so that the
// README lists every flag and its default: it says which flag has no row,
// which row names no flag, and what wrong finds wrong in a row's default
// cell ("" when the cell gives def). Each program's tests call it.
func FlagTableProblems(path, header string, flags map[string]string, wrong func(cell, def string) string) ([]string, error) {
	rows, err := flagTable(path, header)
	if err != nil {
		return nil, err
	}
	var problems []string
	for name, def := range flags {
		cell, ok := rows[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s has no row for --%s", path, name))
		} else if p := wrong(cell, def); p != "" {
			problems = append(problems, fmt.Sprintf("%s: --%s %s", path, name, p))
		}
	}
	for name := range rows {
		if _, ok := flags[name]; !ok {
			problems = append(problems, fmt.Sprintf("%s has a row for --%s, which the program does not take", path, name))
		}
	}
	slices.Sort(problems)
	return problems, nil
}

// flagTable reads the flags table of the README at path (the rows after
// the line header, up to the first blank line): each flag a row names in
// its first cell (every `--name ...`) to the row's second cell, the
// default, trimmed.
func flagTable(path, header string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	_, table, ok := strings.Cut(string(b), header)
	if !ok {
		return nil, fmt.Errorf("%s has no flags table (no line %q)", path, header)
	}
	table, _, _ = strings.Cut(table, "\n\n")
	rowRE := regexp.MustCompile(`(?m)^\| ([^|]*) \|([^|]*)\|`)
	nameRE := regexp.MustCompile("`--([a-z-]+)[^`]*`")
	rows := map[string]string{}
	for _, m := range rowRE.FindAllStringSubmatch(table, -1) {
		for _, n := range nameRE.FindAllStringSubmatch(m[1], -1) {
			rows[n[1]] = strings.TrimSpace(m[2])
		}
	}
	return rows, nil
}
