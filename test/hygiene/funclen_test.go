package hygiene

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/example/memcached-operator/test/testutil"
)

// maxFuncLines bounds a function of the hand-off's packages, from its func
// keyword to its closing brace: one a reader can hold (issue #33 aims at
// about 80; Assign, copier.once, Runner.copy and forwarder.forward ran to
// 100 to 262 before they were cut into phases).
const maxFuncLines = 100

// aimFuncLines is what a function should keep to: one past it is logged.
const aimFuncLines = 80

// TestFunctionLength checks that no function in the packages a hand-off
// runs through (the slot table, the hook's logic, the agent's copies) is
// longer than maxFuncLines.
func TestFunctionLength(t *testing.T) {
	root := testutil.Root()
	for _, dir := range []string{"sync/slots", "sync/memcached", "cmd/memcached-agent/internal/handoff"} {
		entries, err := os.ReadDir(filepath.Join(root, dir))
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		checked := 0
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
				continue
			}
			path := filepath.Join(root, dir, e.Name())
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				checked++
				switch n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; {
				case n > maxFuncLines:
					t.Errorf("%s/%s: %s is %d lines long, more than %d: cut it into steps a reader can hold", dir, e.Name(), funcName(fn), n, maxFuncLines)
				case n > aimFuncLines:
					t.Logf("%s/%s: %s is %d lines long, more than the %d aimed at", dir, e.Name(), funcName(fn), n, aimFuncLines)
				}
			}
		}
		if checked == 0 {
			t.Errorf("%s: no function found", dir)
		}
	}
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
