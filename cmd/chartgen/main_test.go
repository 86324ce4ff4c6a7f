package main

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/example/memcached-operator/test/testutil"
)

const (
	manifestsDir = "../../manifests"
	chartDir     = "../../manifests/helm/memcached-operator"
)

// TestChartIsUpToDate fails when the committed chart is not what make
// chart generates from the manifests now, and checks that generating
// twice gives the same bytes.
func TestChartIsUpToDate(t *testing.T) {
	kubectl := testutil.Program(t, "KUBECTL_BIN", "kubectl")
	ctx := context.Background()
	files, err := generateChart(ctx, kubectl, manifestsDir, chartDir)
	if err != nil {
		t.Fatal(err)
	}
	problems, err := stale(chartDir, files)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Errorf("the chart in manifests/helm is stale: run `make chart`:\n  %s", strings.Join(problems, "\n  "))
	}

	again, err := generateChart(ctx, kubectl, manifestsDir, chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.EqualFunc(files, again, bytes.Equal) {
		t.Error("two runs generated different charts")
	}
}

// TestRunWrites runs the command into a copy of the chart's directory: it
// writes the chart and removes a template that is no longer generated.
func TestRunWrites(t *testing.T) {
	kubectl := testutil.Program(t, "KUBECTL_BIN", "kubectl")
	dir := filepath.Join(t.TempDir(), "memcached-operator")
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	leftover := filepath.Join(dir, "templates", "gone.yaml")
	if err := os.MkdirAll(filepath.Dir(leftover), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"README.md": readme, "templates/gone.yaml": []byte("kind: Gone\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var stdout, stderr bytes.Buffer
	args := []string{"chartgen", "--kubectl", kubectl, "--manifests", manifestsDir, "--chart", dir}
	if err := run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Errorf("templates/gone.yaml is still there (%v)", err)
	}
	for _, name := range []string{"Chart.yaml", "values.yaml", "values.schema.json", "templates/hook/deployment.yaml", "crds/cache.example.com_memcacheds.yaml"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Error(err)
			continue
		}
		want, err := os.ReadFile(filepath.Join(chartDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the committed one", name)
		}
	}
}

func TestRunRefuses(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		getenv  map[string]string
		wantErr string
	}{
		{name: "no kubectl", args: []string{}, wantErr: "no kubectl"},
		{name: "arguments", args: []string{"--kubectl", "kubectl", "extra"}, wantErr: `unexpected arguments ["extra"]`},
		{name: "no README", args: []string{"--kubectl", "kubectl", "--chart", "testdata/none"}, wantErr: "README.md"},
		{name: "unknown flag", args: []string{"--kubeconfig", "x"}, wantErr: "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), append([]string{"chartgen"}, tt.args...), func(k string) string { return tt.getenv[k] }, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("run(%q) = %v, want an error containing %q", tt.args, err, tt.wantErr)
			}
		})
	}
}

// TestReadmeValues checks that the README's values section is rewritten
// in place and that a README without one is an error.
func TestReadmeValues(t *testing.T) {
	values := []value{
		{key: "image", doc: "The image.", def: map[string]any{"repository": "r", "tag": "t"}, fields: map[string]string{"tag": "Its tag."}},
		{key: "tls", doc: "Serves TLS.\n\nNeeds a Secret:\n  kubectl create secret x", def: map[string]any{"enabled": false}, component: component{dir: "tls", key: "tls"}},
	}
	g := generator{readme: []byte("# Title\n\n" + readmeBegin + "\nold\n" + readmeEnd + "\n\nAfter.\n")}
	got, err := g.readmeValues(values)
	if err != nil {
		t.Fatal(err)
	}
	want := "# Title\n\n" + readmeBegin + "\n" +
		"| value | default | what it does |\n| --- | --- | --- |\n" +
		"| `image.repository` | `r` | The image. |\n" +
		"| `image.tag` | `t` | Its tag. |\n" +
		"| `tls.enabled` | `false` | Serves TLS. |\n" +
		"\n### `tls.enabled` (components/tls)\n\nServes TLS.\n\nNeeds a Secret:\n\n```sh\nkubectl create secret x\n```\n" +
		readmeEnd + "\n\nAfter.\n"
	if string(got) != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}

	g.readme = []byte("# No section\n")
	if _, err := g.readmeValues(values); err == nil || !strings.Contains(err.Error(), "no values section") {
		t.Errorf("got error %v, want one saying the README has no values section", err)
	}
}
