package memcached

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
)

// networkPolicy lets Pods of the Memcached's namespace, and the peers the
// spec lists, reach memcached's port, and the exporter's when it runs;
// nothing else reaches the Pods (where the network plugin enforces
// NetworkPolicy). Kubelet's probes come from the node, which NetworkPolicy
// does not govern. The agent and the proxy have their own, by the same
// rules.
type networkPolicy struct{ noFeature }

func (networkPolicy) kinds(*v1alpha1.MemcachedSpec) []string { return []string{NetworkPolicyKey} }

func (networkPolicy) children(d *desire) []any {
	if !d.managed[NetworkPolicyKey] {
		return nil
	}
	np := peersOf(d.s)
	ingress := []networkingv1.NetworkPolicyIngressRule{ingressRule(Port, np.Memcached)}
	if metricsEnabled(d.s) {
		ingress = append(ingress, ingressRule(ExporterPort, np.Metrics))
	}
	return []any{ingressPolicy(childMeta(d.p), SelectorLabels(d.p.Name), ingress...)}
}

// peersOf is spec.networkPolicy, or what it says when unset.
func peersOf(s *v1alpha1.MemcachedSpec) v1alpha1.NetworkPolicySpec {
	if s.NetworkPolicy != nil {
		return *s.NetworkPolicy
	}
	return v1alpha1.NetworkPolicySpec{}
}

// ingressRule opens port to the Pods of the policy's namespace and to
// peers, or to every source when peers allow all.
func ingressRule(port int, peers *v1alpha1.Peers) networkingv1.NetworkPolicyIngressRule {
	tcp := corev1.ProtocolTCP
	r := networkingv1.NetworkPolicyIngressRule{
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr(intstr.FromInt(port))}},
	}
	if peers != nil && peers.AllowAll {
		return r // no from: every source
	}
	// An empty podSelector: every Pod of the policy's namespace.
	r.From = []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}
	if peers != nil {
		r.From = append(r.From, peers.From...)
	}
	return r
}
