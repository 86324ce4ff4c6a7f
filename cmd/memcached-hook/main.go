// Command memcached-hook serves Metacontroller's CompositeController hooks
// for Memcached objects (cache.example.com/v1alpha1): given what
// Metacontroller observed, it answers the children that should exist and
// the Memcached's status. The children are memcached's Deployment, its
// headless Service and PodDisruptionBudget, and as the spec asks a
// ServiceMonitor and a NetworkPolicy; the agent's Deployment,
// PodDisruptionBudget, NetworkPolicy, Service (discovery) and ConfigMap
// (keepWarm), with its ServiceAccount, Role and RoleBinding; the proxy
// tier's Deployment, ConfigMap, Service, PodDisruptionBudget and
// NetworkPolicy. The logic is sync/memcached's. Metacontroller applies the
// answer; the hook never calls the API server.
package main

import "github.com/example/memcached-operator/cmd/internal/program"

func main() { program.Main("memcached-hook", run) }
