package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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
type Memcached struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:default={}
	Spec   MemcachedSpec   `json:"spec,omitempty"`
	Status MemcachedStatus `json:"status,omitempty"`
}

// The defaults and bounds of the spec's settings, and every rule that spans
// fields, are stated once, in settings.go: make generate writes them into
// the CRD, and the hook checks the same values in Go.

// MemcachedSpec is what the user asks for. Every field is optional; an empty
// spec runs one memcached Pod with memcached's own defaults.
type MemcachedSpec struct {
	// Size is the number of memcached Pods. Clients shard keys across them.
	// +optional
	Size *int32 `json:"size,omitempty"`

	// Image is the memcached container image. Empty means the operator's
	// pinned default (see the README), so upgrading the operator upgrades
	// memcached only for objects that do not pin an image.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Image string `json:"image,omitempty"`

	// Memcached holds memcached's own settings.
	// +kubebuilder:default={}
	// +optional
	Memcached *MemcachedConfig `json:"memcached,omitempty"`

	// Resources of the memcached container. Keys left out get the
	// operator's defaults, derived from the memcached settings (see the
	// README); a memory limit must leave memcached room beyond
	// maxMemoryMB.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// PodLabels are added to every memcached Pod. They cannot replace the
	// labels the operator selects Pods by.
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

	// TLS serves memcached over TLS, with a certificate from a Secret.
	// +optional
	TLS *TLSSpec `json:"tls,omitempty"`

	// Auth requires clients to authenticate, with credentials from a
	// Secret.
	// +optional
	Auth *AuthSpec `json:"auth,omitempty"`

	// NetworkPolicy says who may connect, besides Pods of the Memcached's
	// own namespace (which always may).
	// +optional
	NetworkPolicy *NetworkPolicySpec `json:"networkPolicy,omitempty"`

	// Discovery makes the Memcached a configuration endpoint that clients
	// speaking ElastiCache Auto Discovery use unchanged: an agent Deployment
	// and a Service NAME-discovery on port 11211 that answer
	// "config get cluster" with the Pods of the slot table, following it
	// within seconds.
	// +optional
	Discovery *DiscoverySpec `json:"discovery,omitempty"`

	// LivenessCheck is how kubelet tells a memcached that hangs from one
	// that serves: Version (the default) asks memcached itself for its
	// version over loopback, with the image's sh, nc and timeout (the
	// official Alpine images have them); TCP only checks that the port
	// accepts connections, which a stopped memcached still does, for an
	// image without them.
	// +kubebuilder:validation:Enum=Version;TCP
	// +optional
	LivenessCheck LivenessCheck `json:"livenessCheck,omitempty"`
}

// DiscoverySpec configures the configuration endpoint.
type DiscoverySpec struct {
	// Enabled runs the agent Deployment (two replicas) and the Service
	// NAME-discovery. status.configurationEndpoint names what clients are
	// given.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// Resources of the agent container; keys left out get small defaults
	// (requests 10m CPU and 32Mi, limit 64Mi).
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}

// TLSSpec serves memcached over TLS. The Secret is mounted read-only into
// the Pods, never copied into arguments or the environment, and a changed
// Secret is loaded by the running memcached, without a restart.
type TLSSpec struct {
	// SecretName names a Secret in the Memcached's namespace holding
	// tls.crt and tls.key, and ca.crt when client certificates are
	// required: what cert-manager writes, type kubernetes.io/tls.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName"`

	// ClientCertificates: None (the default) lets any client that trusts
	// memcached's certificate in; Required lets in only clients that
	// present a certificate signed by the Secret's ca.crt.
	// +kubebuilder:validation:Enum=None;Required
	// +optional
	ClientCertificates ClientCertificates `json:"clientCertificates,omitempty"`

	// MinVersion is the oldest TLS version memcached accepts: "1.2" (the
	// default) or "1.3".
	// +kubebuilder:validation:Enum="1.2";"1.3"
	// +optional
	MinVersion string `json:"minVersion,omitempty"`
}

// ClientCertificates is whether memcached requires client certificates.
type ClientCertificates string

// The client certificate modes.
const (
	ClientCertificatesNone     ClientCertificates = "None"
	ClientCertificatesRequired ClientCertificates = "Required"
)

// AuthSpec requires clients to authenticate.
type AuthSpec struct {
	// SecretName names a Secret in the Memcached's namespace whose key
	// "users" holds one user:password a line. Several users let clients
	// move to a new password before the old one goes.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName"`

	// Mode: SASL (the default) is SASL PLAIN over memcached's binary
	// protocol, which most clients offer (libmemcached and so PHP's
	// memcached and pylibmc, spymemcached, XMemcached, Dalli, memjs,
	// EnyimMemcached); memcached then speaks the binary protocol only.
	// ASCII is memcached's own text-protocol authentication, which few
	// clients offer, for at most 8 users.
	// +kubebuilder:validation:Enum=SASL;ASCII
	// +optional
	Mode AuthMode `json:"mode,omitempty"`
}

// AuthMode is how clients authenticate.
type AuthMode string

// The authentication modes.
const (
	AuthModeSASL  AuthMode = "SASL"
	AuthModeASCII AuthMode = "ASCII"
)

// NetworkPolicySpec says who may reach the Memcached's Pods, port by port.
type NetworkPolicySpec struct {
	// Memcached is who may reach memcached's port.
	// +optional
	Memcached *Peers `json:"memcached,omitempty"`

	// Metrics is who may reach the exporter's port: the namespace of
	// Prometheus, usually.
	// +optional
	Metrics *Peers `json:"metrics,omitempty"`
}

// Peers are the clients allowed to a port, besides Pods of the Memcached's
// own namespace.
type Peers struct {
	// From lists them as a NetworkPolicy's ingress rule does: namespace
	// and Pod selectors, IP blocks.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	From []networkingv1.NetworkPolicyPeer `json:"from,omitempty"`

	// AllowAll lets in anything that can route to the Pods.
	// +optional
	AllowAll bool `json:"allowAll,omitempty"`
}

// LivenessCheck is how memcached's liveness is checked.
type LivenessCheck string

// The liveness checks.
const (
	LivenessCheckVersion LivenessCheck = "Version"
	LivenessCheckTCP     LivenessCheck = "TCP"
)

// MemcachedConfig holds the memcached flags the operator manages. Each
// field's default, bounds and flag are in settings.go.
type MemcachedConfig struct {
	// MaxMemoryMB is memcached's item memory (-m), in megabytes. The process
	// uses more than this; see resources.
	// +optional
	MaxMemoryMB *int32 `json:"maxMemoryMB,omitempty"`

	// MaxConnections is memcached's connection limit (-c). memcached sets
	// its open-files limit to it, which bounds it from above.
	// +optional
	MaxConnections *int32 `json:"maxConnections,omitempty"`

	// Threads is memcached's worker thread count (-t).
	// +optional
	Threads *int32 `json:"threads,omitempty"`

	// MaxItemSize is the largest item memcached stores (-I), a quantity: a
	// multiple of memcached's slab chunk size, and at most half of
	// maxMemoryMB. Write 1Mi, not 1m: in a quantity, m means milli.
	// +optional
	MaxItemSize *resource.Quantity `json:"maxItemSize,omitempty"`

	// Verbosity is memcached's log level: 0 quiet, 1 -v, 2 -vv.
	// +optional
	Verbosity *int32 `json:"verbosity,omitempty"`

	// ExtraArgs are passed to memcached after the managed flags, each item
	// one argv entry ("-o", "idle_timeout=600"). They cannot set the flags
	// the operator manages: port, listen address, unix socket, user,
	// memory, connections, threads, item size, verbosity, UDP or daemon
	// mode; nor help, version or license, which exit.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=1024
	// +optional
	ExtraArgs []string `json:"extraArgs,omitempty"`
}

// MetricsSpec configures the Prometheus memcached exporter sidecar.
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
	// +optional
	Interval string `json:"interval,omitempty"`

	// Labels added to the ServiceMonitor, for a Prometheus that selects
	// ServiceMonitors by label.
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

	// SlotTable gives every memcached Pod a stable place in the server
	// list: clients and the proxy spread keys over the servers in slot
	// order, so a Pod that replaces another takes its slot and no other
	// key moves. The configuration endpoint serves it.
	// +optional
	SlotTable SlotTable `json:"slotTable"`

	// ConfigurationEndpoint is the host:port clients that speak ElastiCache
	// Auto Discovery are given, with spec.discovery.
	// +optional
	ConfigurationEndpoint string `json:"configurationEndpoint,omitempty"`

	// Conditions are Available, Progressing and Degraded.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions"`
}

// SlotTable is the ordered server list the hook keeps: slot number to Pod.
type SlotTable struct {
	// Version rises whenever the served list (the Serving slots' Pods and
	// addresses, in slot order) changes, and never otherwise: clients that
	// speak Auto Discovery apply only a higher version. It is at least the
	// Unix time in seconds of the change, so that it keeps rising even
	// when the status is wiped and rebuilt.
	// +optional
	Version int64 `json:"version"`

	// Slots are the slots in order, one entry per slot from 0: as many as
	// spec.size, and for a while more when a scale-down waits for Pods to
	// leave.
	// +optional
	Slots []Slot `json:"slots"`
}

// Slot is one place in the server list and the Pod that holds it.
type Slot struct {
	// Slot is the slot's number, its place in the list.
	Slot int32 `json:"slot"`

	// Pod is the name of the Pod that holds the slot; empty while no Pod
	// does.
	// +optional
	Pod string `json:"pod,omitempty"`

	// IP is the Pod's address.
	// +optional
	IP string `json:"ip,omitempty"`

	// State is Serving (the Pod is Ready, not terminating and has an
	// address: it is in the served list), NotReady (the Pod keeps its slot
	// while it is not ready, so that it comes back to the same place),
	// Leaving (the Pod is terminating and no Ready Pod has taken its slot
	// yet) or Empty.
	State SlotState `json:"state"`
}

// SlotState is what a slot's Pod is doing.
// +kubebuilder:validation:Enum=Serving;NotReady;Leaving;Empty
type SlotState string

// The slot states.
const (
	SlotServing  SlotState = "Serving"
	SlotNotReady SlotState = "NotReady"
	SlotLeaving  SlotState = "Leaving"
	SlotEmpty    SlotState = "Empty"
)
