package playground

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/test/kube"
)

// Paths in the repository, relative to its root.
const (
	// MetacontrollerCRDs are Metacontroller's own CRDs, as its project
	// publishes them (the integration suite's copy).
	MetacontrollerCRDs = "test/integration/testdata/metacontroller-crds-v1.yaml"
	// Manifests is what a user installs with kubectl apply -k.
	Manifests = "manifests"
)

// ServiceMonitorCRD stands in for the Prometheus Operator's CRD in the
// suites that run an API server and in the playground: same group, version
// and kind, any content, enough for the servicemonitor overlay and its
// example.
const ServiceMonitorCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: servicemonitors.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  names: {kind: ServiceMonitor, listKind: ServiceMonitorList, plural: servicemonitors, singular: servicemonitor}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// Install installs, before any controller runs: Metacontroller's CRDs, a
// stand-in for the ServiceMonitor CRD, and the operator as a user would,
// kubectl apply -k manifests/ of the repository at root, through an
// overlay (written under dir) that only points the CompositeController's
// hooks at the hook on hookURL.
func Install(c *kube.Cluster, root, hookURL, dir string) error {
	if _, stderr, err := c.Kubectl("apply", "--server-side", "-f", filepath.Join(root, MetacontrollerCRDs)); err != nil {
		return fmt.Errorf("applying Metacontroller's CRDs: %v: %s", err, stderr)
	}
	if _, stderr, err := c.KubectlStdin([]byte(ServiceMonitorCRD), "apply", "-f", "-"); err != nil {
		return fmt.Errorf("applying the ServiceMonitor CRD: %v: %s", err, stderr)
	}
	if _, stderr, err := c.Kubectl("wait", "--for=condition=established", "--timeout=60s",
		"crd/compositecontrollers.metacontroller.k8s.io", "crd/controllerrevisions.metacontroller.k8s.io",
		"crd/servicemonitors.monitoring.coreos.com"); err != nil {
		return fmt.Errorf("waiting for the CRDs: %v: %s", err, stderr)
	}
	if err := ApplyInstall(c, filepath.Join(root, Manifests), hookURL, dir); err != nil {
		return err
	}
	if _, stderr, err := c.Kubectl("wait", "--for=condition=established", "--timeout=60s", "crd/memcacheds.cache.example.com"); err != nil {
		return fmt.Errorf("waiting for the Memcached CRD: %v: %s", err, stderr)
	}
	return nil
}

// compositeController is what the install reads of a CompositeController
// (or of another object, by Kind): its name, and where each of its hooks
// calls, a Service and a path, or a URL.
type compositeController struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Hooks map[string]struct {
			Webhook struct {
				URL     string         `json:"url"`
				Service map[string]any `json:"service"`
				Path    string         `json:"path"`
			} `json:"webhook"`
		} `json:"hooks"`
	} `json:"spec"`
}

// ApplyInstall runs kubectl apply -k on an overlay of target (manifests/
// or one of its overlays) that replaces each hook's Service reference in
// the CompositeController with a URL on the loopback hook, keeping the
// rest (timeout, version) as the manifests say. The overlay is written
// under dir from the rendered target, so a hook added to the manifests is
// pointed at the loopback hook too.
func ApplyInstall(c *kube.Cluster, target, hookURL, dir string) error {
	rendered, stderr, err := c.Kubectl("kustomize", target)
	if err != nil {
		return fmt.Errorf("kubectl kustomize %s: %v: %s", target, err, stderr)
	}
	var patches []map[string]any
	for doc := range strings.SplitSeq(rendered, "\n---\n") {
		var obj compositeController
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return fmt.Errorf("decoding %s as rendered: %v", target, err)
		}
		if obj.Kind != "CompositeController" {
			continue
		}
		var ops []map[string]any
		for _, name := range slices.Sorted(maps.Keys(obj.Spec.Hooks)) {
			h := obj.Spec.Hooks[name]
			if h.Webhook.Service == nil {
				continue
			}
			base := "/spec/hooks/" + name + "/webhook"
			ops = append(ops,
				map[string]any{"op": "remove", "path": base + "/service"},
				map[string]any{"op": "remove", "path": base + "/path"},
				map[string]any{"op": "add", "path": base + "/url", "value": hookURL + h.Webhook.Path},
			)
		}
		patch, err := yaml.Marshal(ops)
		if err != nil {
			return err
		}
		patches = append(patches, map[string]any{
			"target": map[string]any{"group": "metacontroller.k8s.io", "kind": "CompositeController", "name": obj.Metadata.Name},
			"patch":  string(patch),
		})
	}
	if len(patches) == 0 {
		return fmt.Errorf("%s renders no CompositeController", target)
	}
	overlay := filepath.Join(dir, "install", filepath.Base(target))
	if err := os.MkdirAll(overlay, 0o700); err != nil {
		return err
	}
	abs, err := filepath.Abs(target)
	if err != nil {
		return err
	}
	// kustomize takes other kustomizations by relative path only.
	rel, err := filepath.Rel(overlay, abs)
	if err != nil {
		return err
	}
	kustomization, err := yaml.Marshal(map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"resources":  []string{rel},
		"patches":    patches,
	})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), kustomization, 0o600); err != nil {
		return err
	}
	if stdout, stderr, err := c.Kubectl("apply", "-k", overlay); err != nil {
		return fmt.Errorf("kubectl apply -k %s (over %s): %v\n%s%s", overlay, target, err, stdout, stderr)
	}
	return nil
}

// CheckHookURLs fails unless every hook of every live CompositeController
// calls hookURL: a hook still naming the in-cluster Service would fail
// every call, and the Memcacheds would not converge, far from the cause.
func CheckHookURLs(c *kube.Cluster, hookURL string) error {
	stdout, stderr, err := c.Kubectl("get", "compositecontrollers", "-o", "json")
	if err != nil {
		return fmt.Errorf("kubectl get compositecontrollers: %v: %s", err, stderr)
	}
	var list struct {
		Items []compositeController `json:"items"`
	}
	if err := json.Unmarshal([]byte(stdout), &list); err != nil {
		return fmt.Errorf("decoding kubectl get compositecontrollers: %v", err)
	}
	if len(list.Items) == 0 {
		return errors.New("no CompositeController is installed")
	}
	for _, cc := range list.Items {
		if len(cc.Spec.Hooks) == 0 {
			return fmt.Errorf("the CompositeController %s has no hooks", cc.Metadata.Name)
		}
		for _, name := range slices.Sorted(maps.Keys(cc.Spec.Hooks)) {
			h := cc.Spec.Hooks[name]
			if !strings.HasPrefix(h.Webhook.URL, hookURL+"/") || h.Webhook.Service != nil {
				return fmt.Errorf("the CompositeController %s's %s hook calls url %q service %v, want %s/...", cc.Metadata.Name, name, h.Webhook.URL, h.Webhook.Service, hookURL)
			}
		}
	}
	return nil
}
