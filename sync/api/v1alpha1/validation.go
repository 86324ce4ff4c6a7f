package v1alpha1

import (
	"maps"
	"net"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	if t := s.TLS; t != nil {
		if t.ClientCertificates == "" {
			t.ClientCertificates = ClientCertificatesNone
		}
		if t.MinVersion == "" {
			t.MinVersion = "1.2"
		}
	}
	if a := s.Auth; a != nil && a.Mode == "" {
		a.Mode = AuthModeSASL
	}
	if z := s.Zones; z != nil && z.TopologyKey == "" {
		z.TopologyKey = DefaultTopologyKey
	}
	if s.Extstore != nil {
		defaultExtstore(s.Extstore)
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
	if z := m.Spec.Zones; z != nil {
		for _, msg := range validation.IsQualifiedName(z.TopologyKey) {
			errs = append(errs, field.Invalid(spec.Child("zones", "topologyKey"), z.TopologyKey, msg))
		}
		if len(z.Names) == 0 {
			errs = append(errs, field.Required(spec.Child("zones", "names"), "at least one zone"))
		}
		if len(z.Names) > MaxZones {
			errs = append(errs, field.TooMany(spec.Child("zones", "names"), len(z.Names), MaxZones))
		}
		seen := map[string]bool{}
		for i, n := range z.Names {
			if seen[n] {
				errs = append(errs, field.Duplicate(spec.Child("zones", "names").Index(i), n))
			}
			seen[n] = true
		}
	}
	errs = append(errs, enumErrors(spec, &m.Spec)...)
	if np := m.Spec.NetworkPolicy; np != nil {
		errs = append(errs, peersErrors(spec.Child("networkPolicy", "memcached"), np.Memcached)...)
		errs = append(errs, peersErrors(spec.Child("networkPolicy", "metrics"), np.Metrics)...)
	}
	return errs
}

// enumErrors checks the fields the CRD states as enums, for what got past
// an older CRD.
func enumErrors(spec *field.Path, s *MemcachedSpec) field.ErrorList {
	var errs field.ErrorList
	if c := s.LivenessCheck; c != LivenessCheckVersion && c != LivenessCheckTCP {
		errs = append(errs, field.NotSupported(spec.Child("livenessCheck"), c, []LivenessCheck{LivenessCheckVersion, LivenessCheckTCP}))
	}
	if t := s.TLS; t != nil {
		if c := t.ClientCertificates; c != ClientCertificatesNone && c != ClientCertificatesRequired {
			errs = append(errs, field.NotSupported(spec.Child("tls", "clientCertificates"), c, []ClientCertificates{ClientCertificatesNone, ClientCertificatesRequired}))
		}
		if v := t.MinVersion; v != "1.2" && v != "1.3" {
			errs = append(errs, field.NotSupported(spec.Child("tls", "minVersion"), v, []string{"1.2", "1.3"}))
		}
	}
	if a := s.Auth; a != nil && a.Mode != AuthModeSASL && a.Mode != AuthModeASCII {
		errs = append(errs, field.NotSupported(spec.Child("auth", "mode"), a.Mode, []AuthMode{AuthModeSASL, AuthModeASCII}))
	}
	return errs
}

// peersErrors checks NetworkPolicy peers the way the API server will check
// the NetworkPolicy child: each peer names something, its selectors are
// selectors, its IP block a CIDR with exceptions inside it.
func peersErrors(path *field.Path, p *Peers) field.ErrorList {
	if p == nil {
		return nil
	}
	var errs field.ErrorList
	for i, peer := range p.From {
		at := path.Child("from").Index(i)
		if peer.PodSelector == nil && peer.NamespaceSelector == nil && peer.IPBlock == nil {
			errs = append(errs, field.Required(at, "a podSelector, a namespaceSelector or an ipBlock"))
		}
		if peer.IPBlock != nil && (peer.PodSelector != nil || peer.NamespaceSelector != nil) {
			errs = append(errs, field.Forbidden(at.Child("ipBlock"), "may not go with a podSelector or a namespaceSelector"))
		}
		for _, sel := range []struct {
			name string
			s    *metav1.LabelSelector
		}{{"podSelector", peer.PodSelector}, {"namespaceSelector", peer.NamespaceSelector}} {
			if sel.s == nil {
				continue
			}
			if _, err := metav1.LabelSelectorAsSelector(sel.s); err != nil {
				errs = append(errs, field.Invalid(at.Child(sel.name), sel.s.String(), err.Error()))
			}
		}
		if b := peer.IPBlock; b != nil {
			_, block, err := net.ParseCIDR(b.CIDR)
			if err != nil {
				errs = append(errs, field.Invalid(at.Child("ipBlock", "cidr"), b.CIDR, "not a CIDR like 10.0.0.0/8"))
				continue
			}
			// As the API server judges a NetworkPolicy: each exception a
			// strict subset of the block. One it would refuse would leave
			// the Memcached with no policy at all, open to every Pod.
			blockBits, _ := block.Mask.Size()
			for j, except := range b.Except {
				_, e, err := net.ParseCIDR(except)
				if err != nil || !block.Contains(e.IP) {
					errs = append(errs, field.Invalid(at.Child("ipBlock", "except").Index(j), except, "not a CIDR inside "+b.CIDR))
					continue
				}
				if bits, _ := e.Mask.Size(); bits <= blockBits {
					errs = append(errs, field.Invalid(at.Child("ipBlock", "except").Index(j), except, "not a strict subset of "+b.CIDR+": its prefix must be longer"))
				}
			}
		}
	}
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
