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
	// kubectl scale and a HorizontalPodAutoscaler set it through the scale
	// subresource; the hook owns the Deployment's replicas.
	// +optional
	Size *int32 `json:"size,omitempty"`

	// Image is the memcached container image. Left out, it is the
	// operator's pinned default, so upgrading the operator upgrades
	// memcached only for objects that do not pin an image; status.image
	// says what runs.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Image string `json:"image,omitempty"`

	// Memcached holds memcached's own settings.
	// +kubebuilder:default={}
	// +optional
	Memcached *MemcachedConfig `json:"memcached,omitempty"`

	// Resources of the memcached container, as in a Pod spec. Keys you set
	// replace the operator's defaults key by key: a memory request and
	// limit of what memcached can use with its settings (maxMemoryMB, the
	// hash table at its peak, every connection busy, the threads: the
	// formula is under Memory in sync/api/v1alpha1/README.md), a CPU
	// request of 100m, and no CPU limit. A memory limit must be at least
	// what memcached can use.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// PodLabels are added to every memcached Pod. They cannot replace the
	// labels the operator and Metacontroller select Pods by.
	// +optional
	PodLabels map[string]string `json:"podLabels,omitempty"`

	// PodAnnotations are added to every memcached Pod.
	// +optional
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`

	// Affinity of the memcached Pods, as in a Pod spec.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// NodeSelector of the memcached Pods, as in a Pod spec.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations of the memcached Pods, as in a Pod spec.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// TopologySpreadConstraints of the memcached Pods, as in a Pod spec.
	// Left out, the Pods spread across nodes and zones, softly (they still
	// schedule where there is one of either); set, they replace that
	// spread.
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// PriorityClassName of the memcached Pods, as in a Pod spec.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// Metrics adds a Prometheus exporter beside memcached.
	// +optional
	Metrics *MetricsSpec `json:"metrics,omitempty"`

	// TLS serves memcached over TLS, with a certificate from a Secret (see
	// Security of the cache in sync/api/v1alpha1/README.md).
	// +optional
	TLS *TLSSpec `json:"tls,omitempty"`

	// Auth requires clients to authenticate, with credentials from a
	// Secret (see Security of the cache in sync/api/v1alpha1/README.md).
	// +optional
	Auth *AuthSpec `json:"auth,omitempty"`

	// NetworkPolicy says who may connect, besides Pods of the Memcached's
	// own namespace (which always may). The NetworkPolicy child always
	// exists; it works where the network plugin enforces NetworkPolicy.
	// +optional
	NetworkPolicy *NetworkPolicySpec `json:"networkPolicy,omitempty"`

	// Discovery makes the Memcached a configuration endpoint that clients
	// speaking ElastiCache Auto Discovery use unchanged: an agent Deployment
	// and a Service NAME-discovery on port 11211 that answer
	// "config get cluster" with the Pods of the slot table, following it
	// within seconds.
	// +optional
	Discovery *DiscoverySpec `json:"discovery,omitempty"`

	// Proxy runs memcached's own proxy in front of the Pods: one address,
	// NAME-proxy.NAMESPACE.svc:11211, for clients that cannot follow a
	// server list. It spreads keys over the Pods by slot, and follows the
	// slot table without a restart.
	// +optional
	Proxy *ProxySpec `json:"proxy,omitempty"`

	// StableNames gives every slot a DNS name that follows the slot from
	// Pod to Pod, NAME-0.NAME-slots.NAMESPACE.svc, NAME-1... (a selectorless
	// headless Service NAME-slots and its EndpointSlice), and serves those
	// names in the configuration endpoint's host column and in
	// status.slotAddresses: clients that hash on server names (dskit's
	// dnssrvnoa+, libmemcached's ketama, pymemcache's HashClient) then keep
	// every key but the replaced slot's when a Pod is replaced.
	// +optional
	StableNames *StableNamesSpec `json:"stableNames,omitempty"`

	// Rollout says what happens to a Pod's items when it leaves.
	// +optional
	Rollout *RolloutSpec `json:"rollout,omitempty"`

	// Zones gives each zone its own full copy of the cache, and clients one
	// address whose reads stay in their own zone: a memcached Deployment
	// per zone, pinned to it, with its own slot table, and the proxy tier
	// (spec.proxy, turned on by zones) pinned per zone as well, reading
	// from its own zone first and writing to every zone, behind the one
	// Service NAME-proxy with trafficDistribution PreferClose. spec.size is
	// then the Pods in each zone. Off by default; turning it on or off
	// replaces the memcached Pods (see Zones in sync/api/v1alpha1/README.md).
	// +optional
	Zones *ZonesSpec `json:"zones,omitempty"`

	// Extstore keeps items' values on a disk of the Pod's own, and only
	// their keys and a small header in RAM: a cache many times larger than
	// its memory, for large values (chunks and blocks of tens of KiB and
	// more). Off by default. A restart or a new Pod starts empty, on disk
	// as in RAM (see Extstore in sync/api/v1alpha1/README.md).
	// +optional
	Extstore *ExtstoreSpec `json:"extstore,omitempty"`

	// LivenessCheck is how kubelet tells a memcached that hangs from one
	// that serves: Version (the default) asks memcached itself for its
	// version over loopback, a request every mode answers, with the
	// image's sh, nc and timeout (the official Alpine images have them);
	// three misses 10 s apart restart it. TCP only checks that the port
	// accepts connections, which a stopped memcached still does: for an
	// image without those tools.
	// +kubebuilder:validation:Enum=Version;TCP
	// +optional
	LivenessCheck LivenessCheck `json:"livenessCheck,omitempty"`
}

// ProxySpec configures the proxy tier: a Deployment NAME-proxy running
// spec.image's memcached as a proxy (-o proxy_config=routelib), beside an
// agent that writes its pool from the slot table, and a Service NAME-proxy.
// Not with tls or auth: memcached's proxy in the official images has no TLS
// to its backends and no SASL.
type ProxySpec struct {
	// Enabled runs the proxy tier.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// Replicas of the proxy Deployment.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Threads is the proxy's worker threads (-t): the CPUs it may use. Each
	// thread keeps its own connection to every memcached Pod.
	// +optional
	Threads *int32 `json:"threads,omitempty"`

	// Resources of the proxy container; keys left out get defaults
	// (requests 100m CPU and 64Mi, limit 256Mi).
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// ConnectTimeout bounds the proxy's connection to a memcached Pod.
	// memcached's own default is 5s: a request would wait that long for a
	// Pod that is gone.
	// +optional
	ConnectTimeout *metav1.Duration `json:"connectTimeout,omitempty"`

	// ReadTimeout bounds the wait for a memcached Pod's answer.
	// +optional
	ReadTimeout *metav1.Duration `json:"readTimeout,omitempty"`

	// RetryAfter is how long a Pod that failed failureLimit times in a
	// row is left alone (its keys answered with an error at once), in whole
	// seconds.
	// +optional
	RetryAfter *metav1.Duration `json:"retryAfter,omitempty"`

	// FailureLimit is how many failures in a row mark a Pod bad.
	// +optional
	FailureLimit *int32 `json:"failureLimit,omitempty"`
}

// RolloutSpec says what happens to a Pod's items when it leaves: a rolling
// update, a drain, a deleted Pod, a scale-down.
type RolloutSpec struct {
	// KeepWarm hands a leaving Pod's items on before it stops, make before
	// break: once a Ready Pod takes its slot (Filling), the agent copies
	// every item of the leaving memcached to the Pod that now owns its key
	// (memcached's lru_crawler mgdump, mg and ms in add mode, so a newer
	// item on the receiving Pod is never overwritten) while clients are
	// still given the leaving Pod, whose writes are forwarded; then the
	// slot serves the new Pod, and once clients had clientMoveSeconds to
	// follow, the leaving Pod's preStop ends (or after handoffSeconds).
	// After a scale-up, once every added Pod is Ready, each Pod already
	// serving hands the items whose keys now hash to the added Pods on to
	// them before those are listed (Adding), and drops its own copies once
	// clients moved; a scale-down keeps a removed slot listed (Removing)
	// until its Pod handed its keys on. Off by default: it runs the
	// agent Deployment, gives the memcached Pods a longer grace period and a
	// preStop that asks memcached (changing the Pod template: turning it on
	// rolls every Pod once), and cannot be used with tls or auth.
	// +optional
	KeepWarm bool `json:"keepWarm,omitempty"`

	// HandoffSeconds bounds how long a leaving Pod keeps serving for its
	// hand-off, from when it starts terminating: for a Ready Pod to take its
	// slot and for the copy. Left out, 30 seconds plus one for every 50 MiB
	// of maxMemoryMB (the copy rate measured, with a margin). The grace
	// period is 10 seconds more (the preStop's first sleep) plus 5.
	// +optional
	HandoffSeconds *int32 `json:"handoffSeconds,omitempty"`

	// ClientMoveSeconds is how long a Pod whose keys moved keeps serving
	// them once the slot table gives clients their new place (after the
	// copy: the slot serves the new Pod, the added slots are listed, the
	// removed ones are not), for the clients to follow: a client uses the
	// old Pod until it has looked the slot up again, and the old Pod's
	// writes are forwarded meanwhile. Left out, 2 seconds (the proxy and Auto Discovery
	// clients polling the endpoint often switch within one) or, with
	// stableNames, 40: dskit's DNS lookup period (30 s, Mimir, Loki,
	// Tempo), more than Thanos' (10 s), plus the cluster DNS's TTL (5 s)
	// and a margin. Set it to your clients' lookup period plus the TTL.
	// When it is set, or stableNames is on, a leaving Pod with keepWarm
	// serves for this long more than handoffSeconds; the default 2 s comes
	// out of handoffSeconds, so that a Memcached that sets neither keeps
	// its Pod template.
	// +optional
	ClientMoveSeconds *int32 `json:"clientMoveSeconds,omitempty"`
}

// ExtstoreSpec is where memcached's extstore file is, how large, and how
// memcached moves items to it. The defaults are memcached's own advice for
// large values, measured (see Extstore in sync/api/v1alpha1/README.md);
// each says why below.
type ExtstoreSpec struct {
	// Size of the disk the file is on: an emptyDir of this sizeLimit, with
	// an ephemeral-storage request of as much, on the node's own disk; or,
	// with storageClassName, a generic ephemeral volume of this size. The
	// file takes its whole 64 MiB pages less one (the filesystem's room),
	// and must have at least 4 (320Mi).
	Size resource.Quantity `json:"size"`

	// StorageClassName puts the file on a generic ephemeral volume of this
	// storage class (local NVMe through a CSI driver), made and deleted
	// with the Pod. Left out, the file is on the node's own disk. A volume
	// that outlives the Pod would buy nothing: a new memcached starts with
	// an empty extstore.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`

	// WriteBufferMB is ext_wbuf_size: memcached writes items to disk a
	// buffer at a time, and keeps seven buffers (six page buckets and one
	// for compaction) outside maxMemoryMB, which the memory request
	// counts. 8 (memcached's 4 doubled) flushes larger writes; it must
	// divide the 64 MiB page, and be at least memcached.maxItemSize.
	// +optional
	WriteBufferMB *int32 `json:"writeBufferMB,omitempty"`

	// Threads is ext_threads, the IO threads that read and write the
	// file. 4 (memcached's 1): one thread's flush fell behind a 50 MB/s
	// writer, and evicted items before they reached the disk.
	// +optional
	Threads *int32 `json:"threads,omitempty"`

	// MinItemSize is ext_item_size: a smaller value stays in RAM, where
	// its header would cost nearly as much as the value. 512 (memcached's).
	// +optional
	MinItemSize *int32 `json:"minItemSize,omitempty"`

	// ItemAgeSeconds is ext_item_age: how old an item must be before it
	// goes to disk. 0 (memcached's is never, unless memory is short):
	// items leave RAM as soon as they can, so that a burst of writes finds
	// room rather than evicting what was not flushed yet.
	// +optional
	ItemAgeSeconds *int32 `json:"itemAgeSeconds,omitempty"`

	// SlabAutomoveFreePercent is slab_automove_freeratio, in percent: the
	// RAM kept free for new items while older ones are flushed. 10
	// (memcached's 1): with 1, writes at 50 MB/s evicted items not yet on
	// disk.
	// +optional
	SlabAutomoveFreePercent *int32 `json:"slabAutomoveFreePercent,omitempty"`

	// RecacheRate is ext_recache_rate: one read in this many brings an
	// item read from disk back into RAM. 0 (memcached's is 2000) never
	// does: for large values RAM holds the headers, and recaching pushes
	// them out.
	// +optional
	RecacheRate *int32 `json:"recacheRate,omitempty"`

	// ExpectedItemSize is the size of a typical value, in bytes: the RAM
	// the headers of a full disk take is computed from it (status.extstore)
	// and must be at most half of maxMemoryMB. Left out, it is
	// minItemSize, the most headers a full disk can have.
	// +optional
	ExpectedItemSize *int32 `json:"expectedItemSize,omitempty"`
}

// ExtstoreStatus is what the hook computed of spec.extstore.
type ExtstoreStatus struct {
	// FileMB is the extstore file's size, whole 64 MiB pages.
	FileMB int64 `json:"fileMB"`
	// HeadersMB is the RAM, within maxMemoryMB, that the headers of a
	// full file take at the expected item size.
	HeadersMB int64 `json:"headersMB"`
}

// ZonesSpec lists the zones the cache is copied into. The hook sees no
// Nodes, so it cannot find the zones itself: list the values your Nodes
// carry under topologyKey.
type ZonesSpec struct {
	// Names are the zones: values of the Nodes' topologyKey label
	// (us-east-1a, europe-west1-b, 1). Each gets a memcached Deployment
	// NAME-ZONE and a proxy Deployment NAME-proxy-ZONE, pinned to it by a
	// required node affinity. A zone added starts empty and fills as
	// clients write; a zone removed goes with its Pods.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=40
	// +listType=set
	Names []string `json:"names"`

	// TopologyKey is the Node label whose values name the zones.
	// +kubebuilder:default="topology.kubernetes.io/zone"
	// +kubebuilder:validation:MaxLength=317
	// +optional
	TopologyKey string `json:"topologyKey,omitempty"`
}

// StableNamesSpec configures the slots' DNS names.
type StableNamesSpec struct {
	// Enabled makes the Service NAME-slots and its EndpointSlice, which
	// the CompositeController must manage (services and
	// discovery.k8s.io/v1 endpointslices). Off by default: it changes what
	// the configuration endpoint serves in its host column. Turning it on
	// does not touch the memcached Pods unless keepWarm is on (their grace
	// period grows by clientMoveSeconds).
	// +optional
	Enabled bool `json:"enabled,omitempty"`
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
	// required: what cert-manager writes, type kubernetes.io/tls. It is
	// mounted read-only, and loaded again without a restart when it
	// changes.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName"`

	// ClientCertificates: None (the default) lets any client that trusts
	// memcached's certificate in; Required lets in only clients that
	// present a certificate signed by the Secret's ca.crt (memcached's
	// ssl_verify_mode=2).
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
	// "users" holds one user:password a line, at most 180 characters a
	// line. Several users, or two lines for one user, let clients move to
	// a new password before the old one goes.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName"`

	// Mode: SASL (the default) is SASL PLAIN over memcached's binary
	// protocol, which most clients offer (libmemcached and so PHP's
	// memcached and pylibmc, spymemcached, XMemcached, Dalli, memjs,
	// EnyimMemcached); memcached then speaks the binary protocol only,
	// to everyone. ASCII is memcached's own text-protocol authentication,
	// which few clients offer, for at most 8 users; memcached then refuses
	// the binary protocol. Neither goes with metrics.enabled: the exporter
	// cannot authenticate.
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
	// From lists them as a NetworkPolicy's ingress rule does:
	// namespaceSelector, podSelector, ipBlock.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	From []networkingv1.NetworkPolicyPeer `json:"from,omitempty"`

	// AllowAll lets in anything that can route to the Pods (not with
	// from).
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
	// uses more than this (the hash table, connections, threads), which
	// the memory request and limit must leave room for: see resources.
	// +optional
	MaxMemoryMB *int32 `json:"maxMemoryMB,omitempty"`

	// MaxConnections is memcached's connection limit (-c). memcached sets
	// both of its open-files limits to it and, without privileges, cannot
	// raise the hard limit the container runtime gives, which bounds it
	// from above. memcached's own file descriptors count against it: see
	// Connections in sync/api/v1alpha1/README.md.
	// +optional
	MaxConnections *int32 `json:"maxConnections,omitempty"`

	// Threads is memcached's worker thread count (-t).
	// +optional
	Threads *int32 `json:"threads,omitempty"`

	// MaxItemSize is the largest item memcached stores (-I), a quantity: a
	// multiple of memcached's slab chunk size, and at most half of
	// maxMemoryMB, or memcached refuses to start. Write 1Mi, not 1m: in a
	// quantity, m means milli.
	// +optional
	MaxItemSize *resource.Quantity `json:"maxItemSize,omitempty"`

	// Verbosity is memcached's log level: 0 quiet, 1 -v, 2 -vv.
	// +optional
	Verbosity *int32 `json:"verbosity,omitempty"`

	// ExtraArgs are more memcached arguments, passed after the managed
	// flags, one argv item each ("-o", "idle_timeout=600"), and checked
	// the way memcached 1.6.45 reads them. Refused: the flags the operator
	// manages or that would take memcached off its port, its user or its
	// Pod's read-only file system (-m -c -t -I -v -Z -p -s -U -d -l -u -S
	// -Y -e), their long forms or any prefix of those, which memcached's
	// getopt_long accepts, and -h -i -V, which exit; an option
	// memcached does not know, or an ambiguous prefix of one; a last
	// option missing its value; a word that is no option (memcached
	// silently ignores "modern": write "-o", "modern") and "--" (memcached
	// ignores what follows); a -o suboption memcached does not know or one
	// missing its value (three of those crash memcached); -o ssl_... (TLS
	// is spec.tls); -B binary with metrics (the exporter speaks the text
	// protocol) or with ASCII auth, -B ascii or -B auto with SASL auth
	// (memcached exits). The CRD refuses the managed flags and a last item
	// that needs a value; the hook refuses the rest, with Degraded, reason
	// InvalidSpec, naming the item.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=1024
	// +optional
	ExtraArgs []string `json:"extraArgs,omitempty"`
}

// MetricsSpec configures the Prometheus memcached exporter sidecar.
type MetricsSpec struct {
	// Enabled runs prometheus/memcached_exporter beside memcached, on port
	// 9150, and adds that port to the Service as port metrics.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// Image of the exporter. Left out, the operator's pinned default.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Image string `json:"image,omitempty"`

	// Resources of the exporter container, as in a Pod spec. Keys you set
	// replace the defaults key by key: requests of 10m CPU and 32Mi of
	// memory, a limit of 64Mi of memory.
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

	// Interval between scrapes, a Prometheus duration. Left out,
	// Prometheus's own.
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

	// Replicas is the number of memcached Pods observed, not counting
	// those terminating or finished (evicted, completed).
	// +optional
	Replicas int32 `json:"replicas"`

	// ReadyReplicas is the number of those Pods that are ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`

	// Endpoints are the ready Pods' ip:port, sorted: the server list a
	// client's hash ring needs. They change only when membership changes.
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

	// SlotAddresses are the slots' stable names with memcached's port, in
	// slot order, one per slot of the table (spec.stableNames): the list to
	// give a client configured with a static server list. A name resolves
	// to the Pod that holds its slot.
	// +optional
	SlotAddresses []string `json:"slotAddresses,omitempty"`

	// ProxyEndpoint is the host:port clients of the proxy tier are given,
	// with spec.proxy.
	// +optional
	ProxyEndpoint string `json:"proxyEndpoint,omitempty"`

	// Zones are each zone's Pods and slot table, in the order of
	// spec.zones.names (spec.zones). Every zone's table has the same
	// slots, so that a key has the same slot in every zone; status.slotTable
	// is then empty.
	// +listType=map
	// +listMapKey=name
	// +optional
	Zones []ZoneStatus `json:"zones,omitempty"`

	// Extstore is what the hook computed of spec.extstore: the file's
	// size and the RAM its items' headers take when it is full.
	// +optional
	Extstore *ExtstoreStatus `json:"extstore,omitempty"`

	// Handoffs are the Pods leaving with items to hand on, and where the
	// items go (spec.rollout.keepWarm), with the copy's progress as the
	// agent reports it; and, after a scale-up, the Pods that hand on the
	// items whose keys now hash to the new slots. An entry goes once its
	// Pod is gone, or, for a Pod that stays (Moved, Grown), once its copy
	// ended.
	// +listType=map
	// +listMapKey=pod
	// +optional
	Handoffs []Handoff `json:"handoffs,omitempty"`

	// Conditions are Available, Progressing and Degraded (see Status and
	// conditions in sync/api/v1alpha1/README.md).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions"`
}

// ZoneStatus is one zone's copy of the cache.
type ZoneStatus struct {
	// Name is the zone's, as spec.zones.names has it.
	Name string `json:"name"`

	// Replicas and ReadyReplicas count the zone's memcached Pods, as the
	// Memcached's own fields count them all.
	// +optional
	Replicas int32 `json:"replicas"`
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`

	// SlotTable is the zone's slot table: the proxies spread the keys they
	// send to this zone over its Pods in this order.
	// +optional
	SlotTable SlotTable `json:"slotTable"`
}

// SlotTable is the ordered server list the hook keeps: slot number to Pod.
type SlotTable struct {
	// Version rises whenever the served list (the Serving slots' Pods and
	// addresses, in slot order) changes, and never otherwise: clients that
	// speak Auto Discovery apply only a higher version. It is at least the
	// Unix time in milliseconds of the change, so that it keeps rising even
	// when the status is wiped and rebuilt, or a sync starts from a stale
	// copy of it.
	// +optional
	Version int64 `json:"version"`

	// ProxyVersion is, with spec.proxy, the highest version of this table
	// that every live proxy Pod has loaded, as the agent beside each asked
	// its proxy (not assumed from the pool file it wrote); 0 while one
	// has not said. A hand-off takes the proxies' clients as moved to a
	// slot's new Pod once it reaches the version that moved them.
	// +optional
	ProxyVersion int64 `json:"proxyVersion,omitempty"`

	// Slots are the slots in order, one entry per slot from 0: as many as
	// spec.size, and for a while more when a scale-down waits for Pods to
	// leave.
	// +optional
	Slots []Slot `json:"slots"`

	// Waiting are the Ready Pods that hold no slot, in the order they will
	// take one (the order they turned Ready): a rolling update's new Pod
	// waits here until the Pod it replaces starts terminating.
	// +optional
	Waiting []string `json:"waiting,omitempty"`

	// EventsUntil is the time, to the second, of the last Pod event the
	// table has taken in (a Pod turning Ready, a Pod's deletion asked). A
	// sync replays the events after it, in order, from whichever copy of
	// the status it was given, so that a copy a write or two old reaches
	// the decisions the newer ones did.
	// +optional
	EventsUntil *metav1.Time `json:"eventsUntil,omitempty"`
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
	// address: it is in the served list), Filling (spec.rollout.keepWarm:
	// the Pod took the slot of From, a terminating Pod, and is being given
	// its items; clients are still served From until it holds them; or,
	// with spec.zones and no From, the Pod took the slot with nothing
	// handed over and is being refilled from another zone: no Pod serves
	// the slot in its zone meanwhile, whose proxies read its keys from
	// another zone),
	// Adding (spec.rollout.keepWarm: a slot a scale-up added, whose keys
	// are being copied to its Pod; clients are given the slots before the
	// first Adding one, so that no key moves before its new Pod holds
	// it), NotReady (the Pod keeps its slot while it is not ready, so that
	// it comes back to the same place; not served), Leaving (the Pod is
	// terminating and no Ready Pod has taken its slot yet; it is served
	// until its memcached stops), Removing (spec.rollout.keepWarm: a slot
	// a scale-down removed, past the others, still served by its Pod until
	// the Pod handed its keys to where they hash in the slots before it)
	// or Empty.
	State SlotState `json:"state"`

	// From is a Filling slot's terminating Pod, whose items the slot's Pod
	// is being given, and FromIP its address: the Pod clients are served
	// for the slot until the copy is done (none while a Refill fills it).
	// +optional
	From string `json:"from,omitempty"`
	// +optional
	FromIP string `json:"fromIP,omitempty"`
}

// SlotState is what a slot's Pod is doing.
// +kubebuilder:validation:Enum=Serving;Filling;Adding;Removing;NotReady;Leaving;Empty
type SlotState string

// The slot states.
const (
	SlotServing  SlotState = "Serving"
	SlotFilling  SlotState = "Filling"
	SlotAdding   SlotState = "Adding"
	SlotRemoving SlotState = "Removing"
	SlotNotReady SlotState = "NotReady"
	SlotLeaving  SlotState = "Leaving"
	SlotEmpty    SlotState = "Empty"
)

// ServedIP is the address clients are given for the slot, empty when
// they are given none (the proxy then marks the slot down): the Pod's
// while it is Serving, and while it is Leaving or Removing (a
// terminating Pod's memcached serves until its preStop ends, and a slot a
// scale-down removes serves until its keys are handed on: clients are
// moved off a Pod, not dropped); a Filling slot's From, until its Pod
// holds the items (none for a Refill's, which has no From: its zone's
// proxies read the slot from another zone). No client is pointed at a
// Pod before it holds its keys, and no Pod stops serving before its
// clients have left it.
func (s Slot) ServedIP() string {
	switch s.State {
	case SlotServing, SlotLeaving, SlotRemoving:
		return s.IP
	case SlotFilling:
		return s.FromIP
	}
	return ""
}

// Holds tells whether the slot's Pod holds the slot's keys from now on, as
// a hand-off's destination: it is Serving, or Filling or Adding (being
// given them).
func (s Slot) Holds() bool {
	return (s.State == SlotServing || s.State == SlotFilling || s.State == SlotAdding) && s.IP != "" && s.Pod != ""
}

// Kept are the slots a scale-down keeps: those before the first Removing
// slot, where the removed slots' keys hash to (a hand-off routes by them).
func Kept(table []Slot) []Slot {
	for i, s := range table {
		if s.State == SlotRemoving {
			return table[:i]
		}
	}
	return table
}

// Listed are the slots clients are given, in order: those before the first
// Adding slot. A scale-up's added slots are listed once their Pods hold
// their keys: listing them moves keys (a proxy's jump hash, a client's
// modulo, over the list), and a slot past the list keeps its keys where
// they were.
func Listed(table []Slot) []Slot {
	for i, s := range table {
		if s.State == SlotAdding {
			return table[:i]
		}
	}
	return table
}

// Handoff is a Pod handing its items on.
type Handoff struct {
	// Pod is the Pod whose items are handed on, and IP its address.
	Pod string `json:"pod"`
	// +optional
	IP string `json:"ip,omitempty"`

	// Reason says where its items go: Replaced (a Ready Pod took its slot:
	// every item goes to that Pod), Removed (its slot went in a
	// scale-down: each item goes to the slot its key now hashes to),
	// Moved (it moved from a removed slot into a freed one: its items go
	// where their keys now hash), Grown (it stays; slots were added from
	// Slot on, and each of its items whose key now hashes to one of them
	// goes there, and leaves it), Waiting (its slot waits for a Ready Pod;
	// nothing is copied yet), NoSlot (it held no slot: nothing to hand
	// on) or Refill (spec.zones: it stays; it holds slot Slot in another
	// zone, and To, which took that slot in zone Zone with no Pod to hand
	// it over, is filled with its items of the slot).
	Reason HandoffReason `json:"reason"`

	// Zone is the zone whose slot table Slot and To are of (spec.zones):
	// hand-offs stay within their zone. Empty without zones.
	// +optional
	Zone string `json:"zone,omitempty"`

	// Slot is the slot whose keys the items belong to now, and To the Pod
	// that holds it now (Replaced, Waiting, Moved): for Replaced, the Pod
	// that took the slot or, if that one left too, the next. For Grown,
	// Slot is the first slot the scale-up added, and To its Pod once every
	// added slot is Serving, when the copy starts (empty until then).
	// +optional
	Slot *int32 `json:"slot,omitempty"`
	// +optional
	To string `json:"to,omitempty"`
	// +optional
	ToIP string `json:"toIP,omitempty"`

	// Flush is a Refill's: the Pod filled held the slot before, and came
	// back to it (it was unreachable, or its memcached restarted). What it
	// kept may be older than what the other zones were written or told to
	// delete meanwhile, so the agent empties it before it copies.
	// +optional
	Flush bool `json:"flush,omitempty"`

	// Progress is the copy's, as the agent reports it.
	// +optional
	Progress *HandoffProgress `json:"progress,omitempty"`
}

// HandoffReason says why a Pod hands items on, and where they go: a
// leaving Pod's (Replaced, Removed, Waiting, NoSlot) or a staying Pod's
// (Moved, Grown). What the entry's Slot and To mean depends on it
// (TakenSlot, HeldSlot, MovedInto, FirstAdded).
// +kubebuilder:validation:Enum=Replaced;Removed;Moved;Grown;Waiting;NoSlot;Refill
type HandoffReason string

// The hand-off reasons.
const (
	HandoffReplaced HandoffReason = "Replaced"
	HandoffRemoved  HandoffReason = "Removed"
	HandoffMoved    HandoffReason = "Moved"
	HandoffGrown    HandoffReason = "Grown"
	HandoffWaiting  HandoffReason = "Waiting"
	HandoffNoSlot   HandoffReason = "NoSlot"
	HandoffRefill   HandoffReason = "Refill"
)

// HandoffState is where a copy is: the agent writes it, the hook carries
// it into the status as it is. It has no enum in the CRD: a state a newer
// agent reports must not make the API server refuse the whole status.
type HandoffState string

// The states the agent reports a copy in. Copied is a Grown copy's
// between its two passes: the items are on the added slots' Pods, and
// still on the source, which clients read until the added slots are
// listed; once they are, and clients moved, the agent removes them from
// the source and reports Done.
const (
	HandoffCopying HandoffState = "Copying"
	HandoffCopied  HandoffState = "Copied"
	HandoffDone    HandoffState = "Done"
	HandoffFailed  HandoffState = "Failed"
)

// HandoffProgress is how far a copy got.
type HandoffProgress struct {
	// State is Copying, Copied (Grown: copied, not yet removed from the
	// source), Done or Failed.
	State HandoffState `json:"state"`
	// Items and Bytes handed on so far; Skipped, items the receiving Pod
	// already held (its value is newer, so the copy left it).
	// +optional
	Items int64 `json:"items"`
	// +optional
	Bytes int64 `json:"bytes"`
	// +optional
	Skipped int64 `json:"skipped"`
	// Seconds the copy has taken.
	// +optional
	Seconds int64 `json:"seconds"`
	// Message says why a copy failed.
	// +optional
	Message string `json:"message,omitempty"`
	// To is the Pod a Replaced copy gave the items to: the hook moves the
	// slot to it once its copy ended (a report of an earlier successor,
	// which left too, does not end the next one's).
	// +optional
	To string `json:"to,omitempty"`
}
