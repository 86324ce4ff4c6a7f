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
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/example/memcached-operator/cmd/internal/program"
)

func main() { program.Main("apiref", run) }

func run(_ context.Context, args []string, _ func(string) string, _, stderr io.Writer) error {
	fs := flag.NewFlagSet("apiref", flag.ContinueOnError)
	fs.SetOutput(stderr)
	crdPath := fs.String("crd", "", "the CRD `file` make generate wrote")
	readmePath := fs.String("readme", "", "the README `file` whose generated part is rewritten in place")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *crdPath == "" || *readmePath == "" || fs.NArg() > 0 {
		return errors.New("usage: apiref --crd FILE --readme FILE")
	}
	crd, err := os.ReadFile(*crdPath)
	if err != nil {
		return err
	}
	ref, err := reference(crd)
	if err != nil {
		return fmt.Errorf("%s: %w", *crdPath, err)
	}
	readme, err := os.ReadFile(*readmePath)
	if err != nil {
		return err
	}
	out, err := splice(readme, ref)
	if err != nil {
		return fmt.Errorf("%s: %w", *readmePath, err)
	}
	if bytes.Equal(out, readme) {
		return nil
	}
	return os.WriteFile(*readmePath, out, 0o644)
}
