package memcached

import (
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/sync/metacontroller"
)

// Keys of the child kinds the agent needs beside those of the memcached
// Pods: its ServiceAccount and the Role that lets it read its Memcached.
const (
	ServiceAccountKey = "ServiceAccount.v1"
	RoleKey           = "Role.rbac.authorization.k8s.io/v1"
	RoleBindingKey    = "RoleBinding.rbac.authorization.k8s.io/v1"
)

// The agent's ports and user.
const (
	// DiscoveryPort is where the agent answers "config get cluster", on
	// its Pods and on the Service NAME-discovery: memcached's, as clients
	// expect of a configuration endpoint.
	DiscoveryPort = 11211
	// AgentAdminPort serves the agent's /healthz, /readyz and /metrics.
	AgentAdminPort = 9091
	// agentUID is the nonroot user of the distroless image the hook and
	// the agent share.
	agentUID = 65532
	// agentReplicas keep the endpoint answering while one agent Pod is
	// replaced or its node drained.
	agentReplicas = 2
)

// agentAppName is the app.kubernetes.io/name of the agent's objects and
// Pods: not memcached's, so that neither the memcached Deployment's
// selector nor the Pods the customize hook asks for ever match them.
const agentAppName = "memcached-agent"

// Names of the agent's children.
func agentName(name string) string     { return contract.AgentName(name) }
func discoveryName(name string) string { return name + v1alpha1.DiscoverySuffix }

// AgentSelectorLabels select a Memcached's agent Pods.
func AgentSelectorLabels(name string) map[string]string {
	return map[string]string{v1alpha1.LabelName: agentAppName, v1alpha1.LabelInstance: name}
}

func agentLabels(name string) map[string]string {
	l := AgentSelectorLabels(name)
	l[v1alpha1.LabelManagedBy] = ManagedBy
	return l
}

func agentMeta(p *metacontroller.Parent, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: p.Namespace, Labels: agentLabels(p.Name)}
}

func discoveryEnabled(s *v1alpha1.MemcachedSpec) bool {
	return s.Discovery != nil && s.Discovery.Enabled
}

func keepWarm(s *v1alpha1.MemcachedSpec) bool {
	return s.Rollout != nil && s.Rollout.KeepWarm
}

// agentWanted tells whether the Memcached runs the agent Deployment: to
// serve the configuration endpoint, or to hand leaving Pods' items on.
func agentWanted(s *v1alpha1.MemcachedSpec) bool { return discoveryEnabled(s) || keepWarm(s) }

// agentIdentityWanted tells whether an agent runs anywhere: in its
// Deployment, or beside the proxies (writing their pool). Either needs the
// agent's ServiceAccount and Role.
func agentIdentityWanted(s *v1alpha1.MemcachedSpec) bool { return agentWanted(s) || proxyEnabled(s) }

// neededKinds are the child kinds a spec's agent and proxy need the
// CompositeController to manage. They come all or none: an agent without
// its Role could not read its Memcached.
func neededKinds(s *v1alpha1.MemcachedSpec) []string {
	var kinds []string
	if agentIdentityWanted(s) {
		kinds = append(kinds, ServiceAccountKey, RoleKey, RoleBindingKey)
	}
	if agentWanted(s) {
		kinds = append(kinds, DeploymentKey, PDBKey, NetworkPolicyKey)
	}
	if discoveryEnabled(s) {
		kinds = append(kinds, ServiceKey)
	}
	if keepWarm(s) {
		kinds = append(kinds, ConfigMapKey)
	}
	if proxyEnabled(s) {
		kinds = append(kinds, proxyKinds...)
	}
	slices.Sort(kinds)
	return slices.Compact(kinds)
}

// ConfigMapKey is the children map key of ConfigMaps: the agent reports
// its copies' progress in NAME-agent's data.
const ConfigMapKey = "ConfigMap.v1"

// agentChildren are the objects the agent needs: its identity and the few
// permissions it has; where its Deployment runs (agentWanted), the
// Deployment, a PodDisruptionBudget and a NetworkPolicy, the Service
// clients of the configuration endpoint are given, and the ConfigMap it
// reports hand-offs in.
func agentChildren(p *metacontroller.Parent, s *v1alpha1.MemcachedSpec, opts Options) []any {
	name := agentName(p.Name)
	// Its own Memcached and nothing else: get, and list and watch, which
	// the API server authorizes by name when the request selects
	// metadata.name (the agent's watch does).
	rules := []rbacv1.PolicyRule{{
		APIGroups:     []string{v1alpha1.Group},
		Resources:     []string{"memcacheds"},
		ResourceNames: []string{p.Name},
		Verbs:         []string{"get", "list", "watch"},
	}}
	if keepWarm(s) {
		// Where it reports hand-offs (the hook reads it), and the events
		// that tell users what was handed on. Events cannot be limited
		// by name: they are made, not updated.
		rules = append(rules, rbacv1.PolicyRule{
			APIGroups:     []string{""},
			Resources:     []string{"configmaps"},
			ResourceNames: []string{name},
			Verbs:         []string{"get", "update", "patch"},
		}, rbacv1.PolicyRule{
			APIGroups: []string{"", "events.k8s.io"},
			Resources: []string{"events"},
			Verbs:     []string{"create"},
		})
	}
	children := []any{
		corev1.ServiceAccount{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: agentMeta(p, name),
		},
		rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: agentMeta(p, name),
			Rules:      rules,
		},
		rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: agentMeta(p, name),
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: p.Namespace}},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		},
	}
	if !agentWanted(s) {
		return children
	}
	children = append(children, agentDeployment(p, s, opts))
	if discoveryEnabled(s) {
		children = append(children, discoveryService(p))
	}
	if keepWarm(s) {
		// No data: the agent writes it, and since the hook never sets
		// it, Metacontroller's three-way merge leaves it alone.
		children = append(children, corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: agentMeta(p, name),
		})
	}
	return append(children, agentPodDisruptionBudget(p), agentNetworkPolicy(p, s))
}

func agentDeployment(p *metacontroller.Parent, s *v1alpha1.MemcachedSpec, opts Options) object[appsv1.DeploymentSpec] {
	name := agentName(p.Name)
	maxUnavailable, maxSurge := intstr.FromInt32(0), intstr.FromInt32(1)
	admin := intstr.FromString("admin")
	listen := ""
	if discoveryEnabled(s) {
		listen = ":" + strconv.Itoa(DiscoveryPort)
	}
	args := []string{
		"--memcached=" + p.Name,
		"--listen=" + listen,
		"--admin-listen=:" + strconv.Itoa(AgentAdminPort),
	}
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	if s.TLS != nil {
		// The endpoint speaks TLS with memcached's own certificate, and
		// asks for client certificates when memcached does: clients that
		// use TLS to memcached use it to the endpoint too. The Secret is
		// mounted as a directory, never with subPath, so a renewed
		// certificate reaches the agent, which reloads it.
		const dir = "/run/memcached-agent/tls"
		volumes = append(volumes, corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: s.TLS.SecretName, DefaultMode: ptr(int32(0o440))},
		}})
		mounts = append(mounts, corev1.VolumeMount{Name: "tls", MountPath: dir, ReadOnly: true})
		args = append(args, "--tls-cert-file="+dir+"/tls.crt", "--tls-key-file="+dir+"/tls.key")
		if s.TLS.ClientCertificates == v1alpha1.ClientCertificatesRequired {
			args = append(args, "--client-ca-file="+dir+"/ca.crt")
		}
		if s.TLS.MinVersion != "" {
			args = append(args, "--tls-min-version="+s.TLS.MinVersion)
		}
	}
	var res *corev1.ResourceRequirements
	if s.Discovery != nil {
		res = s.Discovery.Resources
	}
	resources := mergeResources(corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("10m"),
			corev1.ResourceMemory: resource.MustParse("32Mi"),
		},
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
	}, res)
	var fsGroup *int64
	if s.TLS != nil {
		fsGroup = ptr(int64(agentUID))
	}
	return object[appsv1.DeploymentSpec]{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		Metadata: agentMeta(p, name),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(agentReplicas)),
			Selector: &metav1.LabelSelector{MatchLabels: AgentSelectorLabels(p.Name)},
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxUnavailable: &maxUnavailable,
					MaxSurge:       &maxSurge,
				},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: agentLabels(p.Name)},
				Spec: corev1.PodSpec{
					ServiceAccountName: name,
					// The agent watches its Memcached through the API
					// with this account's token.
					AutomountServiceAccountToken:  ptr(true),
					EnableServiceLinks:            ptr(false),
					TerminationGracePeriodSeconds: ptr(int64(30)),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr(true),
						RunAsUser:      ptr(int64(agentUID)),
						RunAsGroup:     ptr(int64(agentUID)),
						FSGroup:        fsGroup,
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:    "agent",
						Image:   opts.AgentImage,
						Command: []string{"/memcached-agent"},
						Args:    args,
						Env: []corev1.EnvVar{
							// Lets the Go runtime collect harder before the
							// limit: 90% of it.
							{Name: "GOMEMLIMIT", Value: strconv.FormatInt(resources.Limits.Memory().Value()*9/10, 10)},
							// Who it is, for the lock it takes on a leaving
							// memcached and the events it writes.
							{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
							{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
						},
						Ports: []corev1.ContainerPort{
							{Name: "discovery", ContainerPort: DiscoveryPort, Protocol: corev1.ProtocolTCP},
							{Name: "admin", ContainerPort: AgentAdminPort, Protocol: corev1.ProtocolTCP},
						},
						// Ready once it has a server list to serve: before
						// that the Service sends clients elsewhere.
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: admin}},
							PeriodSeconds: 2,
						},
						LivenessProbe: &corev1.Probe{
							ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: admin}},
							PeriodSeconds:    10,
							FailureThreshold: 3,
						},
						VolumeMounts:    mounts,
						Resources:       resources,
						SecurityContext: restrictedContainer(),
					}},
					Volumes:                   volumes,
					PriorityClassName:         s.PriorityClassName,
					TopologySpreadConstraints: spreadOf(AgentSelectorLabels(p.Name)),
				},
			},
		},
	}
}

// spreadOf puts the Pods selector selects (the agents, the proxies) on
// different nodes and zones where it can.
func spreadOf(selector map[string]string) []corev1.TopologySpreadConstraint {
	spread := func(key string) corev1.TopologySpreadConstraint {
		return corev1.TopologySpreadConstraint{
			MaxSkew:           1,
			TopologyKey:       key,
			WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector:     &metav1.LabelSelector{MatchLabels: selector},
			MatchLabelKeys:    []string{"pod-template-hash"},
		}
	}
	return []corev1.TopologySpreadConstraint{spread(corev1.LabelHostname), spread(corev1.LabelTopologyZone)}
}

// discoveryService is what clients are given: a ClusterIP Service, since
// any agent answers the same list.
func discoveryService(p *metacontroller.Parent) object[corev1.ServiceSpec] {
	return object[corev1.ServiceSpec]{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		Metadata: agentMeta(p, discoveryName(p.Name)),
		Spec: corev1.ServiceSpec{
			Selector: AgentSelectorLabels(p.Name),
			Ports: []corev1.ServicePort{{
				Name: "discovery", Port: DiscoveryPort, TargetPort: intstr.FromString("discovery"), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
}

func agentPodDisruptionBudget(p *metacontroller.Parent) object[policyv1.PodDisruptionBudgetSpec] {
	one := intstr.FromInt32(1)
	return object[policyv1.PodDisruptionBudgetSpec]{
		TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		Metadata: agentMeta(p, agentName(p.Name)),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable:             &one,
			UnhealthyPodEvictionPolicy: ptr(policyv1.AlwaysAllow),
			Selector:                   &metav1.LabelSelector{MatchLabels: AgentSelectorLabels(p.Name)},
		},
	}
}

// agentNetworkPolicy opens the endpoint to whoever may reach memcached, and
// the agent's metrics to whoever may reach the exporter's.
func agentNetworkPolicy(p *metacontroller.Parent, s *v1alpha1.MemcachedSpec) object[networkingv1.NetworkPolicySpec] {
	var np v1alpha1.NetworkPolicySpec
	if s.NetworkPolicy != nil {
		np = *s.NetworkPolicy
	}
	return object[networkingv1.NetworkPolicySpec]{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		Metadata: agentMeta(p, agentName(p.Name)),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: AgentSelectorLabels(p.Name)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{ingressRule(DiscoveryPort, np.Memcached), ingressRule(AgentAdminPort, np.Metrics)},
		},
	}
}

// configurationEndpoint is the host:port clients are given, once the
// Service that serves it is observed; an invalid spec keeps what the status
// said, as it keeps the children.
func configurationEndpoint(p *metacontroller.Parent, spec *v1alpha1.MemcachedSpec, obs observed) string {
	if spec == nil {
		return p.Status.ConfigurationEndpoint
	}
	if !discoveryEnabled(spec) || !obs.hasChild(ServiceKey, discoveryName(p.Name)) {
		return ""
	}
	return discoveryName(p.Name) + "." + p.Namespace + ".svc:" + strconv.Itoa(DiscoveryPort)
}
