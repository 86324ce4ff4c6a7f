// Command chartgen writes the Helm chart in manifests/helm from the
// kustomize manifests, so that the two cannot disagree: kustomize stays
// the one source, and the chart is what `kubectl apply -k manifests/`
// installs with each component of manifests/components behind a value.
//
// It builds the manifests with kubectl kustomize, alone and with each
// component, and compares each component's build with the base's as
// objects: what a component adds to a map or appends to a list is written
// inside {{- if .Values.<component>.enabled }}, what it replaces inside
// if/else, in the order the overlays apply components, so that any
// combination of components renders what the matching overlay builds
// (test/chart checks every one). The hook's image, resources, GOMEMLIMIT
// and Metacontroller's namespace become values, the namespace
// memcached-operator the release's. The Namespace object is not in the
// chart: it carries the restricted Pod Security label, which `helm
// install --create-namespace` cannot set, so it is applied first. The CRD
// files are copied into crds/, as Helm's convention has it. make chart
// runs it:
//
//	chartgen --kubectl .cache/bin/kubectl --manifests manifests --chart manifests/helm/memcached-operator
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/example/memcached-operator/cmd/internal/program"
)

func main() { program.Main("chartgen", run) }

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := program.NewToolFlags("chartgen [flags]", stderr)
	kubectl := fs.String("kubectl", getenv("KUBECTL_BIN"), "the kubectl `program` whose kustomize builds the manifests (default $KUBECTL_BIN)")
	manifests := fs.String("manifests", "manifests", "the kustomize `directory` the chart installs; its components/ and overlays/ are read too")
	chart := fs.String("chart", "manifests/helm/memcached-operator", "the chart's `directory`, whose name is the chart's; its README.md must have a values section")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *kubectl == "" {
		return errors.New("no kubectl: pass --kubectl or set KUBECTL_BIN (make chart does)")
	}
	files, err := generateChart(ctx, *kubectl, *manifests, *chart)
	if err != nil {
		return err
	}
	if err := write(*chart, files); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "chartgen: wrote %d files into %s\n", len(files), *chart)
	return nil
}

// generateChart makes the chart for the chart directory chart from the
// manifests directory.
func generateChart(ctx context.Context, kubectl, manifests, chart string) (generated, error) {
	abs, err := filepath.Abs(manifests)
	if err != nil {
		return nil, err
	}
	readme, err := os.ReadFile(filepath.Join(chart, "README.md"))
	if err != nil {
		return nil, err
	}
	g := generator{
		k:      kustomizer{kubectl: kubectl, manifests: abs},
		name:   filepath.Base(filepath.Clean(chart)),
		readme: readme,
	}
	return g.generate(ctx)
}

// generatedDirs are the chart's directories that hold only generated
// files: a file there that generate did not write is removed.
var generatedDirs = []string{"crds", "templates"}

// write writes the files into the chart's directory, and removes from its
// generated directories what is no longer generated.
func write(chart string, files generated) error {
	extra, err := notGenerated(chart, files)
	if err != nil {
		return err
	}
	for _, rel := range extra {
		if err := os.Remove(filepath.Join(chart, filepath.FromSlash(rel))); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		p := filepath.Join(chart, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, files[name], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// stale lists how the chart's directory differs from files: the files that
// differ or are missing, and the files in its generated directories that
// are not generated.
func stale(chart string, files generated) ([]string, error) {
	var problems []string
	for _, name := range slices.Sorted(maps.Keys(files)) {
		have, err := os.ReadFile(filepath.Join(chart, filepath.FromSlash(name)))
		switch {
		case errors.Is(err, os.ErrNotExist):
			problems = append(problems, name+" is missing")
		case err != nil:
			return nil, err
		case string(have) != string(files[name]):
			problems = append(problems, name+" differs")
		}
	}
	extra, err := notGenerated(chart, files)
	if err != nil {
		return nil, err
	}
	for _, rel := range extra {
		problems = append(problems, rel+" is not generated")
	}
	return problems, nil
}

// notGenerated lists the files in the chart's generated folders that are
// not among files (slash-separated, relative to chart): what write removes
// and verify reports.
func notGenerated(chart string, files generated) ([]string, error) {
	var extra []string
	for _, dir := range generatedDirs {
		err := filepath.WalkDir(filepath.Join(chart, dir), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, err := filepath.Rel(chart, p)
			if err != nil {
				return err
			}
			if _, ok := files[filepath.ToSlash(rel)]; !ok {
				extra = append(extra, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	return extra, nil
}
