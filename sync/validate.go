package sync

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// SpecError lists what is wrong with a Memcached's spec, each item naming the
// field. The CRD refuses most of these; the hook checks again for objects
// that got past an older CRD, and checks what the CRD cannot (label and
// resource name syntax, tolerations, spread constraints), so that a spec the
// API server would refuse in the children is an InvalidSpec status instead.
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
			if problems := badQuantities(raw); len(problems) > 0 {
				return nil, &SpecError{Problems: problems}
			}
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

// badQuantities names the quantity fields of a spec that do not parse:
// resource.Quantity's own error says what is wrong but not where.
func badQuantities(raw json.RawMessage) []string {
	type resources struct {
		Requests map[string]json.RawMessage `json:"requests"`
		Limits   map[string]json.RawMessage `json:"limits"`
	}
	var q struct {
		Memcached *struct {
			MaxItemSize json.RawMessage `json:"maxItemSize"`
		} `json:"memcached"`
		Resources *resources `json:"resources"`
		Metrics   *struct {
			Resources *resources `json:"resources"`
		} `json:"metrics"`
	}
	if json.Unmarshal(raw, &q) != nil {
		return nil
	}
	var p []string
	check := func(path string, v json.RawMessage) {
		if v == nil {
			return
		}
		var qty resource.Quantity
		if err := json.Unmarshal(v, &qty); err != nil {
			p = append(p, fmt.Sprintf("spec.%s: %s is not a quantity (write it like 512Mi or 1Gi)", path, v))
		}
	}
	checkAll := func(path string, r *resources) {
		if r == nil {
			return
		}
		for _, k := range slices.Sorted(maps.Keys(r.Requests)) {
			check(path+".requests."+k, r.Requests[k])
		}
		for _, k := range slices.Sorted(maps.Keys(r.Limits)) {
			check(path+".limits."+k, r.Limits[k])
		}
	}
	if q.Memcached != nil {
		check("memcached.maxItemSize", q.Memcached.MaxItemSize)
	}
	checkAll("resources", q.Resources)
	if q.Metrics != nil {
		checkAll("metrics.resources", q.Metrics.Resources)
	}
	return p
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

// managedShortFlags matches a short-flag group that holds a flag the
// operator manages (port, listen, user, daemon, memory, connections,
// threads, item size, verbosity, UDP, unix socket) or one that makes
// memcached print and exit (help, version, license).
var managedShortFlags = regexp.MustCompile(`^-[^-]*[pmctIvUludshVi]`)

// managedLongFlags are the long forms of the same. memcached's getopt_long
// takes any unambiguous prefix (--thr=8), so a prefix of one is refused too.
var managedLongFlags = []string{
	"port", "memory-limit", "conn-limit", "threads", "max-item-size", "verbose", "udp-port",
	"listen", "user", "daemon", "unix-socket", "help", "version", "license",
}

// setsManagedFlag tells whether an extraArgs item would set a flag the
// operator manages. The CRD's CEL rule on extraArgs says the same.
func setsManagedFlag(arg string) bool {
	if long, ok := strings.CutPrefix(arg, "--"); ok {
		name, _, _ := strings.Cut(long, "=")
		for _, f := range managedLongFlags {
			if strings.HasPrefix(f, name) {
				return true
			}
		}
		return false
	}
	return managedShortFlags.MatchString(arg)
}

// controllerUIDLabel is the label Metacontroller selects children by (with
// generateSelector): a child that sets it otherwise fails the whole sync.
const controllerUIDLabel = "controller-uid"

var reservedPodLabels = []string{LabelName, LabelInstance, LabelManagedBy, controllerUIDLabel}

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
	case item < ItemSizeStep || item > 1<<30 || item%ItemSizeStep != 0:
		bad("spec.memcached.maxItemSize: %s is not a multiple of 512Ki from 512Ki to 1Gi, memcached's slab chunk size (write 1Mi, not 1m: m means milli)", m.MaxItemSize.String())
	case item > int64(*m.MaxMemoryMB)<<19:
		bad("spec.memcached.maxItemSize: %s is more than half of maxMemoryMB (%d), memcached would refuse to start", m.MaxItemSize.String(), *m.MaxMemoryMB)
	}
	if v := *m.Verbosity; v < 0 || v > MaxVerbosity {
		bad("spec.memcached.verbosity: %d is out of range, want 0 to %d", v, MaxVerbosity)
	}
	for i, a := range m.ExtraArgs {
		if setsManagedFlag(a) {
			bad("spec.memcached.extraArgs[%d]: %q sets a flag the operator manages", i, a)
		}
	}
	if s.Resources != nil {
		limit, hasLimit := s.Resources.Limits[corev1.ResourceMemory]
		floor := resource.MustParse(fmt.Sprintf("%dMi", int64(*m.MaxMemoryMB)+MemoryHeadroomMB))
		if hasLimit && limit.Cmp(floor) < 0 {
			bad("spec.resources.limits.memory: %s is below maxMemoryMB + %dMi (%s), memcached would be OOM-killed", limit.String(), MemoryHeadroomMB, floor.String())
		}
	}
	p = append(p, resourceProblems("spec.resources", s.Resources)...)
	if s.Metrics != nil {
		p = append(p, resourceProblems("spec.metrics.resources", s.Metrics.Resources)...)
	}
	p = append(p, placementProblems(s)...)
	for _, k := range reservedPodLabels {
		if _, ok := s.PodLabels[k]; ok {
			bad("spec.podLabels: %q is the operator's label", k)
		}
	}
	// The API server would refuse the children for these, and Metacontroller
	// would retry forever with nothing in the status to say why.
	p = append(p, labelProblems("spec.podLabels", s.PodLabels)...)
	p = append(p, labelProblems("spec.nodeSelector", s.NodeSelector)...)
	for _, k := range slices.Sorted(maps.Keys(s.PodAnnotations)) {
		for _, msg := range validation.IsQualifiedName(strings.ToLower(k)) {
			bad("spec.podAnnotations: key %q: %s", k, msg)
		}
	}
	if s.PriorityClassName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(s.PriorityClassName) {
			bad("spec.priorityClassName: %q: %s", s.PriorityClassName, msg)
		}
	}
	if mt := s.Metrics; mt != nil && mt.ServiceMonitor != nil {
		p = append(p, labelProblems("spec.metrics.serviceMonitor.labels", mt.ServiceMonitor.Labels)...)
		if _, ok := mt.ServiceMonitor.Labels[controllerUIDLabel]; ok {
			bad("spec.metrics.serviceMonitor.labels: %q is Metacontroller's label", controllerUIDLabel)
		}
		if iv := mt.ServiceMonitor.Interval; iv != "" && !promDuration.MatchString(iv) {
			bad("spec.metrics.serviceMonitor.interval: %q is not a Prometheus duration like 30s or 1m30s", iv)
		}
	}
	if mt := s.Metrics; mt != nil && strings.ContainsAny(mt.Image, " \t\n") {
		bad("spec.metrics.image: %q must not contain spaces", mt.Image)
	}
	if mt := s.Metrics; mt != nil && mt.ServiceMonitor != nil && mt.ServiceMonitor.Enabled && !mt.Enabled {
		bad("spec.metrics.serviceMonitor.enabled: needs spec.metrics.enabled")
	}
	return p
}

// validateName checks the parent's name, which names every child and is
// the value of the instance label. The CRD says the same.
func validateName(name string) []string {
	if msgs := validation.IsDNS1035Label(name); len(msgs) > 0 {
		return []string{fmt.Sprintf("metadata.name: %q: %s (it names the Service and is a label value)", name, strings.Join(msgs, "; "))}
	}
	return nil
}

// resourceProblems checks what the API server checks of a container's
// resources, which the CRD cannot: the resource names, and each request
// at most its limit.
func resourceProblems(field string, r *corev1.ResourceRequirements) []string {
	if r == nil {
		return nil
	}
	var p []string
	for _, side := range []struct {
		name string
		list corev1.ResourceList
	}{{"requests", r.Requests}, {"limits", r.Limits}} {
		for _, name := range slices.Sorted(maps.Keys(side.list)) {
			if !validResourceName(name) {
				p = append(p, fmt.Sprintf("%s.%s: %q is not a resource name (cpu, memory, ephemeral-storage, hugepages-<size> or a domain-qualified name)", field, side.name, name))
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.Requests)) {
		req := r.Requests[name]
		if limit, ok := r.Limits[name]; ok && req.Cmp(limit) > 0 {
			p = append(p, fmt.Sprintf("%s.requests.%s: %s exceeds the limit %s", field, name, req.String(), limit.String()))
		}
	}
	return p
}

func validResourceName(name corev1.ResourceName) bool {
	switch n := string(name); {
	case name == corev1.ResourceCPU, name == corev1.ResourceMemory, name == corev1.ResourceEphemeralStorage:
		return true
	case strings.HasPrefix(n, corev1.ResourceHugePagesPrefix):
		_, err := resource.ParseQuantity(strings.TrimPrefix(n, corev1.ResourceHugePagesPrefix))
		return err == nil
	default:
		return strings.Contains(n, "/") && len(validation.IsQualifiedName(n)) == 0
	}
}

// placementProblems checks the tolerations and spread constraints the way
// the API server will check the Pod template, so that a mistake there is an
// InvalidSpec status rather than a Deployment refused on every sync.
func placementProblems(s *MemcachedSpec) []string {
	var p []string
	for i, t := range s.Tolerations {
		f := fmt.Sprintf("spec.tolerations[%d]", i)
		switch t.Operator {
		case corev1.TolerationOpExists:
			if t.Value != "" {
				p = append(p, f+".value: must be empty when operator is Exists")
			}
		case corev1.TolerationOpEqual, "":
			for _, msg := range validation.IsValidLabelValue(t.Value) {
				p = append(p, fmt.Sprintf("%s.value: %q: %s", f, t.Value, msg))
			}
		default:
			p = append(p, fmt.Sprintf("%s.operator: %q is not Exists or Equal", f, t.Operator))
		}
		if t.Key == "" && t.Operator != corev1.TolerationOpExists {
			p = append(p, f+".operator: must be Exists when key is empty")
		}
		switch t.Effect {
		case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			p = append(p, fmt.Sprintf("%s.effect: %q is not NoSchedule, PreferNoSchedule or NoExecute", f, t.Effect))
		}
	}
	for i, c := range s.TopologySpreadConstraints {
		f := fmt.Sprintf("spec.topologySpreadConstraints[%d]", i)
		if c.MaxSkew < 1 {
			p = append(p, fmt.Sprintf("%s.maxSkew: %d, want at least 1", f, c.MaxSkew))
		}
		if c.TopologyKey == "" {
			p = append(p, f+".topologyKey: must not be empty")
		}
		switch c.WhenUnsatisfiable {
		case corev1.DoNotSchedule, corev1.ScheduleAnyway:
		default:
			p = append(p, fmt.Sprintf("%s.whenUnsatisfiable: %q is not DoNotSchedule or ScheduleAnyway", f, c.WhenUnsatisfiable))
		}
	}
	return p
}

// promDuration is the CRD's pattern for a ServiceMonitor interval.
var promDuration = regexp.MustCompile(`^([0-9]+(ms|s|m|h))+$`)

// labelProblems checks a label map's keys and values, in key order.
func labelProblems(field string, labels map[string]string) []string {
	var p []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		for _, msg := range validation.IsQualifiedName(k) {
			p = append(p, fmt.Sprintf("%s: key %q: %s", field, k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(labels[k]) {
			p = append(p, fmt.Sprintf("%s: value %q of %q: %s", field, labels[k], k, msg))
		}
	}
	return p
}

func ptr[T any](v T) *T { return &v }
