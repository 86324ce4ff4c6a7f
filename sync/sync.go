package sync

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels the operator puts on every child and Pod. The first two select the
// Pods and never change over an object's life: a Deployment's selector is
// immutable.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "memcached-operator"
	appName        = "memcached"

	// lastAppliedAnnotation is where Metacontroller keeps the child as the
	// hook last answered it.
	lastAppliedAnnotation = "metacontroller.k8s.io/last-applied-configuration"
)

// SelectorLabels are the labels that select a Memcached's Pods.
func SelectorLabels(name string) map[string]string {
	return map[string]string{LabelName: appName, LabelInstance: name}
}

// Customize answers the customize hook: send the parent's Pods along with it,
// chosen by the labels the Deployment puts on its Pod template, in the
// parent's namespace only.
func Customize(req *CustomizeRequest) (*CustomizeResponse, error) {
	if err := checkParent(req.Parent); err != nil {
		return nil, err
	}
	return &CustomizeResponse{RelatedResources: []RelatedResourceRule{{
		APIVersion:    "v1",
		Resource:      "pods",
		Namespace:     req.Parent.Metadata.Namespace,
		LabelSelector: &metav1.LabelSelector{MatchLabels: SelectorLabels(req.Parent.Metadata.Name)},
	}}}, nil
}

// Sync answers the sync and finalize hooks. now stamps conditions whose
// status changed; every other byte of the answer is a function of req alone.
//
// A valid spec gives the desired children. An invalid one gives back every
// observed child as the hook last applied it, so nothing is deleted or
// changed, and a Degraded condition that names the field. A finalizing
// request gives no children, and finalized once none are observed.
func Sync(req *Request, now time.Time) (*Response, error) {
	if err := checkParent(req.Parent); err != nil {
		return nil, err
	}
	if req.Children == nil {
		return nil, badRequest("request has no children map")
	}
	if _, ok := req.Children[DeploymentKey]; !ok {
		return nil, badRequest("request's children has no %q entry: the CompositeController must manage deployments", DeploymentKey)
	}

	obs := observe(req)
	spec, specErr := decodeSpec(req.Parent.Spec)
	if problems := validateName(req.Parent.Metadata.Name); len(problems) > 0 {
		spec, specErr = nil, &SpecError{Problems: problems}
	}

	resp := &Response{Children: []any{}}
	switch {
	case req.Finalizing:
		resp.Finalized = obs.childCount == 0
	case specErr != nil:
		resp.Children = keepChildren(req.Children)
	default:
		resp.Children = desiredChildren(req.Parent, spec, obs.managed)
	}
	resp.Status = status(req.Parent, spec, specErr, obs, now)
	return resp, nil
}

// keepChildren answers every observed child as the hook last applied it, so
// Metacontroller's three-way merge changes nothing. A child without that
// record (made by something else) is answered as observed, less status and
// server-set metadata, which again merges to no change.
func keepChildren(children map[string]map[string]Child) []any {
	out := []any{}
	for _, kind := range slices.Sorted(maps.Keys(children)) {
		objs := children[kind]
		for _, key := range slices.Sorted(maps.Keys(objs)) {
			c := objs[key]
			if last := c.Metadata.Annotations[lastAppliedAnnotation]; isObject(last) {
				out = append(out, json.RawMessage(last))
				continue
			}
			annotations := maps.Clone(c.Metadata.Annotations)
			delete(annotations, lastAppliedAnnotation)
			out = append(out, Child{
				APIVersion: c.APIVersion,
				Kind:       c.Kind,
				Metadata: ChildMeta{
					Name:        c.Metadata.Name,
					Namespace:   c.Metadata.Namespace,
					Labels:      c.Metadata.Labels,
					Annotations: annotations,
				},
				Spec: c.Spec,
			})
		}
	}
	return out
}

// isObject tells whether s is a JSON object with a kind, as every child
// must be.
func isObject(s string) bool {
	var obj struct {
		Kind string `json:"kind"`
	}
	return strings.HasPrefix(strings.TrimSpace(s), "{") && json.Unmarshal([]byte(s), &obj) == nil && obj.Kind != ""
}
