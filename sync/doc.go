// Package sync is the memcached operator's logic: it turns what Metacontroller
// observed (a Memcached object, its children and its Pods) into what should
// exist (the desired children) and what is true (the Memcached's status).
//
// It is pure: no HTTP, no clock of its own, no API calls. The same request and
// the same time give the same answer, byte for byte once encoded, which is what
// keeps Metacontroller from writing status on every call.
//
// The Memcached API types live here too, with the kubebuilder markers that
// generate manifests/crd.yaml (make generate).
//
// +groupName=cache.example.com
// +versionName=v1alpha1
package sync
