package memcached

import (
	"encoding/json"
	"net"
	"net/netip"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/metacontroller"
)

// Stable names: every slot has a DNS name, NAME-N.NAME-slots.NAMESPACE.svc,
// that resolves to the Pod holding slot N (spec.stableNames). The hook
// writes the Service NAME-slots, headless and without a selector, and its
// EndpointSlice from the slot table, so every cluster DNS serves the names
// (A records and the SRV record _memcached._tcp.NAME-slots, whose targets
// sort in slot order), and clients that hash on server names keep their
// keys when a Pod is replaced: the name stays, only its address changes.

// EndpointSliceKey is the EndpointSlices' kind key.
const EndpointSliceKey = "EndpointSlice.discovery.k8s.io/v1"

// slicesManagedBy is the EndpointSlices' endpointslice.kubernetes.io/managed-by:
// anything but the EndpointSlice controller's own value keeps that
// controller (and the mirroring one) off them.
const slicesManagedBy = "memcached-operator.cache.example.com"

type stableNames struct{ noFeature }

func stableNamesEnabled(s *v1alpha1.MemcachedSpec) bool {
	return s.StableNames != nil && s.StableNames.Enabled
}

// slotsName is the Service that names the slots: NAME-slots.
func slotsName(name string) string { return name + v1alpha1.SlotsSuffix }

// slotHostname is slot's name in NAME-slots, NAME-N as a StatefulSet names
// its Pods: short, and sorted naturally it is slot order (dskit and Thanos
// sort their servers so).
func slotHostname(name string, slot int32) string {
	return name + "-" + strconv.Itoa(int(slot))
}

// slotAddress is slot's name in the cluster with memcached's port,
// NAME-N.NAME-slots.NAMESPACE.svc:11211; it resolves through the Pods'
// search path, whatever the cluster's domain.
func slotAddress(p *metacontroller.Parent, slot int32) string {
	host := slotHostname(p.Name, slot) + "." + slotsName(p.Name) + "." + p.Namespace + ".svc"
	return net.JoinHostPort(host, strconv.Itoa(Port))
}

// kinds: the Service and the EndpointSlice come both or none.
func (stableNames) kinds(s *v1alpha1.MemcachedSpec) []string {
	if stableNamesEnabled(s) {
		return []string{ServiceKey, EndpointSliceKey}
	}
	return nil
}

func (stableNames) children(d *desire) []any {
	if !stableNamesEnabled(d.s) || !d.managed[ServiceKey] || !d.managed[EndpointSliceKey] {
		return nil
	}
	meta := childMeta(d.p)
	meta.Name = slotsName(d.p.Name)
	children := []any{object[corev1.ServiceSpec]{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		Metadata: meta,
		Spec: corev1.ServiceSpec{
			// Headless and without a selector: the endpoints are the
			// slots, which the hook writes. Every one is published, its
			// Pod ready or not (slotSlices), so that a slot's name stays
			// while its Pod is not ready or leaving: a name that went away
			// would make clients that hash on names move keys.
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Ports: []corev1.ServicePort{{
				Name: "memcached", Port: Port, TargetPort: intstr.FromInt32(Port), Protocol: corev1.ProtocolTCP,
			}},
		},
	}}
	return append(children, slotSlices(d, meta)...)
}

// slotSlices are the EndpointSlices of the slots: one per address family
// (an EndpointSlice's addressType cannot change), NAME-slots for IPv4,
// always, and NAME-slots-ipv6 while a slot has an IPv6 address. Each slot
// with an address is an endpoint, hostname NAME-N, in slot order: a Pod
// that holds it (targetRef) or, while the slot is Empty (its Pod was lost
// and no Ready Pod took it yet), the address it had, so that the name
// stays and clients miss on that slot alone rather than rehash.
//
// Every endpoint is ready: the cluster DNS (CoreDNS, measured in test/dns)
// serves only ready endpoints, publishNotReadyAddresses or not, and the
// API's own rule for a Service that publishes not-ready addresses is that
// ready is overridden so (what the EndpointSlice controller writes for
// one). serving and terminating say what the slot's Pod does: serving
// while it is Serving or Leaving (a leaving Pod serves until its hand-off
// ends), terminating while it is Leaving. A Filling slot (keepWarm) is
// still its leaving Pod's, From, serving and terminating, until its new
// Pod holds the items.
func slotSlices(d *desire, meta metav1.ObjectMeta) []any {
	last := lastSlotAddresses(d)
	byFamily := map[discoveryv1.AddressType][]discoveryv1.Endpoint{}
	for _, e := range v1alpha1.Listed(d.cells[0].assigned.Slots) {
		hostname := slotHostname(d.p.Name, e.Slot)
		ep := discoveryv1.Endpoint{Hostname: &hostname}
		addr := e.IP
		switch {
		case e.State == v1alpha1.SlotFilling && e.FromIP != "" && e.From != "":
			// Its Pod is being given From's items: the name goes on
			// resolving to From until it holds them.
			addr = e.FromIP
			ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: d.p.Namespace, Name: e.From}
			ep.Conditions = discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(true)}
		case e.IP != "" && e.Pod != "":
			ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: d.p.Namespace, Name: e.Pod}
			ep.Conditions = discoveryv1.EndpointConditions{
				Ready:       ptr(true),
				Serving:     ptr(e.State == v1alpha1.SlotServing || e.State == v1alpha1.SlotLeaving),
				Terminating: ptr(e.State == v1alpha1.SlotLeaving),
			}
		case last[hostname] != "":
			addr = last[hostname]
			ep.Conditions = discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(false), Terminating: ptr(false)}
		default:
			continue
		}
		ip, err := netip.ParseAddr(addr)
		if err != nil {
			continue
		}
		ip = ip.Unmap() // ::ffff:a.b.c.d is an IPv4 address, written as one
		family := discoveryv1.AddressTypeIPv4
		if ip.Is6() {
			family = discoveryv1.AddressTypeIPv6
		}
		ep.Addresses = []string{ip.String()}
		byFamily[family] = append(byFamily[family], ep)
	}
	var out []any
	for _, family := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		eps := byFamily[family]
		if family == discoveryv1.AddressTypeIPv6 && len(eps) == 0 {
			continue
		}
		m := meta
		m.Name = sliceName(d.p.Name, family)
		m.Labels = childLabels(d.p.Name)
		m.Labels[discoveryv1.LabelServiceName] = meta.Name
		m.Labels[discoveryv1.LabelManagedBy] = slicesManagedBy
		out = append(out, endpointSlice{
			TypeMeta:    metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
			ObjectMeta:  m,
			AddressType: family,
			Endpoints:   eps,
			Ports: []discoveryv1.EndpointPort{{
				Name: ptr("memcached"), Port: ptr(int32(Port)), Protocol: ptr(corev1.ProtocolTCP),
			}},
		})
	}
	return out
}

// endpointSlice is discoveryv1.EndpointSlice with endpoints left out when
// there are none. An API server returns an empty list as null (before
// the default of kubernetes/kubernetes#136109), which Metacontroller's
// merge would see differ from an answered [] and update on every sync;
// a key left out it leaves alone, and its three-way merge still clears
// the endpoints it applied before.
type endpointSlice struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	AddressType       discoveryv1.AddressType    `json:"addressType"`
	Endpoints         []discoveryv1.Endpoint     `json:"endpoints,omitempty"`
	Ports             []discoveryv1.EndpointPort `json:"ports"`
}

// sliceName is the EndpointSlice of a family: NAME-slots, NAME-slots-ipv6.
func sliceName(name string, family discoveryv1.AddressType) string {
	if family == discoveryv1.AddressTypeIPv6 {
		return slotsName(name) + "-ipv6"
	}
	return slotsName(name)
}

// lastSlotAddresses are the addresses the observed EndpointSlices give the
// slots' names, by hostname.
func lastSlotAddresses(d *desire) map[string]string {
	out := map[string]string{}
	for _, family := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		c, ok := findChild(d.observed[EndpointSliceKey], sliceName(d.p.Name, family))
		if !ok || len(c.Endpoints) == 0 {
			continue
		}
		var eps []discoveryv1.Endpoint
		if json.Unmarshal(c.Endpoints, &eps) != nil {
			continue
		}
		for _, ep := range eps {
			if ep.Hostname != nil && len(ep.Addresses) > 0 {
				out[*ep.Hostname] = ep.Addresses[0]
			}
		}
	}
	return out
}

// report gives the slots' addresses, once the Service and its
// EndpointSlice are observed (before, the names resolve to nothing); an
// invalid spec keeps what the status said.
func (stableNames) report(pl *plan, st *v1alpha1.MemcachedStatus) {
	switch {
	case pl.spec == nil:
		st.SlotAddresses = pl.p.Status.SlotAddresses
	case stableNamesEnabled(pl.spec) && pl.obs.hasChild(ServiceKey, slotsName(pl.p.Name)) &&
		pl.obs.hasChild(EndpointSliceKey, sliceName(pl.p.Name, discoveryv1.AddressTypeIPv4)):
		for _, e := range v1alpha1.Listed(pl.cells[0].assigned.Slots) {
			st.SlotAddresses = append(st.SlotAddresses, slotAddress(pl.p, e.Slot))
		}
	}
}
