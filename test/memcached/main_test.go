//go:build linux

// Package memcached_test runs what the hook answers against the real
// memcached and memcached_exporter (test/pod): the examples and a table of
// edge specs start memcached with exactly the settings the spec asks for,
// or are refused by the CRD or the hook with a message naming the field;
// the memory limit holds under load; the exporter reports memcached up; the
// liveness check tells a hung memcached from a serving one; Pods of one
// template answer at their own IPs, each with its own items; a deleted
// Pod's preStop keeps memcached serving for as long as the spec says (with
// keepWarm, until the hand-off's done item is set), and a Pod lost without
// grace loses its items and nothing else.
package memcached_test

import (
	"testing"

	"github.com/example/memcached-operator/test/kube"
)

func TestMain(m *testing.M) { kube.Main(m) }
