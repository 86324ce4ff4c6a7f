package memcached

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
)

// Discovery: the agent answers "config get cluster" with the slot table's
// servers, behind the Service NAME-discovery, which the status gives
// clients as the configuration endpoint.

// DiscoveryPort is where the agent answers "config get cluster", on its
// Pods and on the Service NAME-discovery: memcached's, as clients expect
// of a configuration endpoint.
const DiscoveryPort = 11211

type discovery struct{ noFeature }

func discoveryEnabled(s *v1alpha1.MemcachedSpec) bool {
	return s.Discovery != nil && s.Discovery.Enabled
}

func discoveryName(name string) string { return name + v1alpha1.DiscoverySuffix }

func (discovery) agentKinds(s *v1alpha1.MemcachedSpec) []string {
	if discoveryEnabled(s) {
		return []string{ServiceKey}
	}
	return nil
}

// besideAgent is what clients are given: a ClusterIP Service, since any
// agent answers the same list.
func (discovery) besideAgent(d *desire) []any {
	if !discoveryEnabled(d.s) {
		return nil
	}
	return []any{object[corev1.ServiceSpec]{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		Metadata: agentMeta(d.p, discoveryName(d.p.Name)),
		Spec: corev1.ServiceSpec{
			Selector: AgentSelectorLabels(d.p.Name),
			Ports: []corev1.ServicePort{{
				Name: "discovery", Port: DiscoveryPort, TargetPort: intstr.FromString("discovery"), Protocol: corev1.ProtocolTCP,
			}},
		},
	}}
}

// report gives the host:port clients are given, once the Service that
// serves it is observed; an invalid spec keeps what the status said, as it
// keeps the children.
func (discovery) report(pl *plan, st *v1alpha1.MemcachedStatus) {
	if pl.spec == nil {
		st.ConfigurationEndpoint = pl.p.Status.ConfigurationEndpoint
		return
	}
	st.ConfigurationEndpoint = pl.obs.serviceEndpoint(pl.p, discoveryEnabled(pl.spec), discoveryName(pl.p.Name), DiscoveryPort)
}
