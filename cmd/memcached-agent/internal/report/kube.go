package report

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
)

// Component is the agent as Events name their source.
const Component = "memcached-agent"

var (
	configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	events     = schema.GroupVersionResource{Version: "v1", Resource: "events"}
)

// Kube reports through the API server: each progress as a merge patch of
// the data of ConfigMap NAME-agent (which the hook makes, with no data,
// so Metacontroller's three-way merge leaves the agent's keys alone), and
// Events on the Memcached. Its Role allows get, update and patch on that
// ConfigMap and create on Events.
type Kube struct {
	client    dynamic.Interface
	namespace string
	memcached string
	configMap string
	// instance is this agent (its Pod's name), as Events name it.
	instance string
	now      func() time.Time
	// uid is the Memcached's, for the Events' involvedObject (kubectl
	// describe matches on it).
	uid atomic.Value
}

// NewKube reports on Memcached name in namespace.
func NewKube(cfg *rest.Config, namespace, name, instance string) (*Kube, error) {
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	k := &Kube{client: client, namespace: namespace, memcached: name, configMap: contract.AgentName(name), instance: instance, now: time.Now}
	k.uid.Store(types.UID(""))
	return k, nil
}

// SetUID records the Memcached's UID, as the follower sees it.
func (k *Kube) SetUID(uid types.UID) { k.uid.Store(uid) }

func (k *Kube) patch(ctx context.Context, data map[string]any) error {
	body, err := json.Marshal(map[string]any{"data": data})
	if err != nil {
		return err
	}
	_, err = k.client.Resource(configMaps).Namespace(k.namespace).Patch(ctx, k.configMap, types.MergePatchType, body, metav1.PatchOptions{FieldManager: Component})
	if err != nil {
		return fmt.Errorf("patching ConfigMap %s/%s: %w", k.namespace, k.configMap, err)
	}
	return nil
}

// Report sets a hand-off's key of the ConfigMap's data.
func (k *Kube) Report(ctx context.Context, key string, p v1alpha1.HandoffProgress) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return k.patch(ctx, map[string]any{key: string(b)})
}

// Put sets a key of the ConfigMap's data to value: a proxy's report
// (contract.ProxyReport, under contract.ProxyReportKey).
func (k *Kube) Put(ctx context.Context, key, value string) error {
	return k.patch(ctx, map[string]any{key: value})
}

// Forget removes a hand-off's key, or a proxy's (null in a merge patch).
func (k *Kube) Forget(ctx context.Context, key string) error {
	return k.patch(ctx, map[string]any{key: nil})
}

// Event records an Event on the Memcached.
func (k *Kube) Event(ctx context.Context, warning bool, reason, message string) error {
	kind := corev1.EventTypeNormal
	if warning {
		kind = corev1.EventTypeWarning
	}
	now := metav1.NewTime(k.now())
	e := &corev1.Event{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta: metav1.ObjectMeta{
			// As client-go's recorder names them.
			Name:      fmt.Sprintf("%s.%x", k.memcached, now.UnixNano()),
			Namespace: k.namespace,
		},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: v1alpha1.Group + "/v1alpha1", Kind: "Memcached",
			Name: k.memcached, Namespace: k.namespace, UID: k.uid.Load().(types.UID),
		},
		Reason:              reason,
		Message:             message,
		Type:                kind,
		Source:              corev1.EventSource{Component: Component},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		ReportingController: Component,
		ReportingInstance:   k.instance,
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(e)
	if err != nil {
		return err
	}
	if _, err := k.client.Resource(events).Namespace(k.namespace).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("recording event %s: %w", reason, err)
	}
	return nil
}
