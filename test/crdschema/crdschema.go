// Package crdschema reads the generated Memcached CRD for tests: the
// description of a field, as the API reference and kubectl explain show
// it. It imports nothing of this repository, so that the API package's own
// tests can use it (test/testutil imports the API).
package crdschema

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// Path is the generated CRD, from the repository's root.
var Path = filepath.Join("manifests", "base", "crd", "cache.example.com_memcacheds.yaml")

// Description is the CRD's description of a field, by its path from the
// schema's root ("spec.memcached.threads"), on one line. A field the CRD
// does not describe fails the test.
func Description(t testing.TB, path string) string {
	t.Helper()
	d, err := description(path)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func description(path string) (string, error) {
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", Path))
	if err != nil {
		return "", err
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &crd); err != nil {
		return "", fmt.Errorf("%s: %w", Path, err)
	}
	if len(crd.Spec.Versions) == 0 {
		return "", fmt.Errorf("%s has no version", Path)
	}
	node := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	for _, name := range strings.Split(path, ".") {
		props, _ := node["properties"].(map[string]any)
		node, _ = props[name].(map[string]any)
	}
	d, _ := node["description"].(string)
	if d == "" {
		return "", fmt.Errorf("the CRD has no description of %s", path)
	}
	return strings.Join(strings.Fields(d), " "), nil
}
