package testutil

import (
	"go/scanner"
	"go/token"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestLoopbackBlocks holds the table of loopback blocks to what makes it
// worth having: each block a /24 of 127/8 apart from 127.0.0.0/24 (where
// every package listens on ports the kernel picks), no two overlapping,
// each named after a package of the module.
func TestLoopbackBlocks(t *testing.T) {
	loopbackNet, shared := netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("127.0.0.0/24")
	names := make([]string, 0, len(loopbackBlocks))
	for name := range loopbackBlocks {
		names = append(names, name)
	}
	slices.Sort(names)
	for i, name := range names {
		p, err := netip.ParsePrefix(loopbackBlocks[name])
		switch {
		case err != nil:
			t.Errorf("%s: %v", name, err)
			continue
		case p.Bits() != 24 || p.Masked() != p || !loopbackNet.Contains(p.Addr()) || p.Overlaps(shared):
			t.Errorf("%s: %s, want a /24 of 127.0.0.0/8 other than 127.0.0.0/24", name, p)
		}
		for _, other := range names[i+1:] {
			if q, err := netip.ParsePrefix(loopbackBlocks[other]); err == nil && p.Overlaps(q) {
				t.Errorf("%s (%s) and %s (%s) overlap", name, p, other, q)
			}
		}
		dir, _, _ := strings.Cut(name, " ")
		if fi, err := os.Stat(filepath.Join(Root(), dir)); err != nil || !fi.IsDir() {
			t.Errorf("%s: no package %s in the module", name, dir)
		}
	}
	if got, want := Loopback("test/proxy").IP(200), strings.TrimSuffix(loopbackBlocks["test/proxy"], "0/24")+"200"; got != want {
		t.Errorf("Loopback(test/proxy).IP(200) = %s, want %s", got, want)
	}
}

// loopbackLiteral is a loopback address, or the start of a format for
// one, outside 127.0.0.0/24.
var loopbackLiteral = regexp.MustCompile(`(^|[^0-9.])127\.(\d+|%\w)\.(\d+|%\w)\.`)

// TestLoopbackBlocksHaveOneHome checks that no Go string in the module
// names a loopback address outside 127.0.0.0/24 but the table's: a
// package that picked a block of its own in its own file would meet
// another that does the same, unseen until both run at once.
func TestLoopbackBlocksHaveOneHome(t *testing.T) {
	root := Root()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || filepath.Dir(path) == filepath.Join(root, "test", "testutil") && strings.HasPrefix(d.Name(), "loopback") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		var s scanner.Scanner
		s.Init(fset.AddFile(path, -1, len(src)), src, nil, 0)
		for {
			pos, tok, lit := s.Scan()
			if tok == token.EOF {
				return nil
			}
			if tok != token.STRING {
				continue
			}
			if m := loopbackLiteral.FindStringSubmatch(lit); m != nil && !(m[2] == "0" && m[3] == "0") {
				rel, _ := filepath.Rel(root, fset.Position(pos).Filename)
				t.Errorf("%s:%d: %s names a loopback address of its own: take it from testutil.Loopback (test/testutil/loopback.go)", rel, fset.Position(pos).Line, lit)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}
