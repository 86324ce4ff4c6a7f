package memcached

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/metacontroller"
)

// ProxyConfig is the proxy's route configuration (proxy.lua): the same
// bytes for every Memcached, with zones or without, a ConfigMap
// NAME-proxy's config.lua. It is static Lua that reads the pool, the slot
// tables as data (a pool a zone, one backend a line, in slot order; a
// Memcached without zones is the one zone "", contract.RenderPool), from
// the file the agent beside the proxy writes, and reloads it when it
// changes. The file decides the routes: without zones every command goes
// to the one pool; with zones reads go to the proxy's own zone
// (ProxyLocalZoneEnv) and fail over to the others, writes go to every zone.
// It never raises, because in memcached 1.6.45 a configuration that fails
// makes the proxy exit. Read it before changing it.
//
//go:embed proxy.lua
var ProxyConfig string

// ProxyLocalZoneEnv names, in the proxy container's environment, the zone
// the proxy runs in: its reads go there first.
const ProxyLocalZoneEnv = "MEMCACHED_PROXY_LOCAL_ZONE"

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

// proxyEnabled tells whether the proxy tier runs: asked for, or with
// zones, whose one address it is.
func proxyEnabled(s *v1alpha1.MemcachedSpec) bool { return s.ProxyOn() }

// proxySpec is spec.proxy, empty when zones turned the proxy on alone.
func proxySpec(s *v1alpha1.MemcachedSpec) *v1alpha1.ProxySpec {
	if s.Proxy == nil {
		return &v1alpha1.ProxySpec{}
	}
	return s.Proxy
}

// proxyCellMeta is the metadata of a cell's proxy Deployment and budget:
// NAME-proxy, or a zone's NAME-proxy-ZONE.
func proxyCellMeta(p *metacontroller.Parent, zone string) metav1.ObjectMeta {
	meta := proxyMeta(p)
	if zone != "" {
		meta.Name = proxyName(p.Name) + "-" + zone
		meta.Labels[v1alpha1.LabelZone] = zone
	}
	return meta
}

// proxyCellSelector selects a cell's proxy Pods.
func proxyCellSelector(name, zone string) map[string]string {
	l := ProxySelectorLabels(name)
	if zone != "" {
		l[v1alpha1.LabelZone] = zone
	}
	return l
}

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

type proxy struct{ noFeature }

// agentKinds are the proxy tier's kinds; the agent beside each proxy needs
// the agent's identity too (agent.agentKinds).
func (proxy) agentKinds(s *v1alpha1.MemcachedSpec) []string {
	if proxyEnabled(s) {
		return []string{DeploymentKey, ConfigMapKey, ServiceKey, PDBKey, NetworkPolicyKey}
	}
	return nil
}

// children are the proxy tier: the route configuration, the proxy
// Deployment, the Service clients are given, a PodDisruptionBudget and a
// NetworkPolicy. While the hook cannot build the agent's children, the
// agent keeps the proxy's as observed (agent.children).
func (proxy) children(d *desire) []any {
	if !proxyEnabled(d.s) || !d.agentReady() {
		return nil
	}
	p := d.p
	meta := proxyMeta(p)
	np := peersOf(d.s)
	service := corev1.ServiceSpec{
		Selector: ProxySelectorLabels(p.Name),
		Ports: []corev1.ServicePort{{
			Name: "memcached", Port: Port, TargetPort: intstr.FromString("memcached"), Protocol: corev1.ProtocolTCP,
		}},
	}
	if zoned(d.s) {
		// One address for every zone, whose endpoints in the client's
		// own zone it prefers (Kubernetes 1.31 and later, or 1.30 with
		// the ServiceTrafficDistribution feature gate: an API server
		// without it drops the field, and clients then reach every
		// zone's proxies alike).
		service.TrafficDistribution = ptr(corev1.ServiceTrafficDistributionPreferClose)
	}
	var deployments, budgets []any
	for _, c := range d.cells {
		zone := c.zone
		deployments = append(deployments, proxyDeployment(d, zone))
		// A budget per cell: one over every zone would let one zone's
		// unready proxies block every drain in the others.
		budgets = append(budgets, disruptionBudget(proxyCellMeta(p, zone), proxyCellSelector(p.Name, zone)))
	}
	children := []any{
		corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: meta,
			Data:       map[string]string{"config.lua": ProxyConfig},
		},
	}
	children = append(children, deployments...)
	children = append(children, object[corev1.ServiceSpec]{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		Metadata: meta,
		Spec:     service,
	})
	children = append(children, budgets...)
	return append(children,
		// Whoever may reach memcached may reach the proxy; the pool
		// writer's metrics, whoever may reach the exporter.
		ingressPolicy(meta, ProxySelectorLabels(p.Name), ingressRule(Port, np.Memcached), ingressRule(ProxyAgentAdminPort, np.Metrics)),
	)
}

// proxyEnv is what the proxy's config.lua reads from its environment: the
// pool file, and spec.proxy's timeouts, retry wait and failure limit or
// their defaults.
func proxyEnv(ps *v1alpha1.ProxySpec) []corev1.EnvVar {
	limit := int32(defaultProxyFailureLimit)
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
	return []corev1.EnvVar{
		{Name: "MEMCACHED_PROXY_POOL_FILE", Value: ProxyPoolFile},
		{Name: "MEMCACHED_PROXY_CONNECT_TIMEOUT", Value: seconds(ps.ConnectTimeout, defaultProxyTimeout)},
		{Name: "MEMCACHED_PROXY_READ_TIMEOUT", Value: seconds(ps.ReadTimeout, defaultProxyTimeout)},
		{Name: "MEMCACHED_PROXY_RETRY_WAIT", Value: strconv.Itoa(int(retry / time.Second))},
		{Name: "MEMCACHED_PROXY_FAILURE_LIMIT", Value: strconv.Itoa(int(limit))},
	}
}

// proxyDeployment runs spec.image's memcached as the proxy, and beside it
// the agent writing the pool file from the slot table. The Pod is Ready
// once the proxy listens and the agent has written a pool and heard the
// proxy say it loaded one (the agent's --proxy-addr defaults to the proxy
// beside it, 127.0.0.1:11211). With zones,
// each zone has its own, NAME-proxy-ZONE, pinned to the zone, whose proxy
// reads from the zone's Pods first (MEMCACHED_PROXY_LOCAL_ZONE).
func proxyDeployment(d *desire, zone string) any {
	p, s := d.p, d.s
	ps := proxySpec(s)
	replicas, threads := int32(defaultProxyReplicas), int32(defaultProxyThreads)
	if ps.Replicas != nil {
		replicas = *ps.Replicas
	}
	if ps.Threads != nil {
		threads = *ps.Threads
	}
	meta := proxyMeta(p)
	sum := sha256.Sum256([]byte(ProxyConfig))
	proxyResources := mergeResources(corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
	}, ps.Resources)
	// The agent writes the pool, and is Ready once the proxy says it has
	// loaded one: before, the proxy would fail every request.
	agent := agentContainer(p, d.opts, "", ProxyAgentAdminPort, sidecarResources())
	agent.Args = append(agent.Args, "--pool-file="+ProxyPoolFile)
	agent.VolumeMounts = []corev1.VolumeMount{{Name: "pool", MountPath: proxyPoolDir}}
	withUser(agent.SecurityContext, agentUID)
	// The agent follows the Memcached with the agent's identity (it reads
	// only that Memcached).
	spec := agentPodSpec(p, s)
	spec.Containers = []corev1.Container{{
		Name:  "proxy",
		Image: s.Image,
		Args: []string{
			"-p", strconv.Itoa(Port), "-t", strconv.Itoa(int(threads)), "-c", strconv.Itoa(proxyConnections),
			"-o", "proxy_config=routelib,proxy_arg=" + proxyConfigDir + "/config.lua",
		},
		Env:   proxyEnv(ps),
		Ports: []corev1.ContainerPort{{Name: "memcached", ContainerPort: Port, Protocol: corev1.ProtocolTCP}},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "config", MountPath: proxyConfigDir, ReadOnly: true},
			{Name: "pool", MountPath: proxyPoolDir, ReadOnly: true},
		},
		Resources: proxyResources,
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("memcached")}},
			PeriodSeconds:    5,
			FailureThreshold: 2,
		},
		// The proxy answers version itself, whatever its pool.
		LivenessProbe: livenessProbe(s, Port),
		Lifecycle: &corev1.Lifecycle{
			// Let endpoints drop the Pod before the proxy stops.
			PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: preStopSleepSeconds}},
		},
		SecurityContext: withUser(restrictedContainer(), memcachedUID),
	}, agent}
	spec.Volumes = []corev1.Volume{
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: meta.Name},
		}}},
		{Name: "pool", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: ptr(resource.MustParse("1Mi")),
		}}},
	}
	spec.TopologySpreadConstraints = spreadOf(ProxySelectorLabels(p.Name))
	selector := ProxySelectorLabels(p.Name)
	t := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      meta.Labels,
			Annotations: map[string]string{proxyConfigHashAnnotation: hex.EncodeToString(sum[:8])},
		},
		Spec: spec,
	}
	if zone == "" {
		return deploymentOf(meta, replicas, selector, t)
	}
	selector[v1alpha1.LabelZone] = zone
	t.Spec.TopologySpreadConstraints = nil
	t = inZone(t, s.Zones.TopologyKey, zone, selector)
	// A zone's proxies go where its memcached Pods may: a zone whose
	// Nodes are tainted for the cache would otherwise have none, and its
	// clients would be sent to another zone's.
	t.Spec.Tolerations = s.Tolerations
	meta.Name = proxyCellMeta(p, zone).Name
	meta.Labels = t.Labels
	proxy := container(&t, "proxy")
	proxy.Env = append(proxy.Env, corev1.EnvVar{Name: ProxyLocalZoneEnv, Value: zone})
	return deploymentOf(meta, replicas, selector, t)
}

// report gives the host:port clients of the proxy are given, once its
// Service is observed; an invalid spec keeps what the status said.
func (proxy) report(pl *plan, st *v1alpha1.MemcachedStatus) {
	if pl.spec == nil {
		st.ProxyEndpoint = pl.p.Status.ProxyEndpoint
		keepProxyVersions(pl.p.Status, st)
		return
	}
	st.ProxyEndpoint = pl.obs.serviceEndpoint(pl.p, proxyEnabled(pl.spec), proxyName(pl.p.Name), Port)
	if !proxyEnabled(pl.spec) {
		return
	}
	if len(st.Zones) == 0 {
		st.SlotTable.ProxyVersion = proxyVersion(pl.obs, "", st.SlotTable.Version)
	}
	for i := range st.Zones {
		t := &st.Zones[i].SlotTable
		t.ProxyVersion = proxyVersion(pl.obs, st.Zones[i].Name, t.Version)
	}
}

// keepProxyVersions keeps what the status said the proxies loaded, for an
// invalid spec (whose proxy tier is kept as observed), never above a
// table's version.
func keepProxyVersions(prev v1alpha1.MemcachedStatus, st *v1alpha1.MemcachedStatus) {
	st.SlotTable.ProxyVersion = min(prev.SlotTable.ProxyVersion, st.SlotTable.Version)
	for i := range st.Zones {
		for _, z := range prev.Zones {
			if z.Name == st.Zones[i].Name {
				st.Zones[i].SlotTable.ProxyVersion = min(z.SlotTable.ProxyVersion, st.Zones[i].SlotTable.Version)
			}
		}
	}
}

// proxyVersion is the highest version of zone's table (version, "" without
// zones) that every proxy has loaded, as the agents beside them reported
// (status.slotTable.proxyVersion): the lowest they said, never above the
// table's own. A Ready proxy that has not said counts as having loaded
// nothing; one that is not Ready and has not said has no clients yet (its
// Pod is Ready only once its proxy loaded a pool) and is left out. A
// terminating proxy serves the connections it has through its preStop:
// it counts while its agent reports, which takes its report out as it
// stops. With no proxy to ask, 0: a copy then waits its bound rather than
// take clients nobody confirmed as moved.
func proxyVersion(obs observed, zone string, version int64) int64 {
	lowest, asked := version, false
	for _, pod := range obs.proxies {
		r, said := obs.proxyReports[pod.Metadata.Name]
		if !said && (!podReady(pod) || pod.Metadata.DeletionTimestamp != nil) {
			continue
		}
		asked = true
		lowest = min(lowest, r.Loaded[zone])
	}
	if !asked {
		return 0
	}
	return lowest
}
