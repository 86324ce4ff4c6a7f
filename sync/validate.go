package sync

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// SpecError lists what is wrong with a Memcached's spec, each item naming the
// field. The CRD refuses all of these; the hook checks again for objects that
// got past an older CRD.
type SpecError struct {
	Problems []string
}

func (e *SpecError) Error() string { return strings.Join(e.Problems, "; ") }

// decodeSpec decodes the parent's spec, fills in the defaults and checks it.
// A spec that fails comes back with a *SpecError and no spec.
func decodeSpec(raw json.RawMessage) (*MemcachedSpec, error) {
	var spec MemcachedSpec
	if len(bytes.TrimSpace(raw)) > 0 && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		if err := json.Unmarshal(raw, &spec); err != nil {
			return nil, &SpecError{Problems: []string{describeDecodeError(err)}}
		}
	}
	setDefaults(&spec)
	if problems := validate(&spec); len(problems) > 0 {
		return nil, &SpecError{Problems: problems}
	}
	return &spec, nil
}

func describeDecodeError(err error) string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		return fmt.Sprintf("spec.%s: got a JSON %s, want %s", typeErr.Field, typeErr.Value, typeName(typeErr.Type.String()))
	}
	if errors.As(err, &typeErr) {
		return fmt.Sprintf("spec: got a JSON %s, want an object", typeErr.Value)
	}
	return "spec: " + err.Error()
}

func typeName(goType string) string {
	switch strings.TrimPrefix(goType, "*") {
	case "int32", "int64", "int":
		return "an integer"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	}
	if strings.HasPrefix(goType, "[]") {
		return "a list"
	}
	if strings.HasPrefix(goType, "map[") {
		return "a map"
	}
	return "an object"
}

func setDefaults(s *MemcachedSpec) {
	if s.Size == nil {
		s.Size = ptr(int32(DefaultSize))
	}
	if s.Image == "" {
		s.Image = DefaultImage
	}
	if s.Memcached == nil {
		s.Memcached = &MemcachedConfig{}
	}
	m := s.Memcached
	if m.MaxMemoryMB == nil {
		m.MaxMemoryMB = ptr(int32(DefaultMaxMemoryMB))
	}
	if m.MaxConnections == nil {
		m.MaxConnections = ptr(int32(DefaultMaxConnections))
	}
	if m.Threads == nil {
		m.Threads = ptr(int32(DefaultThreads))
	}
	if m.MaxItemSize == nil {
		q := DefaultMaxItemSize.DeepCopy()
		m.MaxItemSize = &q
	}
	if m.Verbosity == nil {
		m.Verbosity = ptr(int32(0))
	}
	if s.Metrics != nil && s.Metrics.Image == "" {
		s.Metrics.Image = DefaultExporterImage
	}
}

// managedFlag matches an extraArgs item that would set a flag the operator
// manages: a short-flag group holding one of them, or a long form.
var managedFlag = regexp.MustCompile(`^-[^-]*[pmctIvUlud]|^--(port|memory-limit|conn-limit|threads|max-item-size|verbose|udp-port|listen|user|daemon)(=|$)`)

var reservedPodLabels = []string{LabelName, LabelInstance, LabelManagedBy}

// validate returns one line for each problem, in field order.
func validate(s *MemcachedSpec) []string {
	var p []string
	bad := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }

	if *s.Size < 0 || *s.Size > MaxSize {
		bad("spec.size: %d is out of range, want 0 to %d", *s.Size, MaxSize)
	}
	if strings.ContainsAny(s.Image, " \t\n") {
		bad("spec.image: %q must not contain spaces", s.Image)
	}
	m := s.Memcached
	if v := *m.MaxMemoryMB; v < 2 || v > MaxMemoryMB {
		bad("spec.memcached.maxMemoryMB: %d is out of range, want 2 to %d", v, MaxMemoryMB)
	}
	if v := *m.MaxConnections; v < 1 || v > MaxConnections {
		bad("spec.memcached.maxConnections: %d is out of range, want 1 to %d", v, MaxConnections)
	}
	if v := *m.Threads; v < 1 || v > MaxThreads {
		bad("spec.memcached.threads: %d is out of range, want 1 to %d", v, MaxThreads)
	}
	item := m.MaxItemSize.Value()
	switch {
	case item < 1<<10 || item > 1<<30:
		bad("spec.memcached.maxItemSize: %s is out of range, want 1Ki to 1Gi (write 1Mi, not 1m: m means milli)", m.MaxItemSize.String())
	case item > int64(*m.MaxMemoryMB)<<19:
		bad("spec.memcached.maxItemSize: %s is more than half of maxMemoryMB (%d), memcached would refuse to start", m.MaxItemSize.String(), *m.MaxMemoryMB)
	}
	if v := *m.Verbosity; v < 0 || v > MaxVerbosity {
		bad("spec.memcached.verbosity: %d is out of range, want 0 to %d", v, MaxVerbosity)
	}
	for i, a := range m.ExtraArgs {
		if managedFlag.MatchString(a) {
			bad("spec.memcached.extraArgs[%d]: %q sets a flag the operator manages", i, a)
		}
	}
	if s.Resources != nil {
		limit, hasLimit := s.Resources.Limits[corev1.ResourceMemory]
		floor := resource.MustParse(fmt.Sprintf("%dMi", int64(*m.MaxMemoryMB)+MemoryHeadroomMB))
		if hasLimit && limit.Cmp(floor) < 0 {
			bad("spec.resources.limits.memory: %s is below maxMemoryMB + %dMi (%s), memcached would be OOM-killed", limit.String(), MemoryHeadroomMB, floor.String())
		}
		if req, ok := s.Resources.Requests[corev1.ResourceMemory]; ok && hasLimit && req.Cmp(limit) > 0 {
			bad("spec.resources.requests.memory: %s exceeds resources.limits.memory %s", req.String(), limit.String())
		}
	}
	for _, k := range reservedPodLabels {
		if _, ok := s.PodLabels[k]; ok {
			bad("spec.podLabels: %q is the operator's label", k)
		}
	}
	if mt := s.Metrics; mt != nil && mt.ServiceMonitor != nil && mt.ServiceMonitor.Enabled && !mt.Enabled {
		bad("spec.metrics.serviceMonitor.enabled: needs spec.metrics.enabled")
	}
	return p
}

func ptr[T any](v T) *T { return &v }
