package follow

import (
	"context"
	"fmt"
	"log/slog"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
)

// memcacheds is the resource the agent reads.
var memcacheds = schema.GroupVersionResource{Group: v1alpha1.Group, Version: "v1alpha1", Resource: "memcacheds"}

// Kube follows Memcached name in namespace through the API server until
// ctx ends. It is client-go's informer over a list and watch restricted
// with the field selector metadata.name=NAME, which the API server
// authorizes against a Role that names the object in resourceNames (the
// agent's Role grants nothing else). The informer lists again whenever a
// watch ends: when it expires, when the API server answers 410 Gone
// (its history moved past the watch's resourceVersion), when the API
// server restarts; it retries with backoff while the API server is down.
// Every failure is counted; the last good list stays served meanwhile.
//
// Each object is read as JSON through Decode, so the agent and the hook
// read a Memcached by the same rules, and checked as File checks it.
func Kube(ctx context.Context, cfg *rest.Config, namespace, name string, sink Sink, errs Errors, logger *slog.Logger) error {
	const source = "watch"
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	resource := client.Resource(memcacheds).Namespace(namespace)
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return resource.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return resource.Watch(ctx, o)
		},
	}
	informer := cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, cache.Indexers{})
	if err := informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		errs(source)
		// client-go's own handler logs it, at the level it deserves (an
		// expired watch is routine).
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}); err != nil {
		return err
	}
	offer := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		b, err := u.MarshalJSON()
		if err != nil {
			sink.Refuse(source, fmt.Errorf("encoding the watched object: %w", err))
			return
		}
		m, err := Decode(b)
		if err == nil {
			err = check(m, name, namespace)
		}
		if err != nil {
			sink.Refuse(source, err)
			return
		}
		sink.Offer(source, m)
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    offer,
		UpdateFunc: func(_, obj any) { offer(obj) },
		DeleteFunc: func(any) {
			logger.Warn("the Memcached was deleted; keeping the list served", "namespace", namespace, "name", name)
		},
	}); err != nil {
		return err
	}
	logger.Info("following the Memcached through the API server", "namespace", namespace, "name", name, "host", cfg.Host)
	informer.RunWithContext(ctx)
	return nil
}
