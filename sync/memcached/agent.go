package memcached

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/sync/metacontroller"
)

// The agent (cmd/memcached-agent) runs in its own Deployment for the
// features that need it there (discovery, keepWarm), and beside each proxy
// (writing its pool). Either way it runs as NAME-agent's ServiceAccount,
// whose Role lets it read its own Memcached and what the features add.

// Keys of the child kinds the agent needs beside those of the memcached
// Pods: its ServiceAccount and the Role that lets it read its Memcached.
const (
	ServiceAccountKey = "ServiceAccount.v1"
	RoleKey           = "Role.rbac.authorization.k8s.io/v1"
	RoleBindingKey    = "RoleBinding.rbac.authorization.k8s.io/v1"
)

// ConfigMapKey is the children map key of ConfigMaps: the agent reports
// its copies' progress in NAME-agent's data.
const ConfigMapKey = "ConfigMap.v1"

// The agent's ports and user.
const (
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

// agentName names the agent's children.
func agentName(name string) string { return contract.AgentName(name) }

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

// agentWanted tells whether the Memcached runs the agent Deployment: to
// serve the configuration endpoint, or to hand Pods' items on (keepWarm,
// and with zones the refills).
func agentWanted(s *v1alpha1.MemcachedSpec) bool { return discoveryEnabled(s) || handsOff(s) }

// agentIdentityWanted tells whether an agent runs anywhere: in its
// Deployment, or beside the proxies (writing their pool). Either needs the
// agent's ServiceAccount and Role.
func agentIdentityWanted(s *v1alpha1.MemcachedSpec) bool { return agentWanted(s) || proxyEnabled(s) }

// agentReady tells whether the hook can build the agent's and the proxy's
// children: it needs the agent image and every kind they need.
func (d *desire) agentReady() bool {
	return d.opts.AgentImage != "" && managesAll(d.managed, neededKinds(d.s))
}

type agent struct{ noFeature }

func (agent) agentKinds(s *v1alpha1.MemcachedSpec) []string {
	var kinds []string
	if agentIdentityWanted(s) {
		kinds = append(kinds, ServiceAccountKey, RoleKey, RoleBindingKey)
	}
	if agentWanted(s) {
		kinds = append(kinds, DeploymentKey, PDBKey, NetworkPolicyKey)
	}
	return kinds
}

// children are the objects the agent needs: its identity and the few
// permissions it has; where its Deployment runs (agentWanted), the
// Deployment, the features' children beside it, a PodDisruptionBudget and
// a NetworkPolicy. While the hook cannot build them (no agent image, or a
// kind the CompositeController does not manage: Degraded says which), the
// observed ones stay as they are, since answering without them would make
// Metacontroller delete them and cut every client of the proxy or the
// configuration endpoint off.
func (agent) children(d *desire) []any {
	switch {
	case !agentIdentityWanted(d.s):
		return nil
	case !d.agentReady():
		return keepAgentChildren(d.p.Name, d.observed)
	}
	p := d.p
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
	for _, f := range features {
		rules = append(rules, f.agentRules(d)...)
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
	if !agentWanted(d.s) {
		return children
	}
	children = append(children, agentDeployment(d))
	for _, f := range features {
		children = append(children, f.besideAgent(d)...)
	}
	// The endpoint is open to whoever may reach memcached, the agent's
	// metrics to whoever may reach the exporter's.
	np := peersOf(d.s)
	return append(children,
		disruptionBudget(agentMeta(p, name), AgentSelectorLabels(p.Name)),
		ingressPolicy(agentMeta(p, name), AgentSelectorLabels(p.Name), ingressRule(DiscoveryPort, np.Memcached), ingressRule(AgentAdminPort, np.Metrics)))
}

// agentDeployment runs the agent, answering on DiscoveryPort where
// discovery asks it to, with the features' changes to its Pod.
func agentDeployment(d *desire) any {
	p, s := d.p, d.s
	listen := ""
	if discoveryEnabled(s) {
		listen = ":" + strconv.Itoa(DiscoveryPort)
	}
	var res *corev1.ResourceRequirements
	if s.Discovery != nil {
		res = s.Discovery.Resources
	}
	c := agentContainer(p, d.opts, listen, AgentAdminPort, mergeResources(sidecarResources(), res))
	c.Ports = append([]corev1.ContainerPort{{Name: "discovery", ContainerPort: DiscoveryPort, Protocol: corev1.ProtocolTCP}}, c.Ports...)
	t := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: agentLabels(p.Name)}, Spec: agentPodSpec(p, s)}
	t.Spec.SecurityContext.RunAsUser, t.Spec.SecurityContext.RunAsGroup = ptr(int64(agentUID)), ptr(int64(agentUID))
	t.Spec.Containers = []corev1.Container{c}
	t.Spec.TopologySpreadConstraints = spreadOf(AgentSelectorLabels(p.Name))
	for _, f := range features {
		f.agentPod(s, &t)
	}
	return deploymentOf(agentMeta(p, agentName(p.Name)), agentReplicas, AgentSelectorLabels(p.Name), t)
}

// agentPodSpec is what the Pods an agent runs in (its Deployment's, the
// proxy's) share: the agent watches its Memcached through the API with the
// agent's ServiceAccount's token.
func agentPodSpec(p *metacontroller.Parent, s *v1alpha1.MemcachedSpec) corev1.PodSpec {
	return corev1.PodSpec{
		ServiceAccountName:            agentName(p.Name),
		AutomountServiceAccountToken:  ptr(true),
		EnableServiceLinks:            ptr(false),
		TerminationGracePeriodSeconds: ptr(int64(30)),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		PriorityClassName: s.PriorityClassName,
	}
}

// agentContainer runs the agent for the Memcached p names, answering
// configuration requests on listen ("": none) and its /healthz, /readyz
// and /metrics on admin. It is Ready once it has something to serve: a
// server list for the endpoint, a pool written for the proxy beside it
// and loaded by it.
func agentContainer(p *metacontroller.Parent, opts Options, listen string, admin int32, resources corev1.ResourceRequirements) corev1.Container {
	port := intstr.FromString("admin")
	return corev1.Container{
		Name:    "agent",
		Image:   opts.AgentImage,
		Command: []string{"/memcached-agent"},
		Args: []string{
			"--memcached=" + p.Name,
			"--listen=" + listen,
			"--admin-listen=:" + strconv.Itoa(int(admin)),
		},
		Env: []corev1.EnvVar{
			// Lets the Go runtime collect harder before the limit: 90%
			// of it.
			{Name: "GOMEMLIMIT", Value: strconv.FormatInt(resources.Limits.Memory().Value()*9/10, 10)},
			// Who it is, for the lock it takes on a leaving memcached
			// and the events it writes.
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		},
		Ports: []corev1.ContainerPort{{Name: "admin", ContainerPort: admin, Protocol: corev1.ProtocolTCP}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: port}},
			PeriodSeconds: 2,
		},
		LivenessProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: port}},
			PeriodSeconds:    10,
			FailureThreshold: 3,
		},
		Resources:       resources,
		SecurityContext: restrictedContainer(),
	}
}

// keepAgentChildren answers, as keepChildren does, the observed children
// of the agent and the proxy tier (named NAME-agent, NAME-discovery or
// NAME-proxy): what stays while the hook cannot build them.
func keepAgentChildren(name string, children map[string]map[string]metacontroller.Child) []any {
	names := map[string]bool{agentName(name): true, discoveryName(name): true, proxyName(name): true}
	ours := map[string]map[string]metacontroller.Child{}
	for kind, objs := range children {
		for key, c := range objs {
			if names[c.Metadata.Name] {
				if ours[kind] == nil {
					ours[kind] = map[string]metacontroller.Child{}
				}
				ours[kind][key] = c
			}
		}
	}
	return keepChildren(ours)
}
