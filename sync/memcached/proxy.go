package memcached

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"strconv"
	"time"

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

// ProxyConfig is the proxy's route configuration (proxy.lua): the same
// bytes for every Memcached, a ConfigMap NAME-proxy's config.lua. It is
// static Lua that reads the pool, the slot table as data (one backend a
// line, in slot order), from the file the agent beside the proxy writes,
// and reloads it when it changes; it never raises, because in memcached
// 1.6.45 a configuration that fails makes the proxy exit. Read it before
// changing it.
//
//go:embed proxy.lua
var ProxyConfig string

// The proxy tier's files, ports and names.
const (
	// ProxyPoolFile is where the agent writes the pool and the proxy
	// reads it: an emptyDir the two containers share.
	ProxyPoolFile = proxyPoolDir + "/pool"
	proxyPoolDir  = "/run/memcached-proxy"
	// proxyConfigDir holds ProxyConfig, from the ConfigMap.
	proxyConfigDir = "/etc/memcached-proxy"
	// ProxyAgentAdminPort is the pool writer's /healthz, /readyz and
	// /metrics: Ready once it has written a pool.
	ProxyAgentAdminPort = 9092
	// proxyConnections is the proxy's -c: clients, and one connection
	// per thread to every memcached Pod.
	proxyConnections = 4096
	// proxyConfigHashAnnotation on the proxy Pods changes with
	// ProxyConfig, so that a new operator's configuration rolls the
	// proxies (which hold no data) at once rather than at their next
	// reload.
	proxyConfigHashAnnotation = "cache.example.com/proxy-config"
)

// The proxy's defaults, where spec.proxy says nothing; their bounds are
// v1alpha1's rules. The timeouts are far below memcached's own (5 s to
// connect, 3 s to read and to retry), which would hold a request for
// seconds for a Pod that is gone.
const (
	defaultProxyReplicas     = 2
	defaultProxyThreads      = 2
	defaultProxyTimeout      = time.Second
	defaultProxyRetryAfter   = time.Second
	defaultProxyFailureLimit = 3
)

func proxyEnabled(s *v1alpha1.MemcachedSpec) bool { return s.Proxy != nil && s.Proxy.Enabled }

func proxyName(name string) string { return name + v1alpha1.ProxySuffix }

// ProxySelectorLabels select a Memcached's proxy Pods.
func ProxySelectorLabels(name string) map[string]string {
	return map[string]string{v1alpha1.LabelName: proxyAppName, v1alpha1.LabelInstance: name}
}

// proxyAppName is the proxy's app.kubernetes.io/name: neither memcached's
// nor the agent's, so that no other selector matches its Pods.
const proxyAppName = "memcached-proxy"

func proxyMeta(p *metacontroller.Parent) metav1.ObjectMeta {
	l := ProxySelectorLabels(p.Name)
	l[v1alpha1.LabelManagedBy] = ManagedBy
	return metav1.ObjectMeta{Name: proxyName(p.Name), Namespace: p.Namespace, Labels: l}
}

// proxyKinds are the kinds of proxyChildren; the agent beside each proxy
// needs the kinds of its identity too (neededKinds).
var proxyKinds = []string{DeploymentKey, ConfigMapKey, ServiceKey, PDBKey, NetworkPolicyKey}

// proxyChildren are the proxy tier: the route configuration, the proxy
// Deployment, the Service clients are given, a PodDisruptionBudget and a
// NetworkPolicy.
func proxyChildren(p *metacontroller.Parent, s *v1alpha1.MemcachedSpec, opts Options) []any {
	meta := proxyMeta(p)
	one := intstr.FromInt32(1)
	var np v1alpha1.NetworkPolicySpec
	if s.NetworkPolicy != nil {
		np = *s.NetworkPolicy
	}
	return []any{
		corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: meta,
			Data:       map[string]string{"config.lua": ProxyConfig},
		},
		proxyDeployment(p, s, opts),
		object[corev1.ServiceSpec]{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			Metadata: meta,
			Spec: corev1.ServiceSpec{
				Selector: ProxySelectorLabels(p.Name),
				Ports: []corev1.ServicePort{{
					Name: "memcached", Port: Port, TargetPort: intstr.FromString("memcached"), Protocol: corev1.ProtocolTCP,
				}},
			},
		},
		object[policyv1.PodDisruptionBudgetSpec]{
			TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
			Metadata: meta,
			Spec: policyv1.PodDisruptionBudgetSpec{
				MaxUnavailable:             &one,
				UnhealthyPodEvictionPolicy: ptr(policyv1.AlwaysAllow),
				Selector:                   &metav1.LabelSelector{MatchLabels: ProxySelectorLabels(p.Name)},
			},
		},
		object[networkingv1.NetworkPolicySpec]{
			TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
			Metadata: meta,
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: ProxySelectorLabels(p.Name)},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				// Whoever may reach memcached may reach the proxy; the
				// pool writer's metrics, whoever may reach the exporter.
				Ingress: []networkingv1.NetworkPolicyIngressRule{ingressRule(Port, np.Memcached), ingressRule(ProxyAgentAdminPort, np.Metrics)},
			},
		},
	}
}

// proxyDeployment runs spec.image's memcached as the proxy, and beside it
// the agent writing the pool file from the slot table. The Pod is Ready
// once the proxy listens and the agent has written a pool.
func proxyDeployment(p *metacontroller.Parent, s *v1alpha1.MemcachedSpec, opts Options) object[appsv1.DeploymentSpec] {
	ps := s.Proxy
	replicas, threads, limit := int32(defaultProxyReplicas), int32(defaultProxyThreads), int32(defaultProxyFailureLimit)
	if ps.Replicas != nil {
		replicas = *ps.Replicas
	}
	if ps.Threads != nil {
		threads = *ps.Threads
	}
	if ps.FailureLimit != nil {
		limit = *ps.FailureLimit
	}
	seconds := func(d *metav1.Duration, def time.Duration) string {
		if d != nil {
			def = d.Duration
		}
		return strconv.FormatFloat(def.Seconds(), 'f', -1, 64)
	}
	retry := defaultProxyRetryAfter
	if ps.RetryAfter != nil {
		// routelib takes whole seconds.
		retry = ps.RetryAfter.Duration.Round(time.Second)
	}
	meta := proxyMeta(p)
	port := intstr.FromString("memcached")
	admin := intstr.FromString("admin")
	maxUnavailable, maxSurge := intstr.FromInt32(0), intstr.FromInt32(1)
	sum := sha256.Sum256([]byte(ProxyConfig))
	proxyResources := mergeResources(corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
	}, ps.Resources)
	agentResources := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
	}
	liveness := &corev1.Probe{
		ProbeHandler:        corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: port}},
		InitialDelaySeconds: 10,
		PeriodSeconds:       10,
		FailureThreshold:    3,
	}
	if s.LivenessCheck != v1alpha1.LivenessCheckTCP {
		// The proxy answers version itself, whatever its pool.
		liveness.ProbeHandler = corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: versionCheck(Port)}}
		liveness.TimeoutSeconds = versionCheckSeconds + 2
	}
	return object[appsv1.DeploymentSpec]{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		Metadata: meta,
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: ProxySelectorLabels(p.Name)},
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &maxUnavailable, MaxSurge: &maxSurge},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      meta.Labels,
					Annotations: map[string]string{proxyConfigHashAnnotation: hex.EncodeToString(sum[:8])},
				},
				Spec: corev1.PodSpec{
					// The agent follows the Memcached with the agent's
					// identity (it reads only that Memcached).
					ServiceAccountName:            agentName(p.Name),
					AutomountServiceAccountToken:  ptr(true),
					EnableServiceLinks:            ptr(false),
					TerminationGracePeriodSeconds: ptr(int64(30)),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr(true),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:  "proxy",
						Image: s.Image,
						Args: []string{
							"-p", strconv.Itoa(Port), "-t", strconv.Itoa(int(threads)), "-c", strconv.Itoa(proxyConnections),
							"-o", "proxy_config=routelib,proxy_arg=" + proxyConfigDir + "/config.lua",
						},
						Env: []corev1.EnvVar{
							{Name: "MEMCACHED_PROXY_POOL_FILE", Value: ProxyPoolFile},
							{Name: "MEMCACHED_PROXY_CONNECT_TIMEOUT", Value: seconds(ps.ConnectTimeout, defaultProxyTimeout)},
							{Name: "MEMCACHED_PROXY_READ_TIMEOUT", Value: seconds(ps.ReadTimeout, defaultProxyTimeout)},
							{Name: "MEMCACHED_PROXY_RETRY_WAIT", Value: strconv.Itoa(int(retry / time.Second))},
							{Name: "MEMCACHED_PROXY_FAILURE_LIMIT", Value: strconv.Itoa(int(limit))},
						},
						Ports: []corev1.ContainerPort{{Name: "memcached", ContainerPort: Port, Protocol: corev1.ProtocolTCP}},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "config", MountPath: proxyConfigDir, ReadOnly: true},
							{Name: "pool", MountPath: proxyPoolDir, ReadOnly: true},
						},
						Resources: proxyResources,
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: port}},
							PeriodSeconds:    5,
							FailureThreshold: 2,
						},
						LivenessProbe: liveness,
						Lifecycle: &corev1.Lifecycle{
							// Let endpoints drop the Pod before the proxy stops.
							PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: preStopSleepSeconds}},
						},
						SecurityContext: withUser(restrictedContainer(), memcachedUID),
					}, {
						Name:    "agent",
						Image:   opts.AgentImage,
						Command: []string{"/memcached-agent"},
						Args: []string{
							"--memcached=" + p.Name,
							"--listen=",
							"--admin-listen=:" + strconv.Itoa(ProxyAgentAdminPort),
							"--pool-file=" + ProxyPoolFile,
						},
						Env: []corev1.EnvVar{
							{Name: "GOMEMLIMIT", Value: strconv.FormatInt(agentResources.Limits.Memory().Value()*9/10, 10)},
							{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
							{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
						},
						Ports:        []corev1.ContainerPort{{Name: "admin", ContainerPort: ProxyAgentAdminPort, Protocol: corev1.ProtocolTCP}},
						VolumeMounts: []corev1.VolumeMount{{Name: "pool", MountPath: proxyPoolDir}},
						// Ready once a pool is written: before, the proxy
						// has none and would fail every request.
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: admin}},
							PeriodSeconds: 2,
						},
						LivenessProbe: &corev1.Probe{
							ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: admin}},
							PeriodSeconds:    10,
							FailureThreshold: 3,
						},
						Resources:       agentResources,
						SecurityContext: withUser(restrictedContainer(), agentUID),
					}},
					Volumes: []corev1.Volume{
						{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: meta.Name},
						}}},
						{Name: "pool", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
							Medium: corev1.StorageMediumMemory, SizeLimit: ptr(resource.MustParse("1Mi")),
						}}},
					},
					PriorityClassName:         s.PriorityClassName,
					TopologySpreadConstraints: spreadOf(ProxySelectorLabels(p.Name)),
				},
			},
		},
	}
}

// withUser runs a container as uid and gid.
func withUser(sc *corev1.SecurityContext, uid int64) *corev1.SecurityContext {
	sc.RunAsUser, sc.RunAsGroup = ptr(uid), ptr(uid)
	return sc
}

// proxyEndpoint is the host:port clients of the proxy are given, once its
// Service is observed; an invalid spec keeps what the status said.
func proxyEndpoint(p *metacontroller.Parent, spec *v1alpha1.MemcachedSpec, obs observed) string {
	if spec == nil {
		return p.Status.ProxyEndpoint
	}
	if !proxyEnabled(spec) || !obs.hasChild(ServiceKey, proxyName(p.Name)) {
		return ""
	}
	return proxyName(p.Name) + "." + p.Namespace + ".svc:" + strconv.Itoa(Port)
}
