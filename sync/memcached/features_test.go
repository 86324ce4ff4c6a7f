package memcached

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestFeatureMethods checks that every method declared on a feature is one
// of the feature interface's, and that each feature implements at least
// one. A feature embeds noFeature, so a method it meant to implement but
// misspelt (repot for report) would compile and never be called.
func TestFeatureMethods(t *testing.T) {
	iface := reflect.TypeFor[feature]()
	var want []string
	for i := range iface.NumMethod() {
		want = append(want, iface.Method(i).Name)
	}
	implemented := map[string][]string{}
	for _, f := range features {
		implemented[reflect.TypeOf(f).Name()] = nil
	}

	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, e.Name(), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 {
				continue
			}
			recv := fn.Recv.List[0].Type
			if star, ok := recv.(*ast.StarExpr); ok {
				recv = star.X
			}
			id, ok := recv.(*ast.Ident)
			if !ok {
				continue
			}
			if _, isFeature := implemented[id.Name]; !isFeature {
				continue
			}
			if !slices.Contains(want, fn.Name.Name) {
				t.Errorf("%s: feature %s has a method %s, which the feature interface does not have (%s): a misspelt name is never called",
					fset.Position(fn.Pos()), id.Name, fn.Name.Name, strings.Join(want, ", "))
			}
			implemented[id.Name] = append(implemented[id.Name], fn.Name.Name)
		}
	}
	for name, methods := range implemented {
		if len(methods) == 0 {
			t.Errorf("feature %s implements none of the feature interface's methods: it does nothing", name)
		}
	}
}
