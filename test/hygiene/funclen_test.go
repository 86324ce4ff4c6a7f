package hygiene

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/example/memcached-operator/test/testutil"
)

// maxFuncLines bounds a function of the operator's code (sync/ and cmd/),
// from its func keyword to its closing brace: one a reader can hold (issue
// #33 aims at about 80; Assign, copier.once, Runner.copy and
// forwarder.forward ran to 100 to 262 before they were cut into phases,
// chartgen's generate to 191).
const maxFuncLines = 100

// aimFuncLines is what a function should keep to: one past it is logged.
const aimFuncLines = 80

// checkedRoots are the trees whose every package the length test reads.
var checkedRoots = []string{"sync", "cmd"}

// TestFunctionLength checks that no function of the operator's code, every
// package under sync/ and cmd/, is longer than maxFuncLines. Tests and
// generated code (zz_generated*.go, or a file that says it is generated)
// are left out: no reader holds them.
func TestFunctionLength(t *testing.T) {
	root := testutil.Root()
	fset := token.NewFileSet()
	for _, top := range checkedRoots {
		checked := map[string]int{} // functions by package directory
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() {
				// Go builds none of these: test data, and what is hidden.
				if name := e.Name(); path != filepath.Join(root, top) && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
					return filepath.SkipDir
				}
				return nil
			}
			if !checkedFile(e.Name()) {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution|parser.ParseComments)
			if err != nil {
				return err
			}
			if ast.IsGenerated(f) {
				return nil
			}
			rel, _ := filepath.Rel(root, path)
			dir := filepath.Dir(rel)
			if _, seen := checked[dir]; !seen {
				checked[dir] = 0
			}
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				checked[dir]++
				switch n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; {
				case n > maxFuncLines:
					t.Errorf("%s: %s is %d lines long, more than %d: cut it into steps a reader can hold", rel, funcName(fn), n, maxFuncLines)
				case n > aimFuncLines:
					t.Logf("%s: %s is %d lines long, more than the %d aimed at", rel, funcName(fn), n, aimFuncLines)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// A walk that found nothing (a moved tree, a wrong root) would
		// pass whatever the code holds.
		if len(checked) == 0 {
			t.Errorf("%s: no package found", top)
		}
		for dir, n := range checked {
			if n == 0 {
				t.Logf("%s: no function", dir)
			}
		}
	}
}

// checkedFile tells whether the length test reads a file: Go source, not
// a test and not generated.
func checkedFile(name string) bool {
	return strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") && !strings.HasPrefix(name, "zz_generated")
}

// funcName is a function's name as a reader looks it up: Recv.Name.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	recv := fn.Recv.List[0].Type
	if star, ok := recv.(*ast.StarExpr); ok {
		recv = star.X
	}
	if idx, ok := recv.(*ast.IndexExpr); ok {
		recv = idx.X
	}
	if id, ok := recv.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}
