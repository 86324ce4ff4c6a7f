package sync

import (
	"encoding/json"
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Keys of the children and related maps Metacontroller sends: "<Kind>.<apiVersion>".
const (
	DeploymentKey     = "Deployment.apps/v1"
	ServiceKey        = "Service.v1"
	PDBKey            = "PodDisruptionBudget.policy/v1"
	ServiceMonitorKey = "ServiceMonitor.monitoring.coreos.com/v1"
	PodKey            = "Pod.v1"
)

// Request is the body of a sync or finalize call: what Metacontroller
// observed. Only the fields the hook reads are decoded; the controller object
// and the bulk of every Pod are skipped.
type Request struct {
	Parent *Parent `json:"parent"`
	// Children maps "<Kind>.<apiVersion>" to the observed children of that
	// kind, keyed "name" (hook v1) or "namespace/name" (hook v2). It has an
	// entry, maybe empty, for every child resource the CompositeController
	// manages: that is how the hook knows which kinds it may answer.
	Children   map[string]map[string]Child `json:"children"`
	Related    Related                     `json:"related"`
	Finalizing bool                        `json:"finalizing"`
}

// CustomizeRequest is the body of a customize call.
type CustomizeRequest struct {
	Parent *Parent `json:"parent"`
}

// Related holds the related objects the customize hook asked for: the
// memcached Pods, which belong to a ReplicaSet and so never arrive as
// children.
type Related struct {
	Pods map[string]Pod `json:"Pod.v1"`
}

// Parent is the observed Memcached. Its spec and status stay raw until the
// hook decodes them: a spec of the wrong shape becomes an InvalidSpec status
// (keeping every child) rather than a rejected call, and a status written by
// an older hook, whatever its shape, cannot make every call fail.
type Parent struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       json.RawMessage   `json:"spec"`
	Status     json.RawMessage   `json:"status"`
}

// conditions returns the parent's well-formed observed conditions; a
// malformed one is dropped alone.
func (p *Parent) conditions() []metav1.Condition {
	var st struct {
		Conditions []json.RawMessage `json:"conditions"`
	}
	if json.Unmarshal(p.Status, &st) != nil {
		return nil
	}
	var out []metav1.Condition
	for _, raw := range st.Conditions {
		var c metav1.Condition
		if json.Unmarshal(raw, &c) == nil {
			out = append(out, c)
		}
	}
	return out
}

// Child is an observed child: enough to read its state and, when the spec is
// invalid, to hand it back unchanged.
type Child struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   ChildMeta       `json:"metadata"`
	Spec       json.RawMessage `json:"spec,omitempty"`
	Status     json.RawMessage `json:"status,omitempty"`
}

// ChildMeta is the part of a child's metadata the hook reads.
type ChildMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	Generation  int64             `json:"generation,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Pod is the part of an observed Pod the status needs.
type Pod struct {
	Metadata struct {
		Name              string            `json:"name"`
		Namespace         string            `json:"namespace"`
		Labels            map[string]string `json:"labels"`
		DeletionTimestamp *metav1.Time      `json:"deletionTimestamp"`
	} `json:"metadata"`
	Status PodStatus `json:"status"`
}

// PodStatus is the part of a Pod's status the hook reads.
type PodStatus struct {
	Phase             string            `json:"phase"`
	PodIP             string            `json:"podIP"`
	Conditions        []PodCondition    `json:"conditions"`
	ContainerStatuses []ContainerStatus `json:"containerStatuses"`
}

// PodCondition is one of a Pod's conditions.
type PodCondition struct {
	Type   string `json:"type"`
	Status string `json:"status"`
	Reason string `json:"reason"`
}

// ContainerStatus is the part of a container's status that tells a crash
// loop, an image pull failure or an OOM kill.
type ContainerStatus struct {
	Name      string         `json:"name"`
	Ready     bool           `json:"ready"`
	State     ContainerState `json:"state"`
	LastState ContainerState `json:"lastState"`
}

// ContainerState is a container's state, reduced to its reasons.
type ContainerState struct {
	Waiting *struct {
		Reason string `json:"reason"`
	} `json:"waiting"`
	Terminated *struct {
		Reason string `json:"reason"`
	} `json:"terminated"`
}

// Response is the answer to a sync or finalize call. Its fields are exactly
// those hook v2 decodes strictly; Children is never nil, because a 200 that
// decodes to no children deletes every child.
type Response struct {
	Status    *MemcachedStatus `json:"status"`
	Children  []any            `json:"children"`
	Finalized bool             `json:"finalized,omitempty"`
}

// CustomizeResponse is the answer to a customize call.
type CustomizeResponse struct {
	RelatedResources []RelatedResourceRule `json:"relatedResources"`
}

// RelatedResourceRule asks Metacontroller to send objects of one resource
// along with the parent.
type RelatedResourceRule struct {
	APIVersion    string                `json:"apiVersion"`
	Resource      string                `json:"resource"`
	Namespace     string                `json:"namespace,omitempty"`
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
}

// RequestError is a request the hook cannot answer: a missing parent, a
// parent of another kind, a controller that does not manage Deployments.
// Answering anything would risk Metacontroller deleting children.
type RequestError struct {
	Msg string
	// Err is the underlying error, if any: for a body that does not decode,
	// the JSON decoder's own.
	Err error
}

func (e *RequestError) Error() string { return e.Msg }

// Unwrap returns the underlying error, so that errors.As finds the JSON
// decoder's error (and its byte offset) behind a malformed request.
func (e *RequestError) Unwrap() error { return e.Err }

func badRequest(format string, args ...any) error {
	return &RequestError{Msg: fmt.Sprintf(format, args...)}
}

// checkParent refuses a request whose parent is missing or not a Memcached.
func checkParent(p *Parent) error {
	switch {
	case p == nil:
		return badRequest("request has no parent")
	case p.APIVersion != APIVersion || p.Kind != Kind:
		return badRequest("parent is %s %q, want %s %q", p.Kind, p.APIVersion, Kind, APIVersion)
	case p.Metadata.Name == "":
		return badRequest("parent has no metadata.name")
	case p.Metadata.Namespace == "":
		return badRequest("parent %q has no metadata.namespace: Memcached is namespaced", p.Metadata.Name)
	}
	return nil
}

// unmarshalRaw decodes a raw part of the request (an observed child's spec
// or status) with JSON v2, which decodes typed values several times faster
// than encoding/json. The bytes have already passed DecodeRequest, so its
// stricter rules cannot refuse what encoding/json would take.
func unmarshalRaw(raw []byte, v any) error { return jsonv2.Unmarshal(raw, v) }

// deploymentSpecFields is the part of an observed Deployment's spec that the
// status reads: replicas and the containers' images. Decoding only these
// skips the bulk of the Pod template (resources, probes, affinity, spread),
// which as a full appsv1.DeploymentSpec was most of a small sync's work.
type deploymentSpecFields struct {
	Replicas *int32 `json:"replicas"`
	Template struct {
		Spec struct {
			Containers []struct {
				Name  string `json:"name"`
				Image string `json:"image"`
			} `json:"containers"`
		} `json:"spec"`
	} `json:"template"`
}
