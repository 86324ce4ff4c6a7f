// Package metacontroller is Metacontroller's CompositeController hook
// protocol as the memcached hook speaks it: the shapes of the customize,
// sync and finalize requests and answers, and the one decoder every request
// goes through, the parent's spec included (decode.go).
//
// It knows the wire, not the operator's decisions: which children to make
// and what the status says belong to package memcached. It does no I/O.
package metacontroller

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
)

// PodKey is the related map's key for Pods. Metacontroller keys the children
// and related maps "<Kind>.<apiVersion>": "Deployment.apps/v1".
const PodKey = "Pod.v1"

// SyncRequest is the body of a sync or finalize call: what Metacontroller
// observed. Only the fields the hook reads are decoded; the controller
// object and the bulk of every Pod are skipped.
type SyncRequest struct {
	Parent *Parent
	// Children maps a kind's key ("Deployment.apps/v1") to the observed
	// children of that kind, keyed "name" (hook v1) or "namespace/name"
	// (hook v2). It has an entry, maybe empty, for every child resource
	// the CompositeController manages: that is how the hook knows which
	// kinds it may answer.
	Children map[string]map[string]Child
	// Pods are the related Pods the customize hook asked for, keyed like
	// Children: they belong to a ReplicaSet, so they never arrive as
	// children.
	Pods       map[string]Pod
	Finalizing bool
}

// CustomizeRequest is the body of a customize call.
type CustomizeRequest struct {
	Parent *Parent
}

// Parent is the observed Memcached: its type, metadata (less managedFields,
// which the hook never reads), spec and status conditions.
//
// A spec that does not decode (a wrong type, an unknown field) leaves Spec
// empty and says why in SpecError, rather than failing the call: the hook
// answers an invalid spec with every child kept and a status that says so.
// A status condition that does not decode is dropped alone, so that a status
// written by an older hook, whatever its shape, cannot fail every call.
type Parent struct {
	v1alpha1.Memcached
	SpecError *Error
}

// Child is an observed child: enough to read its state and, when the spec is
// invalid, to hand it back unchanged.
type Child struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   ChildMeta       `json:"metadata"`
	Spec       json.RawMessage `json:"spec,omitempty"`
	Status     json.RawMessage `json:"status,omitempty"`
	// Data is a ConfigMap's: the agent's reports.
	Data map[string]string `json:"data,omitempty"`
	// Endpoints are an EndpointSlice's: the slots' last addresses.
	Endpoints json.RawMessage `json:"endpoints,omitempty"`
}

// ChildMeta is the part of a child's metadata the hook reads.
type ChildMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	Generation  int64             `json:"generation,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Pod is the part of an observed Pod the status needs. The request's Pods
// are walked by hand (decode.go); the tags say which fields it reads.
type Pod struct {
	Metadata PodMeta   `json:"metadata"`
	Status   PodStatus `json:"status"`
}

// PodMeta is the part of a Pod's metadata the hook reads.
type PodMeta struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace"`
	Labels    map[string]string `json:"labels"`
	// CreationTimestamp is as the API server wrote it (RFC 3339), parsed
	// only where it is needed: most Pods never need it, and a request
	// holds a thousand.
	CreationTimestamp string       `json:"creationTimestamp"`
	DeletionTimestamp *metav1.Time `json:"deletionTimestamp"`
	// DeletionGracePeriodSeconds, with DeletionTimestamp, tells when the
	// deletion was asked: the timestamp is that time plus the grace.
	DeletionGracePeriodSeconds *int64 `json:"deletionGracePeriodSeconds"`
}

// PodStatus is the part of a Pod's status the hook reads.
type PodStatus struct {
	Phase                 string            `json:"phase"`
	PodIP                 string            `json:"podIP"`
	Conditions            []PodCondition    `json:"conditions"`
	InitContainerStatuses []ContainerStatus `json:"initContainerStatuses"`
	ContainerStatuses     []ContainerStatus `json:"containerStatuses"`
}

// PodCondition is one of a Pod's conditions.
type PodCondition struct {
	Type   string `json:"type"`
	Status string `json:"status"`
	Reason string `json:"reason"`
	// LastTransitionTime is as the kubelet wrote it (RFC 3339), parsed
	// only for the condition that needs it (Ready).
	LastTransitionTime string `json:"lastTransitionTime"`
}

// ContainerStatus is the part of a container's status that tells a crash
// loop, an image pull failure, an OOM kill or, for the check init
// container, why it refused to start memcached.
type ContainerStatus struct {
	Name      string         `json:"name"`
	Ready     bool           `json:"ready"`
	State     ContainerState `json:"state"`
	LastState ContainerState `json:"lastState"`
}

// ContainerState is a container's state, reduced to its reasons.
type ContainerState struct {
	Waiting    *StateReason `json:"waiting"`
	Terminated *StateReason `json:"terminated"`
}

// StateReason is why a container waits or ended, and for an end, its exit
// code and termination message.
type StateReason struct {
	Reason   string `json:"reason"`
	ExitCode int32  `json:"exitCode"`
	Message  string `json:"message"`
}

// SyncResponse is the answer to a sync or finalize call. Its fields are
// exactly those hook v2 decodes strictly; Children is never nil, because a
// 200 that decodes to no children deletes every child.
type SyncResponse struct {
	Status   *v1alpha1.MemcachedStatus `json:"status"`
	Children []any                     `json:"children"`
	// ResyncAfterSeconds asks Metacontroller to sync again after this
	// long, for a decision that waits on time rather than on an object.
	ResyncAfterSeconds float64 `json:"resyncAfterSeconds,omitempty"`
	Finalized          bool    `json:"finalized,omitempty"`
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

// Error is a request the hook cannot answer, or a part of one it cannot
// read: what is wrong and where. Answering a request it cannot read would
// risk Metacontroller deleting children, so the transport refuses it (400).
type Error struct {
	// Path is the JSON path of the value at fault, dotted as Kubernetes
	// names fields ("parent.metadata.name", "spec.tolerations[0]"); empty
	// for the body as a whole.
	Path string
	// Msg says what is wrong and what was expected.
	Msg string
	// Err is the JSON decoder's own error behind Msg, if any.
	Err error
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// Unwrap returns the decoder's error, if any.
func (e *Error) Unwrap() error { return e.Err }
