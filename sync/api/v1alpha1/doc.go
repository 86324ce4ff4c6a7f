// Package v1alpha1 is the Memcached API, cache.example.com/v1alpha1: its Go
// types, with the kubebuilder markers controller-gen reads to write the CRD
// (make generate), and the defaults, bounds and cross-field rules of its
// spec, each stated once (settings.go) and used twice: written into the CRD
// for the API server, and checked in Go by the hook for what reached it
// anyway (an object stored under an older CRD, or with validation bypassed).
//
// +kubebuilder:object:generate=true
// +groupName=cache.example.com
// +versionName=v1alpha1
package v1alpha1

// Group, Version and Kind name the resource.
const (
	Group      = "cache.example.com"
	Version    = "v1alpha1"
	Kind       = "Memcached"
	APIVersion = Group + "/" + Version
)
