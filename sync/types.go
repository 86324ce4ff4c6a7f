package sync

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Group, Version and Kind name the parent resource this hook serves.
const (
	Group      = "cache.example.com"
	Version    = "v1alpha1"
	Kind       = "Memcached"
	APIVersion = Group + "/" + Version
)

// Defaults and bounds of the Memcached spec. The CRD's schema states the same
// numbers (see the markers below); the hook applies them again because an
// object created under an older CRD, or with validation bypassed, still
// reaches it.
const (
	DefaultImage          = "memcached:1.6.39-alpine"
	DefaultExporterImage  = "quay.io/prometheus/memcached-exporter:v0.16.0"
	DefaultSize           = 1
	MaxSize               = 1000
	DefaultMaxMemoryMB    = 64
	MaxMemoryMB           = 1 << 20
	DefaultMaxConnections = 1024
	// MaxConnections stays well under the open-files hard limit container
	// runtimes give (often 524288 or 1048576): memcached sets both of its
	// limits to -c, and without CAP_SYS_RESOURCE it cannot raise the hard
	// one, so it exits at start.
	MaxConnections = 65536
	DefaultThreads = 4
	MaxThreads     = 64
	MaxVerbosity   = 2
	// ItemSizeStep is memcached's slab chunk size (half its 1 MiB slab
	// page): -I must be a multiple of it, or memcached exits at start.
	ItemSizeStep = 512 << 10
	// MemoryHeadroomMB is the least a memory limit must exceed maxMemoryMB
	// by: memcached's connections, hash table and slab bookkeeping live
	// outside -m.
	MemoryHeadroomMB = 32
)

// DefaultMaxItemSize is memcached's own default for -I.
var DefaultMaxItemSize = resource.MustParse("1Mi")

// Memcached runs a set of memcached servers behind a headless Service.
//
// It is a superset of the operator-sdk tutorial's Memcached: spec.size and
// status.nodes mean what they mean there, so objects written for the tutorial
// work unchanged.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=memcacheds,singular=memcached,shortName=mc,categories=all
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.size,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.spec.size`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.status.image`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS label of at most 63 characters that starts with a letter: it names the Service and is a label value"
type Memcached struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:default={}
	Spec   MemcachedSpec   `json:"spec,omitempty"`
	Status MemcachedStatus `json:"status,omitempty"`
}

// MemcachedSpec is what the user asks for. Every field is optional; an empty
// spec runs one memcached Pod with memcached's own defaults.
//
// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.limits) || !('memory' in self.resources.limits) || !isQuantity(string(self.resources.limits['memory'])) || !quantity(string(self.resources.limits['memory'])).isInteger() || quantity(string(self.resources.limits['memory'])).asInteger() >= ((has(self.memcached) && has(self.memcached.maxMemoryMB) ? self.memcached.maxMemoryMB : 64) + 32) * 1048576",fieldPath=".resources.limits.memory",message="resources.limits.memory must be at least memcached.maxMemoryMB + 32Mi: memcached needs memory beyond -m for connections and its hash table"
// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.requests) || !has(self.resources.limits) || !('memory' in self.resources.requests) || !('memory' in self.resources.limits) || !isQuantity(string(self.resources.requests['memory'])) || !isQuantity(string(self.resources.limits['memory'])) || quantity(string(self.resources.requests['memory'])).compareTo(quantity(string(self.resources.limits['memory']))) <= 0",fieldPath=".resources.requests.memory",message="resources.requests.memory must not exceed resources.limits.memory"
type MemcachedSpec struct {
	// Size is the number of memcached Pods. Clients shard keys across them.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	Size *int32 `json:"size,omitempty"`

	// Image is the memcached container image. Empty means the operator's
	// pinned default (see the README), so upgrading the operator upgrades
	// memcached only for objects that do not pin an image.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.contains(' ')",message="image must not contain spaces"
	// +optional
	Image string `json:"image,omitempty"`

	// Memcached holds memcached's own settings.
	// +kubebuilder:default={}
	// +optional
	Memcached *MemcachedConfig `json:"memcached,omitempty"`

	// Resources of the memcached container. Keys left out get the
	// operator's defaults, derived from memcached.maxMemoryMB (see the
	// README); the memory limit must leave 32Mi above maxMemoryMB.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// PodLabels are added to every memcached Pod. They cannot replace the
	// labels the operator selects Pods by.
	// +kubebuilder:validation:XValidation:rule="!('app.kubernetes.io/name' in self) && !('app.kubernetes.io/instance' in self) && !('app.kubernetes.io/managed-by' in self) && !('controller-uid' in self)",message="podLabels must not set app.kubernetes.io/name, app.kubernetes.io/instance, app.kubernetes.io/managed-by or controller-uid: the operator and Metacontroller own them"
	// +optional
	PodLabels map[string]string `json:"podLabels,omitempty"`

	// PodAnnotations are added to every memcached Pod.
	// +optional
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`

	// Affinity of the memcached Pods.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// NodeSelector of the memcached Pods.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations of the memcached Pods.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// TopologySpreadConstraints replace the default spread (soft, across
	// nodes and zones) when set.
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// PriorityClassName of the memcached Pods.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// Metrics adds a Prometheus exporter beside memcached.
	// +optional
	Metrics *MetricsSpec `json:"metrics,omitempty"`
}

// MemcachedConfig holds the memcached flags the operator manages.
//
// +kubebuilder:validation:XValidation:rule="!has(self.maxItemSize) || !isQuantity(string(self.maxItemSize)) || !quantity(string(self.maxItemSize)).isInteger() || quantity(string(self.maxItemSize)).asInteger() <= (has(self.maxMemoryMB) ? self.maxMemoryMB : 64) * 524288",fieldPath=".maxItemSize",message="maxItemSize must be at most half of maxMemoryMB, or memcached refuses to start"
type MemcachedConfig struct {
	// MaxMemoryMB is memcached's item memory (-m), in megabytes. The process
	// uses more than this; see resources.
	// +kubebuilder:default=64
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=1048576
	// +optional
	MaxMemoryMB *int32 `json:"maxMemoryMB,omitempty"`

	// MaxConnections is memcached's connection limit (-c). memcached sets
	// its open-files limit to it, hence the bound.
	// +kubebuilder:default=1024
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	// +optional
	MaxConnections *int32 `json:"maxConnections,omitempty"`

	// Threads is memcached's worker thread count (-t).
	// +kubebuilder:default=4
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +optional
	Threads *int32 `json:"threads,omitempty"`

	// MaxItemSize is the largest item memcached stores (-I), a quantity: a
	// multiple of 512Ki (memcached's slab chunk size) from 512Ki to 1Gi, and
	// at most half of maxMemoryMB. Write 1Mi, not 1m: in a quantity, m means
	// milli.
	// +kubebuilder:default="1Mi"
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).isInteger() && quantity(string(self)).asInteger() >= 524288 && quantity(string(self)).asInteger() <= 1073741824 && quantity(string(self)).asInteger() % 524288 == 0",message="maxItemSize must be a multiple of 512Ki from 512Ki to 1Gi, memcached's slab chunk size (write 1Mi, not 1m: m means milli)"
	// +optional
	MaxItemSize *resource.Quantity `json:"maxItemSize,omitempty"`

	// Verbosity is memcached's log level: 0 quiet, 1 -v, 2 -vv.
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2
	// +optional
	Verbosity *int32 `json:"verbosity,omitempty"`

	// ExtraArgs are passed to memcached after the managed flags, each item
	// one argv entry ("-o", "idle_timeout=600"). They cannot set the flags
	// the operator manages: port, listen address, unix socket, user,
	// memory, connections, threads, item size, verbosity, UDP or daemon
	// mode; nor help, version or license, which exit.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.all(a, !a.matches('^-[^-]*[pmctIvUludshVi]') && !(a.startsWith('--') && ['port', 'memory-limit', 'conn-limit', 'threads', 'max-item-size', 'verbose', 'udp-port', 'listen', 'user', 'daemon', 'unix-socket', 'help', 'version', 'license'].exists(f, f.startsWith(a.substring(2).split('=')[0]))))",message="extraArgs must not set a flag the operator manages (-p -l -u -d -m -c -t -I -v -U -s, their long forms or any prefix of them) nor -h -V -i; pass -o and its value as two items"
	// +optional
	ExtraArgs []string `json:"extraArgs,omitempty"`
}

// MetricsSpec configures the Prometheus memcached exporter sidecar.
//
// +kubebuilder:validation:XValidation:rule="!has(self.serviceMonitor) || !has(self.serviceMonitor.enabled) || !self.serviceMonitor.enabled || (has(self.enabled) && self.enabled)",fieldPath=".serviceMonitor.enabled",message="metrics.serviceMonitor.enabled needs metrics.enabled: the ServiceMonitor scrapes the exporter"
type MetricsSpec struct {
	// Enabled runs prometheus/memcached_exporter beside memcached, on port
	// 9150, and adds that port to the Service.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// Image of the exporter.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Image string `json:"image,omitempty"`

	// Resources of the exporter container; keys left out get small
	// defaults.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// ServiceMonitor makes a Prometheus Operator ServiceMonitor. It needs
	// the ServiceMonitor CRD in the cluster and the servicemonitors child
	// resource in the CompositeController (manifests/overlays/servicemonitor).
	// +optional
	ServiceMonitor *ServiceMonitorSpec `json:"serviceMonitor,omitempty"`
}

// ServiceMonitorSpec configures the ServiceMonitor child.
type ServiceMonitorSpec struct {
	// Enabled makes the ServiceMonitor.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// Interval between scrapes, a Prometheus duration.
	// +kubebuilder:validation:Pattern=`^([0-9]+(ms|s|m|h))+$`
	// +optional
	Interval string `json:"interval,omitempty"`

	// Labels added to the ServiceMonitor, for a Prometheus that selects
	// ServiceMonitors by label.
	// +kubebuilder:validation:XValidation:rule="!('controller-uid' in self)",message="serviceMonitor.labels must not set controller-uid: Metacontroller owns it"
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// MemcachedStatus is what the hook observed: the Pods, their readiness and
// the conditions derived from them. It never states the desired future.
type MemcachedStatus struct {
	// ObservedGeneration is the generation of the spec this status was
	// computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Nodes are the names of the memcached Pods, sorted (the tutorial's
	// field).
	// +optional
	Nodes []string `json:"nodes"`

	// Replicas is the number of memcached Pods observed.
	// +optional
	Replicas int32 `json:"replicas"`

	// ReadyReplicas is the number of those Pods that are ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`

	// Endpoints are the ready Pods' ip:port, sorted: the server list a
	// client's hash ring needs.
	// +optional
	Endpoints []string `json:"endpoints"`

	// Selector selects the memcached Pods, as a string, for the scale
	// subresource (kubectl scale, HorizontalPodAutoscaler).
	// +optional
	Selector string `json:"selector"`

	// Image is the memcached image of the observed Deployment's Pod
	// template.
	// +optional
	Image string `json:"image,omitempty"`

	// Conditions are Available, Progressing and Degraded.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions"`
}
