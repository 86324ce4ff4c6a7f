package memcached

import (
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/metacontroller"
)

// The shapes the features' children share: the operator's Deployments,
// PodDisruptionBudgets and NetworkPolicies, spread, container security and
// resources.

// object is a desired child as Metacontroller should apply it: type,
// metadata and spec, never status, which belongs to the child's own
// controller.
type object[S any] struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            S                 `json:"spec"`
}

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

// deploymentOf is a Deployment of the operator's: one Pod at a time, never
// below replicas. For memcached a replaced Pod takes its shard of the cache
// with it; for the agent and the proxy, clients keep a Pod to talk to.
func deploymentOf(meta metav1.ObjectMeta, replicas int32, selector map[string]string, t corev1.PodTemplateSpec) object[appsv1.DeploymentSpec] {
	maxUnavailable, maxSurge := intstr.FromInt32(0), intstr.FromInt32(1)
	return object[appsv1.DeploymentSpec]{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		Metadata: meta,
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxUnavailable: &maxUnavailable,
					MaxSurge:       &maxSurge,
				},
			},
			Template: t,
		},
	}
}

// disruptionBudget lets one of the Pods selector selects be evicted at a
// time. A crash-looping Pod serves nothing: a node drain evicts it rather
// than wait on it.
func disruptionBudget(meta metav1.ObjectMeta, selector map[string]string) object[policyv1.PodDisruptionBudgetSpec] {
	one := intstr.FromInt32(1)
	return object[policyv1.PodDisruptionBudgetSpec]{
		TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		Metadata: meta,
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable:             &one,
			UnhealthyPodEvictionPolicy: ptr(policyv1.AlwaysAllow),
			Selector:                   &metav1.LabelSelector{MatchLabels: selector},
		},
	}
}

// ingressPolicy lets into the Pods selector selects what ingress lets in,
// and nothing else (where the network plugin enforces NetworkPolicy).
func ingressPolicy(meta metav1.ObjectMeta, selector map[string]string, ingress ...networkingv1.NetworkPolicyIngressRule) object[networkingv1.NetworkPolicySpec] {
	return object[networkingv1.NetworkPolicySpec]{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		Metadata: meta,
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: selector},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     ingress,
		},
	}
}

// spreadOf puts the Pods selector selects on different nodes and zones,
// softly: they still schedule when there is only one of either.
// pod-template-hash keeps a rollout's new Pods from being counted against
// the old ones.
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

// withUser runs a container as uid and gid.
func withUser(sc *corev1.SecurityContext, uid int64) *corev1.SecurityContext {
	sc.RunAsUser, sc.RunAsGroup = ptr(uid), ptr(uid)
	return sc
}

// sidecarResources are the defaults of the small Go sidecars (the exporter,
// the agent).
func sidecarResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("10m"),
			corev1.ResourceMemory: resource.MustParse("32Mi"),
		},
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
	}
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

// container finds a container of t by name.
func container(t *corev1.PodTemplateSpec, name string) *corev1.Container {
	for i := range t.Spec.Containers {
		if t.Spec.Containers[i].Name == name {
			return &t.Spec.Containers[i]
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
