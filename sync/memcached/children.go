package memcached

import (
	"fmt"
	"maps"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/sync/metacontroller"
)

// Ports and timings of the memcached Pods.
const (
	// Port is memcached's, on the Pods and the Service.
	Port         = contract.Port
	ExporterPort = 9150
	// memcachedUID is the memcache user of the official memcached images
	// (Debian and Alpine alike); runAsNonRoot needs it numeric.
	memcachedUID = 11211
	// preStopSleepSeconds keeps a terminating Pod serving while endpoints
	// drop it: memcached exits at once on SIGTERM.
	preStopSleepSeconds = 10
	// terminationGraceSeconds must exceed the preStop sleep.
	terminationGraceSeconds = 30
)

// object is a desired child as Metacontroller should apply it: type,
// metadata and spec, never status, which belongs to the child's own
// controller.
type object[S any] struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            S                 `json:"spec"`
}

// desiredChildren builds every child the spec calls for, of the kinds the
// CompositeController manages, in a fixed order. The agent's and the proxy
// tier's children need the agent image and kinds the CompositeController
// may not manage: while either is missing (Degraded says which), the ones
// observed stay as they are, since answering without them would make
// Metacontroller delete them and cut every client of the proxy or the
// configuration endpoint off.
func desiredChildren(p *metacontroller.Parent, s *v1alpha1.MemcachedSpec, managed map[string]bool, opts Options, observed map[string]map[string]metacontroller.Child) []any {
	children := []any{deployment(p, s)}
	if managed[ServiceKey] {
		children = append(children, service(p, s))
	}
	if managed[PDBKey] && *s.Size > 1 {
		children = append(children, podDisruptionBudget(p))
	}
	if managed[ServiceMonitorKey] && wantsServiceMonitor(s) {
		children = append(children, serviceMonitor(p, s))
	}
	if managed[NetworkPolicyKey] {
		children = append(children, networkPolicy(p, s))
	}
	switch {
	case !agentIdentityWanted(s):
	case opts.AgentImage != "" && managesAll(managed, neededKinds(s)):
		children = append(children, agentChildren(p, s, opts)...)
		if proxyEnabled(s) {
			children = append(children, proxyChildren(p, s, opts)...)
		}
	default:
		children = append(children, keepAgentChildren(p.Name, observed)...)
	}
	return children
}

func managesAll(managed map[string]bool, kinds []string) bool {
	for _, k := range kinds {
		if !managed[k] {
			return false
		}
	}
	return true
}

func wantsServiceMonitor(s *v1alpha1.MemcachedSpec) bool {
	return s.Metrics != nil && s.Metrics.Enabled && s.Metrics.ServiceMonitor != nil && s.Metrics.ServiceMonitor.Enabled
}

func metricsEnabled(s *v1alpha1.MemcachedSpec) bool { return s.Metrics != nil && s.Metrics.Enabled }

// childLabels are the labels of every child: the selector labels and
// managed-by.
func childLabels(name string) map[string]string {
	l := SelectorLabels(name)
	l[v1alpha1.LabelManagedBy] = ManagedBy
	return l
}

func childMeta(p *metacontroller.Parent) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:      p.Name,
		Namespace: p.Namespace,
		Labels:    childLabels(p.Name),
	}
}

func deployment(p *metacontroller.Parent, s *v1alpha1.MemcachedSpec) object[appsv1.DeploymentSpec] {
	name := p.Name
	podLabels := maps.Clone(s.PodLabels)
	if podLabels == nil {
		podLabels = map[string]string{}
	}
	maps.Copy(podLabels, childLabels(name))

	containers := []corev1.Container{memcachedContainer(s)}
	if metricsEnabled(s) {
		containers = append(containers, exporterContainer(s))
	}
	var initContainers []corev1.Container
	if secured(s) {
		initContainers = []corev1.Container{scriptContainer(s, checkContainer, checkScript(s))}
		containers = append(containers, scriptContainer(s, reloadContainer, reloadScript(s)))
	}
	var shareProcesses *bool
	if reloadsBySignal(s) {
		// The reload sidecar signals memcached.
		shareProcesses = ptr(true)
	}
	var fsGroup *int64
	if secured(s) {
		// The Secrets' files are readable by this group only.
		fsGroup = ptr(int64(memcachedUID))
	}
	spread := s.TopologySpreadConstraints
	if spread == nil {
		spread = defaultSpread(name)
	}
	maxUnavailable, maxSurge := intstr.FromInt32(0), intstr.FromInt32(1)

	return object[appsv1.DeploymentSpec]{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		Metadata: childMeta(p),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(*s.Size),
			Selector: &metav1.LabelSelector{MatchLabels: SelectorLabels(name)},
			// One Pod at a time, never below size: a replaced Pod
			// takes its shard of the cache with it.
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxUnavailable: &maxUnavailable,
					MaxSurge:       &maxSurge,
				},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: s.PodAnnotations},
				Spec: corev1.PodSpec{
					InitContainers:                initContainers,
					Containers:                    containers,
					Volumes:                       securityVolumes(s),
					ShareProcessNamespace:         shareProcesses,
					AutomountServiceAccountToken:  ptr(false),
					EnableServiceLinks:            ptr(false),
					TerminationGracePeriodSeconds: ptr(terminationGrace(s)),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr(true),
						RunAsUser:      ptr(int64(memcachedUID)),
						RunAsGroup:     ptr(int64(memcachedUID)),
						FSGroup:        fsGroup,
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Affinity:                  s.Affinity,
					NodeSelector:              s.NodeSelector,
					Tolerations:               s.Tolerations,
					TopologySpreadConstraints: spread,
					PriorityClassName:         s.PriorityClassName,
				},
			},
		},
	}
}

// Args returns memcached's argv for a spec with its defaults: the port, each
// memcached setting as v1alpha1.Settings says, TLS and authentication, then
// extraArgs.
func Args(s *v1alpha1.MemcachedSpec) []string {
	args := []string{"-p", strconv.Itoa(Port)}
	for _, st := range v1alpha1.Settings {
		args = append(args, st.Args(s)...)
	}
	args = append(args, securityArgs(s)...)
	return append(args, s.Memcached.ExtraArgs...)
}

func memcachedContainer(s *v1alpha1.MemcachedSpec) corev1.Container {
	port := intstr.FromString("memcached")
	return corev1.Container{
		Name:         "memcached",
		Image:        s.Image,
		Args:         Args(s),
		Env:          securityEnv(s),
		VolumeMounts: mounts(s, false),
		Ports:        []corev1.ContainerPort{{Name: "memcached", ContainerPort: Port, Protocol: corev1.ProtocolTCP}},
		Resources:    MemcachedResources(s),
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: port}},
			PeriodSeconds:    5,
			FailureThreshold: 2,
		},
		LivenessProbe:   livenessProbe(s, port),
		Lifecycle:       &corev1.Lifecycle{PreStop: preStop(s)},
		SecurityContext: restrictedContainer(),
	}
}

// livenessProbe tells a memcached that hangs from one that serves. A
// tcpSocket probe cannot: the kernel completes the handshake of a stopped
// memcached. So by default it asks memcached itself (versionCheck), with
// the shell and busybox tools of the official Alpine images; an image
// without them takes LivenessCheck TCP. Three misses ten seconds apart
// restart memcached, which loses its items: a slow answer does not.
func livenessProbe(s *v1alpha1.MemcachedSpec, port intstr.IntOrString) *corev1.Probe {
	p := &corev1.Probe{
		ProbeHandler:        corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: port}},
		InitialDelaySeconds: 10,
		PeriodSeconds:       10,
		FailureThreshold:    3,
	}
	if s.LivenessCheck != v1alpha1.LivenessCheckTCP {
		p.ProbeHandler = corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: versionCheck(localPort(s))}}
		p.TimeoutSeconds = versionCheckSeconds + 2
	}
	return p
}

// versionCheckSeconds bounds one version check.
const versionCheckSeconds = 3

// versionCheck is the command that asks the memcached on port for its
// version over loopback and passes on any answer: a binary-protocol
// VERSION request then CRLF, which memcached answers in every mode the
// operator runs it in (text and binary protocol, SASL, ASCII
// authentication; measured on 1.6.45), while a stopped one answers
// nothing. nc waits for memcached to close, which it does not: timeout
// ends it.
func versionCheck(port int) []string {
	const request = `\200\013\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\r\n`
	return []string{"sh", "-c", fmt.Sprintf(`test "$(printf '%s' | timeout %d nc 127.0.0.1 %d | wc -c)" -gt 0`, request, versionCheckSeconds, port)}
}

func exporterContainer(s *v1alpha1.MemcachedSpec) corev1.Container {
	defaults := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("10m"),
			corev1.ResourceMemory: resource.MustParse("32Mi"),
		},
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
	}
	sc := restrictedContainer()
	if reloadsBySignal(s) {
		// The Pod shares one process namespace, where a process can read
		// another's files through /proc/PID/root when both run as one
		// user: as memcached's user, the exporter could read the TLS key
		// and the users file. As another user it cannot.
		sc.RunAsUser, sc.RunAsGroup = ptr(int64(exporterUID)), ptr(int64(exporterUID))
	}
	return corev1.Container{
		Name:  "exporter",
		Image: s.Metrics.Image,
		Args: []string{
			"--memcached.address=localhost:" + strconv.Itoa(localPort(s)),
			"--web.listen-address=:" + strconv.Itoa(ExporterPort),
		},
		Ports:           []corev1.ContainerPort{{Name: "metrics", ContainerPort: ExporterPort, Protocol: corev1.ProtocolTCP}},
		Resources:       mergeResources(defaults, s.Metrics.Resources),
		SecurityContext: sc,
	}
}

// exporterUID is the user the exporter runs as when the Pod shares its
// process namespace: nobody, the exporter image's own user.
const exporterUID = 65534

// restrictedContainer is what the restricted Pod Security Standard asks of
// a container.
func restrictedContainer() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false),
		ReadOnlyRootFilesystem:   ptr(true),
		RunAsNonRoot:             ptr(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// MemcachedResources returns the memcached container's resources: the
// user's, over defaults derived from the memcached settings. The memory
// request and limit are equal, v1alpha1.MemoryMiB; the CPU request is 100m
// and there is no CPU limit.
func MemcachedResources(s *v1alpha1.MemcachedSpec) corev1.ResourceRequirements {
	mib := v1alpha1.MemoryOf(s)
	memory := *resource.NewQuantity(mib<<20, resource.BinarySI)
	defaults := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("100m"),
			corev1.ResourceMemory: memory,
		},
		Limits: corev1.ResourceList{corev1.ResourceMemory: memory},
	}
	return mergeResources(defaults, s.Resources)
}

// mergeResources lays the user's requests and limits over the defaults, key
// by key. Where the user set only one side, the default on the other side
// moves to keep the pair valid: a user limit below the default request pulls
// the request down, a user request above the default limit pushes the limit
// up.
func mergeResources(defaults corev1.ResourceRequirements, user *corev1.ResourceRequirements) corev1.ResourceRequirements {
	if user == nil {
		return defaults
	}
	out := corev1.ResourceRequirements{
		Requests: maps.Clone(defaults.Requests),
		Limits:   maps.Clone(defaults.Limits),
	}
	maps.Copy(out.Requests, user.Requests)
	maps.Copy(out.Limits, user.Limits)
	for name, limit := range user.Limits {
		if _, set := user.Requests[name]; set {
			continue
		}
		if req, ok := out.Requests[name]; ok && req.Cmp(limit) > 0 {
			out.Requests[name] = limit
		}
	}
	for name, req := range user.Requests {
		if _, set := user.Limits[name]; set {
			continue
		}
		if limit, ok := out.Limits[name]; ok && limit.Cmp(req) < 0 {
			out.Limits[name] = req
		}
	}
	return out
}

// defaultSpread spreads the Pods across nodes and zones, softly: they still
// schedule when there is only one of either. pod-template-hash keeps a
// rollout's new Pods from being counted against the old ones.
func defaultSpread(name string) []corev1.TopologySpreadConstraint {
	spread := func(key string) corev1.TopologySpreadConstraint {
		return corev1.TopologySpreadConstraint{
			MaxSkew:           1,
			TopologyKey:       key,
			WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector:     &metav1.LabelSelector{MatchLabels: SelectorLabels(name)},
			MatchLabelKeys:    []string{"pod-template-hash"},
		}
	}
	return []corev1.TopologySpreadConstraint{spread(corev1.LabelHostname), spread(corev1.LabelTopologyZone)}
}

func service(p *metacontroller.Parent, s *v1alpha1.MemcachedSpec) object[corev1.ServiceSpec] {
	ports := []corev1.ServicePort{{
		Name: "memcached", Port: Port, TargetPort: intstr.FromString("memcached"), Protocol: corev1.ProtocolTCP,
	}}
	if metricsEnabled(s) {
		ports = append(ports, corev1.ServicePort{
			Name: "metrics", Port: ExporterPort, TargetPort: intstr.FromString("metrics"), Protocol: corev1.ProtocolTCP,
		})
	}
	return object[corev1.ServiceSpec]{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		Metadata: childMeta(p),
		Spec: corev1.ServiceSpec{
			// Headless: one DNS record per ready Pod, because clients
			// shard keys across servers and need them all.
			ClusterIP: corev1.ClusterIPNone,
			Selector:  SelectorLabels(p.Name),
			Ports:     ports,
		},
	}
}

func podDisruptionBudget(p *metacontroller.Parent) object[policyv1.PodDisruptionBudgetSpec] {
	one := intstr.FromInt32(1)
	return object[policyv1.PodDisruptionBudgetSpec]{
		TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		Metadata: childMeta(p),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: &one,
			// A crash-looping Pod serves nothing: let a node drain
			// evict it rather than wait on it.
			UnhealthyPodEvictionPolicy: ptr(policyv1.AlwaysAllow),
			Selector:                   &metav1.LabelSelector{MatchLabels: SelectorLabels(p.Name)},
		},
	}
}

// serviceMonitorSpec is the part of a Prometheus Operator ServiceMonitor the
// hook sets; the type is not in k8s.io/api.
type serviceMonitorSpec struct {
	Selector  metav1.LabelSelector     `json:"selector"`
	Endpoints []serviceMonitorEndpoint `json:"endpoints"`
}

type serviceMonitorEndpoint struct {
	Port     string `json:"port"`
	Interval string `json:"interval,omitempty"`
}

func serviceMonitor(p *metacontroller.Parent, s *v1alpha1.MemcachedSpec) object[serviceMonitorSpec] {
	meta := childMeta(p)
	labels := maps.Clone(s.Metrics.ServiceMonitor.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, meta.Labels)
	meta.Labels = labels
	return object[serviceMonitorSpec]{
		TypeMeta: metav1.TypeMeta{APIVersion: "monitoring.coreos.com/v1", Kind: "ServiceMonitor"},
		Metadata: meta,
		Spec: serviceMonitorSpec{
			Selector:  metav1.LabelSelector{MatchLabels: childLabels(p.Name)},
			Endpoints: []serviceMonitorEndpoint{{Port: "metrics", Interval: s.Metrics.ServiceMonitor.Interval}},
		},
	}
}

func ptr[T any](v T) *T { return &v }

// networkPolicy lets Pods of the Memcached's namespace, and the peers the
// spec lists, reach memcached's port, and the exporter's when it runs;
// nothing else reaches the Pods (where the network plugin enforces
// NetworkPolicy). Kubelet's probes come from the node, which NetworkPolicy
// does not govern.
func networkPolicy(p *metacontroller.Parent, s *v1alpha1.MemcachedSpec) object[networkingv1.NetworkPolicySpec] {
	var np v1alpha1.NetworkPolicySpec
	if s.NetworkPolicy != nil {
		np = *s.NetworkPolicy
	}
	ingress := []networkingv1.NetworkPolicyIngressRule{ingressRule(Port, np.Memcached)}
	if metricsEnabled(s) {
		ingress = append(ingress, ingressRule(ExporterPort, np.Metrics))
	}
	return object[networkingv1.NetworkPolicySpec]{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		Metadata: childMeta(p),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: SelectorLabels(p.Name)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     ingress,
		},
	}
}

// ingressRule opens port to the Pods of the policy's namespace and to
// peers, or to every source when peers allow all.
func ingressRule(port int, peers *v1alpha1.Peers) networkingv1.NetworkPolicyIngressRule {
	tcp := corev1.ProtocolTCP
	r := networkingv1.NetworkPolicyIngressRule{
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr(intstr.FromInt(port))}},
	}
	if peers != nil && peers.AllowAll {
		return r // no from: every source
	}
	// An empty podSelector: every Pod of the policy's namespace.
	r.From = []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}
	if peers != nil {
		r.From = append(r.From, peers.From...)
	}
	return r
}
