package v1alpha1

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// readme is the README.
func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// readmeRows reads the README's spec table: field (without backticks) to
// its default and meaning columns.
func readmeRows(t *testing.T) map[string][2]string {
	t.Helper()
	_, section, ok := strings.Cut(readme(t), "\n### spec\n")
	if !ok {
		t.Fatal("README has no ### spec section")
	}
	section, _, _ = strings.Cut(section, "\n### ")
	rows := map[string][2]string{}
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\| (.*?) \\| (.*) \\|$")
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		if _, dup := rows[m[1]]; dup {
			t.Errorf("README documents spec.%s twice", m[1])
		}
		rows[m[1]] = [2]string{m[2], m[3]}
	}
	if len(rows) == 0 {
		t.Fatal("README's spec table has no rows")
	}
	return rows
}

// crdSpec reads the generated CRD's schema of spec.
func crdSpec(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "manifests", "base", "crd", "cache.example.com_memcacheds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema struct {
						Properties map[string]map[string]any `json:"properties"`
					} `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	return crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
}

// documentedFields lists the spec's fields a user sets, as JSON paths:
// every field of the spec, descending into this package's own structs
// (memcached, metrics, metrics.serviceMonitor), not into Kubernetes' types.
func documentedFields(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft.PkgPath() == t.PkgPath() {
			out = append(out, documentedFields(ft, prefix+name+".")...)
			continue
		}
		out = append(out, prefix+name)
	}
	return out
}

// TestREADMEDocumentsTheAPI checks the README's spec table against the
// types and the settings, so that it cannot drift: one row for each field,
// none for a field that does not exist, and each setting's default, bounds
// and flag as settings.go states them.
func TestREADMEDocumentsTheAPI(t *testing.T) {
	rows := readmeRows(t)
	spec := crdSpec(t)

	fields := documentedFields(reflect.TypeFor[MemcachedSpec](), "")
	for _, f := range fields {
		if _, ok := rows[f]; !ok {
			t.Errorf("README's spec table has no row for spec.%s", f)
		}
	}
	for f := range rows {
		node := spec
		for _, name := range strings.Split(f, ".") {
			props, _ := node["properties"].(map[string]any)
			node, _ = props[name].(map[string]any)
		}
		if node == nil {
			t.Errorf("README documents spec.%s, which the CRD does not have", f)
		}
	}

	for _, st := range Settings {
		row, ok := rows[st.Field()]
		if !ok {
			continue // reported above
		}
		def, meaning := row[0], row[1]
		var want []string
		switch s := st.(type) {
		case IntSetting:
			if got := fmt.Sprintf("`%d`", s.Default); def != got {
				t.Errorf("README: spec.%s defaults to %s, settings.go says %s", s.Path, def, got)
			}
			if !s.Repeat {
				want = append(want, fmt.Sprintf("%d to %d", s.Min, s.Max))
			}
		case QuantitySetting:
			if got := fmt.Sprintf("`%s`", s.Default.String()); def != got {
				t.Errorf("README: spec.%s defaults to %s, settings.go says %s", s.Path, def, got)
			}
			want = append(want, "`"+binary(s.Step)+"`", "`"+binary(s.Min)+"`", "`"+binary(s.Max)+"`")
		}
		if short, _ := st.Flags(); short != "" {
			want = append(want, "`"+short)
		}
		for _, w := range want {
			if !strings.Contains(meaning, w) {
				t.Errorf("README: spec.%s does not say %s: %q", st.Field(), w, meaning)
			}
		}
	}

	var withAll MemcachedSpec
	withAll.TLS, withAll.Auth = &TLSSpec{}, &AuthSpec{}
	withAll.Default()
	for field, want := range map[string]string{
		"image": DefaultImage, "metrics.image": DefaultExporterImage, "livenessCheck": string(withAll.LivenessCheck),
		"tls.clientCertificates": string(withAll.TLS.ClientCertificates), "tls.minVersion": withAll.TLS.MinVersion, "auth.mode": string(withAll.Auth.Mode),
	} {
		if got := rows[field][0]; got != "`"+want+"`" {
			t.Errorf("README: spec.%s defaults to %s, settings.go says %s", field, got, want)
		}
	}
	var d MemcachedSpec
	d.Default()
	if want := fmt.Sprintf("(%dMi for the defaults)", MemoryOf(&d)); !strings.Contains(readme(t), want) {
		t.Errorf("README's memory formula does not say %s", want)
	}
	for _, letter := range managedShort {
		if !strings.Contains(rows["memcached.extraArgs"][1], "-"+string(letter)) {
			t.Errorf("README: extraArgs does not list -%c among the flags it may not set", letter)
		}
	}
}
