// Command apiref writes the Memcached API's reference, a table of every
// field of spec and status, into sync/api/v1alpha1/README.md between its
// markers, so that the reference says what the API server enforces and what
// kubectl explain shows, and cannot drift from it.
//
// It reads the CRD that make generate wrote (controller-gen, then apigen):
// each field's type, default, bounds, enum, the rules and their messages,
// and its description, which is the field's Go doc comment. The Go types
// (sync/api/v1alpha1) say which fields are the API's own and which are
// Kubernetes' types, shown as one row each ("as in a Pod spec"), and
// MemcachedSpec.Default says what the hook fills in that the CRD does not
// (the images). make generate runs it; make verify-generate and its test
// fail when the README is stale.
//
//	apiref --crd manifests/base/crd/cache.example.com_memcacheds.yaml --readme sync/api/v1alpha1/README.md
package main

import (
	"context"
	"io"

	"github.com/example/memcached-operator/cmd/internal/program"
)

func main() { program.Main("apiref", run) }

func run(_ context.Context, args []string, _ func(string) string, _, stderr io.Writer) error {
	fs := program.NewToolFlags("apiref --crd FILE --readme FILE", stderr)
	crdPath := fs.Required("crd", "the CRD `file` make generate wrote")
	readmePath := fs.Required("readme", "the README `file` whose generated part is rewritten in place")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ref, err := program.Transform(*crdPath, reference)
	if err != nil {
		return err
	}
	return program.Rewrite(*readmePath, func(readme []byte) ([]byte, error) { return splice(readme, ref) })
}
