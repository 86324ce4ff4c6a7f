// Command apigen writes into the Memcached CRD what controller-gen's markers
// cannot say: the defaults, bounds and rules that the API states once, in Go
// (sync/api/v1alpha1/settings.go), and the length bounds the API server's
// CEL cost estimate needs on fields of Kubernetes' own types, which no
// marker can reach. make generate runs it on controller-gen's output.
//
//	apigen --crd manifests/base/crd/cache.example.com_memcacheds.yaml
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/cmd/internal/program"
	"github.com/example/memcached-operator/sync/api/v1alpha1"
)

func main() { program.Main("apigen", run) }

func run(_ context.Context, args []string, _ func(string) string, _, stderr io.Writer) error {
	fs := program.NewToolFlags("apigen --crd FILE", stderr)
	crdPath := fs.Required("crd", "the CRD `file` controller-gen wrote; rewritten in place")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return program.Rewrite(*crdPath, complete)
}

// quantityMaxLength and resourceMaxProperties bound the quantities of
// spec.resources: the memory rules parse them, and the API server refuses a
// rule whose worst-case cost, over an unbounded string or map, is too high.
const (
	quantityMaxLength     = 32
	resourceMaxProperties = 16
)

// complete returns the CRD with the settings' keywords and every rule added
// to its schema.
func complete(crdYAML []byte) ([]byte, error) {
	var crd map[string]any
	if err := yaml.Unmarshal(crdYAML, &crd); err != nil {
		return nil, err
	}
	versions, _ := dig(crd, "spec", "versions").([]any)
	if len(versions) != 1 {
		return nil, fmt.Errorf("want one version, found %d", len(versions))
	}
	root, _ := dig(versions[0], "schema", "openAPIV3Schema").(map[string]any)
	if root == nil {
		return nil, errors.New("no openAPIV3Schema")
	}

	for _, st := range v1alpha1.Settings {
		node, err := property(root, "spec."+st.Field())
		if err != nil {
			return nil, err
		}
		keywords, _ := st.Schema()
		for k, v := range keywords {
			node[k] = v
		}
	}
	for _, r := range v1alpha1.AllRules() {
		node, err := property(root, r.On)
		if err != nil {
			return nil, err
		}
		rule := map[string]any{"rule": r.CEL, "message": r.Message}
		if r.Field != "" && r.On != "" {
			rule["fieldPath"] = r.Field
		}
		rules, _ := node["x-kubernetes-validations"].([]any)
		node["x-kubernetes-validations"] = append(rules, rule)
	}
	for _, side := range []string{"limits", "requests"} {
		node, err := property(root, "spec.resources."+side)
		if err != nil {
			return nil, err
		}
		node["maxProperties"] = resourceMaxProperties
		items, _ := node["additionalProperties"].(map[string]any)
		if items == nil {
			return nil, fmt.Errorf("spec.resources.%s has no additionalProperties", side)
		}
		items["maxLength"] = quantityMaxLength
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return nil, err
	}
	return append([]byte("---\n"), out...), nil
}

// property finds the schema of a field by its dotted path from the root;
// "" is the root.
func property(root map[string]any, path string) (map[string]any, error) {
	node := root
	if path == "" {
		return node, nil
	}
	for _, name := range strings.Split(path, ".") {
		next, _ := dig(node, "properties", name).(map[string]any)
		if next == nil {
			return nil, fmt.Errorf("the schema has no field %s", path)
		}
		node = next
	}
	return node, nil
}

// dig walks nested maps by key.
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}
