package memcached

import (
	"maps"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/sync/metacontroller"
)

// The memcached Pods: their Deployment, the headless Service clients find
// them by, and a PodDisruptionBudget. Every other feature changes their
// template (see features).

// Ports and timings of the memcached Pods.
const (
	// Port is memcached's, on the Pods and the Service.
	Port = contract.Port
	// memcachedUID is the memcache user of the official memcached images
	// (Debian and Alpine alike); runAsNonRoot needs it numeric.
	memcachedUID = 11211
	// preStopSleepSeconds keeps a terminating Pod serving while endpoints
	// drop it: memcached exits at once on SIGTERM (contract.PreStopSleep).
	preStopSleepSeconds = int64(contract.PreStopSleep / time.Second)
)

type pods struct{ noFeature }

func (pods) kinds(s *v1alpha1.MemcachedSpec) []string {
	if *s.Size > 1 {
		return []string{ServiceKey, PDBKey}
	}
	return []string{ServiceKey}
}

// children are each cell's memcached Deployment, the Service over all of
// them, and, past one Pod a cell, each cell's PodDisruptionBudget (one
// over every zone would let one zone's unready Pods block every drain in
// the others).
func (pods) children(d *desire) []any {
	var children, budgets []any
	for _, c := range d.cells {
		zone := c.zone
		children = append(children, cellDeployment(d, zone))
		if d.managed[PDBKey] && *d.s.Size > 1 {
			budgets = append(budgets, disruptionBudget(cellMeta(d.p, zone), cellSelector(d.p.Name, zone)))
		}
	}
	if d.managed[ServiceKey] {
		children = append(children, service(d))
	}
	return append(children, budgets...)
}

// pod is the template's base: labels, the memcached container, and what
// every memcached Pod runs with.
func (pods) pod(s *v1alpha1.MemcachedSpec, t *corev1.PodTemplateSpec) {
	t.ObjectMeta = metav1.ObjectMeta{Labels: maps.Clone(s.PodLabels), Annotations: s.PodAnnotations}
	t.Spec = corev1.PodSpec{
		Containers:                    []corev1.Container{memcachedContainer(s)},
		AutomountServiceAccountToken:  ptr(false),
		EnableServiceLinks:            ptr(false),
		TerminationGracePeriodSeconds: ptr(seconds(contract.GraceWithoutHandoff)),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr(true),
			RunAsUser:      ptr(int64(memcachedUID)),
			RunAsGroup:     ptr(int64(memcachedUID)),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Affinity:                  s.Affinity,
		NodeSelector:              s.NodeSelector,
		Tolerations:               s.Tolerations,
		TopologySpreadConstraints: s.TopologySpreadConstraints,
		PriorityClassName:         s.PriorityClassName,
	}
}

// Args returns memcached's argv for a spec with its defaults: the port, each
// memcached setting as v1alpha1.Settings says, each feature's (TLS and
// authentication), then extraArgs.
func Args(s *v1alpha1.MemcachedSpec) []string {
	args := []string{"-p", strconv.Itoa(Port)}
	for _, st := range v1alpha1.Settings {
		args = append(args, st.Args(s)...)
	}
	for _, f := range features {
		args = append(args, f.args(s)...)
	}
	return append(args, s.Memcached.ExtraArgs...)
}

func memcachedContainer(s *v1alpha1.MemcachedSpec) corev1.Container {
	port := intstr.FromString("memcached")
	return corev1.Container{
		Name:      "memcached",
		Image:     s.Image,
		Args:      Args(s),
		Ports:     []corev1.ContainerPort{{Name: "memcached", ContainerPort: Port, Protocol: corev1.ProtocolTCP}},
		Resources: MemcachedResources(s),
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: port}},
			PeriodSeconds:    5,
			FailureThreshold: 2,
		},
		LivenessProbe:   livenessProbe(s, localPort(s)),
		Lifecycle:       &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: preStopSleepSeconds}}},
		SecurityContext: restrictedContainer(),
	}
}

// livenessProbe tells a memcached (or a proxy) that hangs from one that
// serves. A tcpSocket probe cannot: the kernel completes the handshake of a
// stopped memcached. So by default it asks memcached itself (versionCheck,
// on local, the port the Pod's own containers reach it on), with the shell
// and busybox tools of the official Alpine images; an image without them
// takes LivenessCheck TCP. Three misses ten seconds apart restart memcached,
// which loses its items: a slow answer does not.
func livenessProbe(s *v1alpha1.MemcachedSpec, local int) *corev1.Probe {
	p := &corev1.Probe{
		ProbeHandler:        corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("memcached")}},
		InitialDelaySeconds: 10,
		PeriodSeconds:       10,
		FailureThreshold:    3,
	}
	if s.LivenessCheck != v1alpha1.LivenessCheckTCP {
		p.ProbeHandler = corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: versionCheck(local)}}
		p.TimeoutSeconds = versionCheckSeconds + 2
	}
	return p
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

// service is the memcached Pods' Service, with the metrics port when the
// exporter runs.
func service(d *desire) any {
	ports := []corev1.ServicePort{{
		Name: "memcached", Port: Port, TargetPort: intstr.FromString("memcached"), Protocol: corev1.ProtocolTCP,
	}}
	if metricsEnabled(d.s) {
		ports = append(ports, corev1.ServicePort{
			Name: "metrics", Port: ExporterPort, TargetPort: intstr.FromString("metrics"), Protocol: corev1.ProtocolTCP,
		})
	}
	return object[corev1.ServiceSpec]{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		Metadata: childMeta(d.p),
		Spec: corev1.ServiceSpec{
			// Headless: one DNS record per ready Pod, because clients
			// shard keys across servers and need them all.
			ClusterIP: corev1.ClusterIPNone,
			Selector:  SelectorLabels(d.p.Name),
			Ports:     ports,
		},
	}
}

// versionCheckSeconds bounds one version check.
const versionCheckSeconds = 3

// versionCheck is the command that asks the memcached on port for its
// version over loopback and passes on any answer (scripts/liveness.sh): a
// binary-protocol VERSION request then CRLF, which memcached answers in
// every mode the operator runs it in (text and binary protocol, SASL, ASCII
// authentication; measured on 1.6.45), while a stopped one answers
// nothing. nc waits for memcached to close, which it does not: timeout
// ends it.
func versionCheck(port int) []string {
	return []string{"sh", "-c", render(livenessScript, map[string]any{"Seconds": versionCheckSeconds, "Port": port})}
}

// cellSelector selects a cell's memcached Pods.
func cellSelector(name, zone string) map[string]string {
	l := SelectorLabels(name)
	if zone != "" {
		l[v1alpha1.LabelZone] = zone
	}
	return l
}

// cellMeta is the metadata of a cell's memcached Deployment and budget.
func cellMeta(p *metacontroller.Parent, zone string) metav1.ObjectMeta {
	meta := childMeta(p)
	if zone != "" {
		meta.Name = cellDeploymentName(p.Name, zone)
		meta.Labels[v1alpha1.LabelZone] = zone
	}
	return meta
}

// cellDeployment is a cell's memcached Deployment: the Pod template every
// feature made, spread over nodes and zones, or pinned to its zone.
func cellDeployment(d *desire, zone string) any {
	selector := cellSelector(d.p.Name, zone)
	t := d.pod
	if zone != "" {
		t = inZone(t, d.s.Zones.TopologyKey, zone, selector)
	}
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	maps.Copy(t.Labels, childLabels(d.p.Name))
	if t.Spec.TopologySpreadConstraints == nil {
		t.Spec.TopologySpreadConstraints = spreadOf(selector)
	}
	return deploymentOf(cellMeta(d.p, zone), *d.s.Size, selector, t)
}
