package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/test/testutil"
)

var (
	crdPath    = filepath.Join(testutil.Root(), "manifests", "base", "crd", "cache.example.com_memcacheds.yaml")
	readmePath = filepath.Join(testutil.Root(), "sync", "api", "v1alpha1", "README.md")
)

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReadmeIsCurrent fails when the reference in the API's README is not
// what the committed CRD generates. (make verify-generate also checks the
// CRD against the Go types, so together the README follows the types.)
func TestReadmeIsCurrent(t *testing.T) {
	ref, err := reference(read(t, crdPath))
	if err != nil {
		t.Fatal(err)
	}
	readme := read(t, readmePath)
	got, err := splice(readme, ref)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, readme) {
		want, have := strings.Split(string(got), "\n"), strings.Split(string(readme), "\n")
		for i := 0; i < len(want) || i < len(have); i++ {
			w, h := line(want, i), line(have, i)
			if w != h {
				t.Fatalf("sync/api/v1alpha1/README.md is stale: run make generate. First difference, line %d:\n got: %s\nwant: %s", i+1, h, w)
			}
		}
	}
}

func line(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "(end of file)"
}

// TestReferenceStatesTheSettings reads the committed reference's rows and
// checks them against what the Go code states: a row for every field of
// the types and none other, each setting's default and bounds as
// settings.go has them, and the defaults the hook fills in.
func TestReferenceStatesTheSettings(t *testing.T) {
	rows := readmeRows(t, string(read(t, readmePath)))
	fields := goFields(reflect.TypeFor[v1alpha1.MemcachedSpec](), "spec")
	for _, f := range fields {
		if _, ok := rows[f]; !ok {
			t.Errorf("the reference has no row for %s", f)
		}
	}
	for f := range rows {
		if !slices.Contains(fields, f) {
			t.Errorf("the reference has a row for %s, which the Go types do not have", f)
		}
	}
	for _, st := range v1alpha1.Settings {
		row, ok := rows["spec."+st.Field()]
		if !ok {
			t.Errorf("the reference has no row for spec.%s", st.Field())
			continue
		}
		var wantDefault string
		var wantAllowed []string
		switch s := st.(type) {
		case v1alpha1.IntSetting:
			wantDefault = fmt.Sprintf("`%d`", s.Default)
			wantAllowed = []string{fmt.Sprintf("from %d to %d", s.Min, s.Max)}
		case v1alpha1.QuantitySetting:
			wantDefault = "`" + s.Default.String() + "`"
			for _, b := range []int64{s.Step, s.Min, s.Max} {
				wantAllowed = append(wantAllowed, resource.NewQuantity(b, resource.BinarySI).String())
			}
		default:
			t.Fatalf("a setting of type %T", st)
		}
		if row.def != wantDefault {
			t.Errorf("spec.%s: default %s, settings.go says %s", st.Field(), row.def, wantDefault)
		}
		for _, w := range wantAllowed {
			if !strings.Contains(row.values, w) {
				t.Errorf("spec.%s: allowed %q does not say %s", st.Field(), row.values, w)
			}
		}
	}
	spec := fullSpec()
	spec.Default()
	for field, want := range map[string]string{
		"spec.image": spec.Image, "spec.metrics.image": spec.Metrics.Image, "spec.livenessCheck": string(spec.LivenessCheck),
		"spec.tls.clientCertificates": string(spec.TLS.ClientCertificates), "spec.tls.minVersion": `"` + spec.TLS.MinVersion + `"`,
		"spec.auth.mode": string(spec.Auth.Mode),
	} {
		if got, want := rows[field].def, "`"+want+"` *(hook)*"; got != want {
			t.Errorf("%s: default %s, the hook's is %s", field, got, want)
		}
	}
}

// fullSpec is a spec with every optional struct present.
func fullSpec() v1alpha1.MemcachedSpec {
	return v1alpha1.MemcachedSpec{
		Memcached:     &v1alpha1.MemcachedConfig{},
		Metrics:       &v1alpha1.MetricsSpec{ServiceMonitor: &v1alpha1.ServiceMonitorSpec{}},
		TLS:           &v1alpha1.TLSSpec{},
		Auth:          &v1alpha1.AuthSpec{},
		NetworkPolicy: &v1alpha1.NetworkPolicySpec{Memcached: &v1alpha1.Peers{}, Metrics: &v1alpha1.Peers{}},
	}
}

// goFields lists the JSON paths of t's fields, and of the fields of the
// API's own structs among them; Kubernetes' types are one field each.
func goFields(t reflect.Type, path string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		out = append(out, path+"."+name)
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft.PkgPath() == t.PkgPath() {
			out = append(out, goFields(ft, path+"."+name)...)
		}
	}
	return out
}

// readmeRows reads the reference's spec table: field to its row.
func readmeRows(t *testing.T, readme string) map[string]row {
	t.Helper()
	rowRE := regexp.MustCompile("(?m)^\\| `(spec\\.[^`]+)` \\| (.*?) \\| (.*?) \\| (.*?) \\| (.*) \\|$")
	rows := map[string]row{}
	for _, m := range rowRE.FindAllStringSubmatch(readme, -1) {
		if _, dup := rows[m[1]]; dup {
			t.Errorf("the reference has %s twice", m[1])
		}
		rows[m[1]] = row{path: m[1], typ: m[2], def: m[3], values: m[4], meaning: m[5]}
	}
	if len(rows) == 0 {
		t.Fatal("the reference has no spec rows")
	}
	return rows
}

// TestReferenceRefusesADifferentCRD checks that the generator refuses a
// CRD that does not match the Go types, rather than writing a reference of
// fields that do not exist or leaving some out.
func TestReferenceRefusesADifferentCRD(t *testing.T) {
	tests := []struct {
		name   string
		change func(spec map[string]any)
		want   string
	}{
		{"a field the types have is missing", func(spec map[string]any) {
			delete(props(spec), "size")
		}, "the CRD has no spec.size"},
		{"a field the types lack", func(spec map[string]any) {
			props(spec)["sise"] = map[string]any{"type": "integer"}
		}, "the CRD has spec.sise, which the Go types do not"},
		{"a nested field is missing", func(spec map[string]any) {
			delete(props(props(spec)["tls"].(map[string]any)), "minVersion")
		}, "the CRD has no spec.tls.minVersion"},
		{"a default the hook disagrees with", func(spec map[string]any) {
			props(props(spec)["memcached"].(map[string]any))["threads"].(map[string]any)["default"] = 5
		}, "spec.memcached.threads: the CRD defaults to 5, the hook to 4"},
		{"a rule blaming a field that does not exist", func(spec map[string]any) {
			spec["x-kubernetes-validations"] = []any{map[string]any{"rule": "true", "message": "m", "fieldPath": ".nothing"}}
		}, "a rule blames spec.nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var crd map[string]any
			if err := yaml.Unmarshal(read(t, crdPath), &crd); err != nil {
				t.Fatal(err)
			}
			root := crd["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)
			tt.change(props(root)["spec"].(map[string]any))
			_, err := reference(testutil.MustMarshal(t, crd))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("reference: %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

func props(node map[string]any) map[string]any { return node["properties"].(map[string]any) }

func TestSplice(t *testing.T) {
	tests := []struct {
		name, readme, want, wantErr string
	}{
		{"replaces what lies between the markers",
			"# API\n\nprose\n<!-- BEGIN GENERATED old -->\nold table\n" + endMarker + "\nmore prose\n",
			"# API\n\nprose\n" + beginMarker + "\n\nnew table\n\n" + endMarker + "\nmore prose\n", ""},
		{"no markers", "# API\n", "", "want one line starting"},
		{"two begin markers", "<!-- BEGIN GENERATED -->\n<!-- BEGIN GENERATED -->\n" + endMarker + "\n", "", "found 2"},
		{"no end marker", "<!-- BEGIN GENERATED -->\n", "", endMarker},
		{"end before begin", endMarker + "\n<!-- BEGIN GENERATED -->\n", "", "comes before"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := splice([]byte(tt.readme), "new table\n")
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("splice: %v, want an error saying %q", err, tt.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case string(got) != tt.want:
				t.Errorf("splice =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// TestRun runs the command on a copy of the README: it rewrites the
// generated part, and a second run changes nothing, byte for byte.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	readme := filepath.Join(dir, "README.md")
	if err := os.WriteFile(readme, []byte("# API\n\n<!-- BEGIN GENERATED -->\n"+endMarker+"\n\nprose\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"apiref", "--crd", crdPath, "--readme", readme}
	if err := run(context.Background(), args, os.Getenv, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	first := read(t, readme)
	if !bytes.Contains(first, []byte("| `spec.memcached.maxMemoryMB` | integer | `64` |")) || !bytes.HasSuffix(first, []byte(endMarker+"\n\nprose\n")) {
		t.Errorf("run wrote:\n%s", first)
	}
	if err := run(context.Background(), args, os.Getenv, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if second := read(t, readme); !bytes.Equal(first, second) {
		t.Error("a second run changed the README")
	}

	var stderr bytes.Buffer
	if err := run(context.Background(), []string{"apiref", "--crd", crdPath}, os.Getenv, io.Discard, &stderr); err == nil || !strings.Contains(err.Error(), "usage") {
		t.Errorf("run without --readme: %v, want a usage error", err)
	}
}
