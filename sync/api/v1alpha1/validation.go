package v1alpha1

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Default fills in what an unset field means, as the API server does from
// the CRD's defaults, and the images, which the CRD leaves to the operator.
// The hook defaults again because an object stored under an older CRD
// reaches it too.
func (s *MemcachedSpec) Default() {
	if s.Memcached == nil {
		s.Memcached = &MemcachedConfig{}
	}
	for _, st := range Settings {
		st.setDefault(s)
	}
	if s.Image == "" {
		s.Image = DefaultImage
	}
	if s.Metrics != nil && s.Metrics.Image == "" {
		s.Metrics.Image = DefaultExporterImage
	}
	if s.LivenessCheck == "" {
		s.LivenessCheck = LivenessCheckVersion
	}
}

// Validate checks a Memcached whose spec has its defaults: the bounds and
// rules the CRD states (Settings, AllRules), for what got past an older
// CRD, and what the CRD cannot check but the API server would refuse in
// the children (label and resource name syntax, tolerations, spread
// constraints), so that such a mistake is a status condition rather than a
// child refused on every sync. Each error names the field.
func Validate(m *Memcached) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	for _, st := range Settings {
		if err := st.check(&m.Spec); err != nil {
			errs = append(errs, err)
		}
	}
	for _, r := range AllRules() {
		switch {
		case r.Holds(m):
		case r.Explain != nil:
			errs = append(errs, r.Explain(m)...)
		default:
			errs = append(errs, field.Invalid(pathOf(r.Path()), field.OmitValueType{}, r.Message))
		}
	}
	errs = append(errs, resourceErrors(spec.Child("resources"), m.Spec.Resources)...)
	if m.Spec.Metrics != nil {
		errs = append(errs, resourceErrors(spec.Child("metrics", "resources"), m.Spec.Metrics.Resources)...)
		if sm := m.Spec.Metrics.ServiceMonitor; sm != nil {
			errs = append(errs, labelErrors(spec.Child("metrics", "serviceMonitor", "labels"), sm.Labels)...)
		}
	}
	errs = append(errs, labelErrors(spec.Child("podLabels"), m.Spec.PodLabels)...)
	errs = append(errs, labelErrors(spec.Child("nodeSelector"), m.Spec.NodeSelector)...)
	for _, k := range slices.Sorted(maps.Keys(m.Spec.PodAnnotations)) {
		for _, msg := range validation.IsQualifiedName(strings.ToLower(k)) {
			errs = append(errs, field.Invalid(spec.Child("podAnnotations").Key(k), k, msg))
		}
	}
	if pc := m.Spec.PriorityClassName; pc != "" {
		for _, msg := range validation.IsDNS1123Subdomain(pc) {
			errs = append(errs, field.Invalid(spec.Child("priorityClassName"), pc, msg))
		}
	}
	errs = append(errs, placementErrors(spec, &m.Spec)...)
	return errs
}

// pathOf turns a path as rules write it ("spec.resources.limits['memory']")
// into a field path.
func pathOf(s string) *field.Path {
	var p *field.Path
	for _, part := range strings.Split(s, ".") {
		name, key, _ := strings.Cut(part, "['")
		if p == nil {
			p = field.NewPath(name)
		} else {
			p = p.Child(name)
		}
		if key != "" {
			p = p.Key(strings.TrimSuffix(key, "']"))
		}
	}
	return p
}

// resourceErrors checks what the API server checks of a container's
// resources and the CRD cannot: the resource names, and each request at
// most its limit.
func resourceErrors(path *field.Path, r *corev1.ResourceRequirements) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	for _, side := range []struct {
		name string
		list corev1.ResourceList
	}{{"requests", r.Requests}, {"limits", r.Limits}} {
		for _, name := range slices.Sorted(maps.Keys(side.list)) {
			if !validResourceName(name) {
				errs = append(errs, field.Invalid(path.Child(side.name).Key(string(name)), string(name),
					"not a resource name: cpu, memory, ephemeral-storage, hugepages-<size> or a domain-qualified name"))
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.Requests)) {
		req := r.Requests[name]
		if limit, ok := r.Limits[name]; ok && req.Cmp(limit) > 0 {
			errs = append(errs, field.Invalid(path.Child("requests").Key(string(name)), req.String(), "must not exceed the limit "+limit.String()))
		}
	}
	return errs
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

// placementErrors checks the tolerations and spread constraints the way the
// API server checks a Pod template.
func placementErrors(spec *field.Path, s *MemcachedSpec) field.ErrorList {
	var errs field.ErrorList
	for i, t := range s.Tolerations {
		p := spec.Child("tolerations").Index(i)
		switch t.Operator {
		case corev1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(p.Child("value"), t.Value, "must be empty when operator is Exists"))
			}
		case corev1.TolerationOpEqual, "":
			for _, msg := range validation.IsValidLabelValue(t.Value) {
				errs = append(errs, field.Invalid(p.Child("value"), t.Value, msg))
			}
		default:
			errs = append(errs, field.NotSupported(p.Child("operator"), t.Operator, []corev1.TolerationOperator{corev1.TolerationOpExists, corev1.TolerationOpEqual}))
		}
		if t.Key == "" && t.Operator != corev1.TolerationOpExists {
			errs = append(errs, field.Invalid(p.Child("operator"), string(t.Operator), "must be Exists when key is empty"))
		}
		switch t.Effect {
		case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			errs = append(errs, field.NotSupported(p.Child("effect"), t.Effect, []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}))
		}
	}
	for i, c := range s.TopologySpreadConstraints {
		p := spec.Child("topologySpreadConstraints").Index(i)
		if c.MaxSkew < 1 {
			errs = append(errs, field.Invalid(p.Child("maxSkew"), c.MaxSkew, "must be at least 1"))
		}
		if c.TopologyKey == "" {
			errs = append(errs, field.Required(p.Child("topologyKey"), ""))
		}
		switch c.WhenUnsatisfiable {
		case corev1.DoNotSchedule, corev1.ScheduleAnyway:
		default:
			errs = append(errs, field.NotSupported(p.Child("whenUnsatisfiable"), c.WhenUnsatisfiable, []corev1.UnsatisfiableConstraintAction{corev1.DoNotSchedule, corev1.ScheduleAnyway}))
		}
	}
	return errs
}

// labelErrors checks a label map's keys and values, in key order.
func labelErrors(path *field.Path, labels map[string]string) field.ErrorList {
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(path.Key(k), k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(labels[k]) {
			errs = append(errs, field.Invalid(path.Key(k), labels[k], msg))
		}
	}
	return errs
}
