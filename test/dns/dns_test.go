package dns_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/example/memcached-operator/test/dns"
	"github.com/example/memcached-operator/test/kube"
	"github.com/example/memcached-operator/test/testutil"
)

func TestMain(m *testing.M) { kube.Main(m) }

const (
	// memcachedPort is the port the slots' Service and EndpointSlice name
	// "memcached".
	memcachedPort = 11211
	// managedBy is the EndpointSlice's endpointslice.kubernetes.io/managed-by:
	// any value but the EndpointSlice controller's keeps that controller
	// off the slice.
	managedBy = "memcached-operator.cache.example.com"
)

// slot is one endpoint of the EndpointSlice: the slot's number, the IP of
// the Pod holding it, and the conditions written for it.
type slot struct {
	index   int
	ip      string
	ready   bool
	serving bool
}

// slotName is the slot's hostname in the EndpointSlice, hence its DNS
// label: NAME-<slot>.
func slotName(memcached string, index int) string { return fmt.Sprintf("%s-%d", memcached, index) }

// slotsService is the Service issue #27's hook writes for the Memcached
// memcached: headless, without a selector (the EndpointSlice is written
// beside it, not derived from Pods), publishing not-ready addresses as
// asked, one port named memcached.
func slotsService(namespace, memcached string, publishNotReady bool) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: memcached + "-slots", Namespace: namespace},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: publishNotReady,
			Ports: []corev1.ServicePort{{
				Name: "memcached", Port: memcachedPort, Protocol: corev1.ProtocolTCP,
			}},
		},
	}
}

// slotsSlice is the EndpointSlice issue #27's hook writes beside
// slotsService: one endpoint per slot, its hostname the slot's name, its
// targetRef the Pod.
func slotsSlice(namespace, memcached string, slots []slot) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      memcached + "-slots",
			Namespace: namespace,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: memcached + "-slots",
				discoveryv1.LabelManagedBy:   managedBy,
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{
			Name: new("memcached"), Port: new(int32(memcachedPort)), Protocol: new(corev1.ProtocolTCP),
		}},
	}
	for _, s := range slots {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{s.ip},
			Hostname:   new(slotName(memcached, s.index)),
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: namespace, Name: fmt.Sprintf("%s-pod-%d", memcached, s.index)},
			Conditions: discoveryv1.EndpointConditions{Ready: new(s.ready), Serving: new(s.serving)},
		})
	}
	return es
}

// apply writes objects with kubectl apply, as one stream of JSON objects.
func apply(t *testing.T, c *kube.Cluster, objects ...any) {
	t.Helper()
	var docs [][]byte
	for _, o := range objects {
		docs = append(docs, testutil.MustMarshal(t, o))
	}
	if _, stderr, err := c.KubectlStdin(bytes.Join(docs, []byte("\n")), "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, stderr)
	}
}

// createNamespace creates a namespace named prefix and a random suffix,
// and returns its name: the cluster is shared by every test of the
// package (and every run of -count), and no controller creates a
// namespace on first use in it.
func createNamespace(t *testing.T, c *kube.Cluster, prefix string) string {
	t.Helper()
	ns := corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"},
	}
	name, stderr, err := c.KubectlStdin(testutil.MustMarshal(t, ns), "create", "-f", "-", "-o", "jsonpath={.metadata.name}")
	if err != nil || name == "" {
		t.Fatalf("creating a namespace %s-...: %v\n%s", prefix, err, stderr)
	}
	return name
}

// answers is what CoreDNS answers for a Memcached's slots: the SRV
// records of its memcached port, and the A records (or the error, when
// there are none) of its Service and of each slot's name.
type answers struct {
	SRV []string
	A   map[string]string
}

// ask asks srv for the answers about memcached's slots 0..slots-1 in
// namespace. An SRV record shows as "target:port"; a name without A
// records as "not found"; a failure to answer as its error.
func ask(srv *dns.Server, namespace, memcached string, slots int) answers {
	service := memcached + "-slots." + namespace + ".svc"
	got := answers{A: map[string]string{}}
	srvs, err := srv.LookupSRV(srv.FQDN("_memcached._tcp." + service))
	switch {
	case dns.IsNotFound(err):
	case err != nil:
		got.SRV = []string{err.Error()}
	}
	for _, r := range srvs {
		got.SRV = append(got.SRV, fmt.Sprintf("%s:%d", r.Target, r.Port))
	}
	names := []string{service}
	for i := range slots {
		names = append(names, slotName(memcached, i)+"."+service)
	}
	for _, name := range names {
		addrs, err := srv.LookupA(srv.FQDN(name))
		switch {
		case dns.IsNotFound(err):
			got.A[name] = "not found"
		case err != nil:
			got.A[name] = err.Error()
		default:
			got.A[name] = joinAddrs(addrs)
		}
	}
	return got
}

// joinAddrs is addrs as one comparable string, "" for none.
func joinAddrs(addrs []netip.Addr) string {
	var s []string
	for _, a := range addrs {
		s = append(s, a.String())
	}
	return strings.Join(s, ",")
}

// pollInterval is the pause between two asks of a poll, hence the
// resolution of the times measured: a lookup takes well under a
// millisecond on loopback.
const pollInterval = 5 * time.Millisecond

// eventually polls ask until it gives want or timeout has passed since
// since, and returns the last answers and the time since since: CoreDNS
// learns of a write through its watch, a moment after the API server
// acknowledged it.
func eventually(ask func() answers, want answers, since time.Time, timeout time.Duration) (got answers, took time.Duration, ok bool) {
	for {
		got = ask()
		if cmp.Equal(got, want) {
			return got, time.Since(since), true
		}
		if time.Since(since) > timeout {
			return got, time.Since(since), false
		}
		time.Sleep(pollInterval)
	}
}

// TestSlotNames writes a Memcached's slots as issue #27's hook will (a
// headless Service without selector, an EndpointSlice the EndpointSlice
// controller leaves alone) and asks a real CoreDNS for each slot's name
// and for the SRV records that list them.
//
// What it found, and holds the hook to: CoreDNS (v1.14.7, and v1.15.0's
// source reads the same) serves only the endpoints whose conditions.ready
// is true (or unset), and never reads the Service's
// publishNotReadyAddresses. Kubernetes' own EndpointSlice controller is
// what applies that flag: it writes ready = publishNotReadyAddresses ||
// (Pod ready && not terminating) (k8s.io/endpointslice podToEndpoint). So
// a slot written ready: false has no name and no SRV record, with or
// without the flag; a hook that wants a slot that is not serving to keep
// its name must write ready: true and say the truth in serving, as the
// controller does for a Service that publishes not-ready addresses.
func TestSlotNames(t *testing.T) {
	c := kube.Shared(t, kube.Options{})
	srv := dns.Start(t, dns.Options{Kubeconfig: c.Kubeconfig()})
	namespace := createNamespace(t, c, "dns-names")

	cases := []struct {
		name            string
		memcached       string
		publishNotReady bool
		slots           []slot
		// wantListed are the slots with a name and an SRV record.
		wantListed []int
	}{{
		name:            "slot 2 not ready, publishNotReadyAddresses",
		memcached:       "cache",
		publishNotReady: true,
		slots: []slot{
			{index: 0, ip: "10.244.0.2", ready: true, serving: true},
			{index: 1, ip: "10.244.0.6", ready: true, serving: true},
			{index: 2, ip: "10.244.0.10", ready: false, serving: false},
		},
		wantListed: []int{0, 1},
	}, {
		name:            "slot 2 not ready, no publishNotReadyAddresses",
		memcached:       "private",
		publishNotReady: false,
		slots: []slot{
			{index: 0, ip: "10.244.1.2", ready: true, serving: true},
			{index: 1, ip: "10.244.1.6", ready: true, serving: true},
			{index: 2, ip: "10.244.1.10", ready: false, serving: false},
		},
		wantListed: []int{0, 1},
	}, {
		name:            "slot 2 not serving but written ready, as the EndpointSlice controller does under publishNotReadyAddresses",
		memcached:       "published",
		publishNotReady: true,
		slots: []slot{
			{index: 0, ip: "10.244.2.2", ready: true, serving: true},
			{index: 1, ip: "10.244.2.6", ready: true, serving: true},
			{index: 2, ip: "10.244.2.10", ready: true, serving: false},
		},
		wantListed: []int{0, 1, 2},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			apply(t, c, slotsService(namespace, tc.memcached, tc.publishNotReady), slotsSlice(namespace, tc.memcached, tc.slots))

			service := tc.memcached + "-slots." + namespace + ".svc"
			want := answers{A: map[string]string{}}
			var listedIPs []string
			for _, s := range tc.slots {
				want.A[slotName(tc.memcached, s.index)+"."+service] = "not found"
			}
			for _, i := range tc.wantListed {
				s := tc.slots[i]
				want.SRV = append(want.SRV, fmt.Sprintf("%s:%d", srv.FQDN(slotName(tc.memcached, s.index)+"."+service), memcachedPort))
				want.A[slotName(tc.memcached, s.index)+"."+service] = s.ip
				listedIPs = append(listedIPs, s.ip)
			}
			// The Service's own name gives every listed slot's IP: it is
			// headless.
			want.A[service] = joinAddrs(sortedAddrs(t, listedIPs))

			askSlots := func() answers { return ask(srv, namespace, tc.memcached, len(tc.slots)) }
			got, took, ok := eventually(askSlots, want, time.Now(), srv.TTL()+30*time.Second)
			if !ok {
				t.Fatalf("CoreDNS's answers after %s (-got +want):\n%s", took.Round(time.Millisecond), cmp.Diff(got, want))
			}

			// Nothing selects the Pods: the names come from the
			// EndpointSlice alone, and no controller runs in the test
			// cluster that could have written another.
			var svc corev1.Service
			getJSON(t, c, &svc, "-n", namespace, "service", tc.memcached+"-slots")
			if got := svc.Spec.Selector; got != nil {
				t.Errorf("the Service has the selector %v, want none", got)
			}
		})
	}
}

// TestDNSFollowsSlot moves a slot to another Pod IP in the EndpointSlice,
// as the hook does when a slot's Pod is replaced, and measures how long
// until CoreDNS answers the new IP for the slot's name: from the patch's
// request to the API server to the first answer giving it. A figure,
// printed, never asserted: the poll's deadline, the TTL and 30 s, only
// bounds the wait. A client caching the old answer (the cluster's CoreDNS
// cache plugin, a resolver library) adds up to the TTL on top; this
// test's resolver caches nothing.
func TestDNSFollowsSlot(t *testing.T) {
	c := kube.Shared(t, kube.Options{})
	srv := dns.Start(t, dns.Options{Kubeconfig: c.Kubeconfig()})
	const memcached = "cache"
	namespace := createNamespace(t, c, "dns-follow")
	slots := []slot{
		{index: 0, ip: "10.244.3.2", ready: true, serving: true},
		{index: 1, ip: "10.244.3.6", ready: true, serving: true},
		{index: 2, ip: "10.244.3.10", ready: true, serving: true},
	}
	apply(t, c, slotsService(namespace, memcached, true), slotsSlice(namespace, memcached, slots))

	// The moves are patches through client-go rather than kubectl
	// applies, so that the time measured starts at the request, not at a
	// process that takes longer to start than CoreDNS takes to follow.
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	endpointSlices := client.Resource(discoveryv1.SchemeGroupVersion.WithResource("endpointslices")).Namespace(namespace)

	name := srv.FQDN(slotName(memcached, 1) + "." + memcached + "-slots." + namespace + ".svc")
	askSlot1 := func() answers {
		addrs, err := srv.LookupA(name)
		if err != nil {
			return answers{A: map[string]string{name: err.Error()}}
		}
		return answers{A: map[string]string{name: joinAddrs(addrs)}}
	}
	timeout := srv.TTL() + 30*time.Second
	want := answers{A: map[string]string{name: slots[1].ip}}
	if got, took, ok := eventually(askSlot1, want, time.Now(), timeout); !ok {
		t.Fatalf("before any move, after %s (-got +want):\n%s", took.Round(time.Millisecond), cmp.Diff(got, want))
	}

	// Five moves, each to an IP slot 1 never had, so that an answer
	// cannot be an earlier one; benchstat averages the five lines.
	for move := range 5 {
		slots[1].ip = fmt.Sprintf("10.244.3.%d", 14+4*move)
		want := answers{A: map[string]string{name: slots[1].ip}}
		patch := testutil.MustMarshal(t, map[string]any{"endpoints": slotsSlice(namespace, memcached, slots).Endpoints})
		began := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := endpointSlices.Patch(ctx, memcached+"-slots", types.MergePatchType, patch, metav1.PatchOptions{})
		cancel()
		if err != nil {
			t.Fatalf("move %d: patching the EndpointSlice: %v", move+1, err)
		}
		got, took, ok := eventually(askSlot1, want, began, timeout)
		if !ok {
			t.Fatalf("move %d: after %s (-got +want):\n%s", move+1, took.Round(time.Millisecond), cmp.Diff(got, want))
		}
		testutil.Benchmark("BenchmarkDNSFollowsSlot", "%.1f ms/change", float64(took.Microseconds())/1000)
	}
}

// getJSON decodes `kubectl get -o json` of what args name into v.
func getJSON(t *testing.T, c *kube.Cluster, v any, args ...string) {
	t.Helper()
	stdout, stderr, err := c.Kubectl(append([]string{"get", "-o", "json"}, args...)...)
	if err != nil {
		t.Fatalf("kubectl get %v: %v\n%s", args, err, stderr)
	}
	if err := json.Unmarshal([]byte(stdout), v); err != nil {
		t.Fatalf("kubectl get %v: %v", args, err)
	}
}

// sortedAddrs parses IPs and sorts them as LookupA does.
func sortedAddrs(t *testing.T, ips []string) []netip.Addr {
	t.Helper()
	var addrs []netip.Addr
	for _, ip := range ips {
		addrs = append(addrs, netip.MustParseAddr(ip))
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	return addrs
}
