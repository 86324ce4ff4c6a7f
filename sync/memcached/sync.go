// Package memcached is the operator's logic: it turns what Metacontroller
// observed (a Memcached object, its children and its Pods) into what should
// exist (the desired children) and what is true (the Memcached's status).
//
// It is pure: no HTTP, no clock of its own, no API calls. The same request
// and the same time give the same answer, byte for byte once encoded, which
// is what keeps Metacontroller from writing status on every call.
package memcached

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/metacontroller"
)

// Keys of the child kinds the operator makes, as Metacontroller keys its
// children map.
const (
	DeploymentKey     = "Deployment.apps/v1"
	ServiceKey        = "Service.v1"
	PDBKey            = "PodDisruptionBudget.policy/v1"
	ServiceMonitorKey = "ServiceMonitor.monitoring.coreos.com/v1"
	NetworkPolicyKey  = "NetworkPolicy.networking.k8s.io/v1"
)

// ManagedBy is the app.kubernetes.io/managed-by label of every child.
const ManagedBy = "memcached-operator"

// appName is the app.kubernetes.io/name label of every child and Pod.
const appName = "memcached"

// lastAppliedAnnotation is where Metacontroller keeps the child as the hook
// last answered it.
const lastAppliedAnnotation = "metacontroller.k8s.io/last-applied-configuration"

// SelectorLabels are the labels that select a Memcached's Pods.
func SelectorLabels(name string) map[string]string {
	return map[string]string{v1alpha1.LabelName: appName, v1alpha1.LabelInstance: name}
}

// Answer is a sync or finalize answer, with what the logic decided about it
// for the transport's logs and metrics.
type Answer struct {
	Response *metacontroller.SyncResponse
	// Degraded is the reason of the Degraded condition: ReasonAsExpected
	// when nothing is wrong.
	Degraded Reason
}

// Customize answers the customize hook: send the parent's Pods along with it,
// chosen by the labels the Deployment puts on its Pod template, in the
// parent's namespace only, and its proxy tier's Pods (whatever the spec
// says, so that turning the proxy on needs no new answer here): the status
// says which pool every live proxy loaded (proxyVersion).
func Customize(req *metacontroller.CustomizeRequest) (*metacontroller.CustomizeResponse, error) {
	if err := checkParent(req.Parent); err != nil {
		return nil, err
	}
	return &metacontroller.CustomizeResponse{RelatedResources: []metacontroller.RelatedResourceRule{{
		APIVersion:    "v1",
		Resource:      "pods",
		Namespace:     req.Parent.Namespace,
		LabelSelector: &metav1.LabelSelector{MatchLabels: SelectorLabels(req.Parent.Name)},
	}, {
		APIVersion:    "v1",
		Resource:      "pods",
		Namespace:     req.Parent.Namespace,
		LabelSelector: &metav1.LabelSelector{MatchLabels: ProxySelectorLabels(req.Parent.Name)},
	}}}, nil
}

// Sync answers the sync hook. now is the hook's clock, and the answer is a
// function of req and now alone: now stamps conditions whose status
// changed, raises the slot table's version when the served list changes
// (slots.Version: at least now in milliseconds), and decides which Pod
// events have settled (slots.Assign acts on an event contract.Settle after
// its second, and asks for a resync until then).
//
// A valid spec gives the desired children. An invalid one gives back every
// observed child as the hook last applied it, so nothing is deleted or
// changed, and a Degraded condition that names the field. A request that
// says the parent is finalizing is answered as Finalize answers it.
func Sync(req *metacontroller.SyncRequest, now time.Time, opts Options) (*Answer, error) {
	return answer(req, req.Finalizing, now, opts)
}

// Options are the hook's own settings that reach its answers.
type Options struct {
	// AgentImage is the image of memcached-agent, which the hook's image
	// holds too: the agent's Deployment runs it. The manifests set it to
	// the hook's own image, so that upgrading the operator upgrades the
	// agents (and never touches a memcached Pod).
	AgentImage string
}

// Finalize answers the finalize hook: no children, and finalized once none
// are observed. Metacontroller calls it only for a parent being deleted,
// whatever the request's finalizing field says.
func Finalize(req *metacontroller.SyncRequest, now time.Time, opts Options) (*Answer, error) {
	return answer(req, true, now, opts)
}

func answer(req *metacontroller.SyncRequest, finalizing bool, now time.Time, opts Options) (*Answer, error) {
	if err := checkParent(req.Parent); err != nil {
		return nil, err
	}
	if req.Children == nil {
		return nil, &metacontroller.Error{Path: "children", Msg: "missing: want the map of observed children"}
	}
	if _, ok := req.Children[DeploymentKey]; !ok {
		return nil, &metacontroller.Error{Path: "children",
			Msg: fmt.Sprintf("has no %q entry: the CompositeController must manage deployments", DeploymentKey)}
	}

	obs := observe(req, finalizing)
	spec, specErr := validSpec(req.Parent)
	pl := decide(req.Parent, spec, obs, now)
	resp := &metacontroller.SyncResponse{Children: []any{}}
	switch {
	case finalizing:
		resp.Finalized = obs.childCount == 0
	case specErr != "":
		resp.Children = keepChildren(req.Children)
	default:
		resp.Children = desiredChildren(req.Parent, spec, obs.managed, opts, req.Children, pl.cells)
	}
	resp.Status = status(pl, specErr, now, opts)
	if pending := pl.pending; pending > 0 && !finalizing {
		// The slot table waits for an event to settle: come back then,
		// rounded up to a tenth of a second so that the answer changes only
		// as often.
		resp.ResyncAfterSeconds = math.Ceil(pending.Seconds()*10) / 10
	}
	a := &Answer{Response: resp, Degraded: ReasonAsExpected}
	if c := meta.FindStatusCondition(resp.Status.Conditions, ConditionDegraded); c != nil && c.Status == metav1.ConditionTrue {
		a.Degraded = Reason(c.Reason)
	}
	return a, nil
}

// validSpec returns the parent's spec with its defaults, or, when it does
// not decode or is invalid, why, each problem naming its field.
func validSpec(p *metacontroller.Parent) (*v1alpha1.MemcachedSpec, string) {
	if p.SpecError != nil {
		return nil, p.SpecError.Error()
	}
	m := &v1alpha1.Memcached{ObjectMeta: p.ObjectMeta, Spec: *p.Spec.DeepCopy()}
	m.Spec.Default()
	if errs := v1alpha1.Validate(m); len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Error()
		}
		return nil, strings.Join(msgs, "; ")
	}
	return &m.Spec, ""
}

// checkParent refuses a request whose parent is missing or not a Memcached.
func checkParent(p *metacontroller.Parent) error {
	switch {
	case p == nil:
		return &metacontroller.Error{Path: "parent", Msg: "missing: want the Memcached object"}
	case p.APIVersion != v1alpha1.APIVersion || p.Kind != v1alpha1.Kind:
		return &metacontroller.Error{Path: "parent",
			Msg: fmt.Sprintf("got apiVersion %q and kind %q, want %q and %q", p.APIVersion, p.Kind, v1alpha1.APIVersion, v1alpha1.Kind)}
	case p.Name == "":
		return &metacontroller.Error{Path: "parent.metadata.name", Msg: "missing: want the Memcached's name"}
	case p.Namespace == "":
		return &metacontroller.Error{Path: "parent.metadata.namespace", Msg: "missing: Memcached is namespaced"}
	}
	return nil
}

// keepChildren answers every observed child as the hook last applied it, so
// Metacontroller's three-way merge changes nothing. A child without that
// record (made by something else) is answered as observed, less status and
// server-set metadata, which again merges to no change.
func keepChildren(children map[string]map[string]metacontroller.Child) []any {
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
			out = append(out, metacontroller.Child{
				APIVersion: c.APIVersion,
				Kind:       c.Kind,
				Metadata: metacontroller.ChildMeta{
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
	return strings.HasPrefix(strings.TrimSpace(s), "{") && metacontroller.DecodeObject([]byte(s), &obj) == nil && obj.Kind != ""
}
