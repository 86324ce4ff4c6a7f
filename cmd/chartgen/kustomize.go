package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// originAnnotation is where kustomize's originAnnotations build option
// records the file each object came from.
const originAnnotation = "config.kubernetes.io/origin"

// object is one object of a kustomize build.
type object struct {
	apiVersion, kind, namespace, name string
	// origin is the file the object came from, relative to the manifests
	// directory (base builds only).
	origin string
	value  map[string]any
}

// id names the object within a build.
func (o object) id() string {
	group, _, _ := strings.Cut(o.apiVersion, "/")
	if !strings.Contains(o.apiVersion, "/") {
		group = ""
	}
	return group + "/" + o.kind + " " + o.namespace + "/" + o.name
}

func (o object) String() string {
	if o.namespace != "" {
		return fmt.Sprintf("%s %s/%s", o.kind, o.namespace, o.name)
	}
	return o.kind + " " + o.name
}

// kustomizer builds kustomizations with kubectl kustomize.
type kustomizer struct {
	kubectl string
	// manifests is the absolute path of the directory whose kustomization
	// the chart installs; components are its components/ subdirectories.
	manifests string
}

// build renders the manifests directory with the named components (in
// this order) through an overlay written in a temporary directory, as an
// overlay in manifests/overlays would list them. With origins, each object
// says which file it came from.
func (k kustomizer) build(ctx context.Context, components []string, origins bool) ([]object, error) {
	dir, err := os.MkdirTemp("", "chartgen-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// kustomize takes other kustomizations by relative path only.
	rel := func(p string) (string, error) { return filepath.Rel(dir, p) }
	base, err := rel(k.manifests)
	if err != nil {
		return nil, err
	}
	kz := map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"resources":  []string{base},
	}
	var comps []string
	for _, c := range components {
		p, err := rel(filepath.Join(k.manifests, "components", c))
		if err != nil {
			return nil, err
		}
		comps = append(comps, p)
	}
	if len(comps) > 0 {
		kz["components"] = comps
	}
	if origins {
		kz["buildMetadata"] = []string{"originAnnotations"}
	}
	out, err := yaml.Marshal(kz)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), out, 0o600); err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, k.kubectl, "kustomize", dir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		what := "manifests"
		if len(components) > 0 {
			what += " with the components " + strings.Join(components, ", ")
		}
		return nil, fmt.Errorf("kubectl kustomize (%s): %v: %s", what, err, strings.TrimSpace(stderr.String()))
	}
	objs, err := decodeObjects(stdout.Bytes())
	if err != nil {
		return nil, err
	}
	if origins {
		for i := range objs {
			if objs[i].origin, err = k.takeOrigin(dir, objs[i].value); err != nil {
				return nil, fmt.Errorf("%s: %w", objs[i], err)
			}
		}
	}
	return objs, nil
}

// takeOrigin removes the origin annotation from an object and returns the
// file it names, relative to the manifests directory.
func (k kustomizer) takeOrigin(overlay string, obj map[string]any) (string, error) {
	meta, _ := obj["metadata"].(map[string]any)
	ann, _ := meta["annotations"].(map[string]any)
	text, _ := ann[originAnnotation].(string)
	if text == "" {
		return "", errors.New("kustomize wrote no origin annotation")
	}
	delete(ann, originAnnotation)
	if len(ann) == 0 {
		delete(meta, "annotations")
	}
	var origin struct {
		Path string `json:"path"`
	}
	if err := yaml.Unmarshal([]byte(text), &origin); err != nil {
		return "", fmt.Errorf("origin annotation: %w", err)
	}
	rel, err := filepath.Rel(k.manifests, filepath.Join(overlay, origin.Path))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("origin %s is outside %s", origin.Path, k.manifests)
	}
	return filepath.ToSlash(rel), nil
}

// decodeObjects decodes a stream of YAML documents into objects, skipping
// empty documents.
func decodeObjects(data []byte) ([]object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		var v map[string]any
		if err := yaml.Unmarshal(doc, &v); err != nil {
			return nil, err
		}
		if v == nil {
			continue
		}
		o := object{value: v}
		o.apiVersion, _ = v["apiVersion"].(string)
		o.kind, _ = v["kind"].(string)
		meta, _ := v["metadata"].(map[string]any)
		o.name, _ = meta["name"].(string)
		o.namespace, _ = meta["namespace"].(string)
		if o.apiVersion == "" || o.kind == "" || o.name == "" {
			return nil, fmt.Errorf("a document without apiVersion, kind or metadata.name: %.80q", doc)
		}
		objs = append(objs, o)
	}
}
