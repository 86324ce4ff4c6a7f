package e2e

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/test/dataplane"
	"github.com/example/memcached-operator/test/testutil"
)

// testProxyOnLoopback creates a Memcached with spec.proxy and checks that
// the proxy tier converges: the proxy Deployment (its Pods Ready: kwok runs
// no container), its Service, PodDisruptionBudget, NetworkPolicy (selecting
// exactly the proxy's Pods, opening 11211) and ConfigMap (the route
// configuration) exist and are owned by the Memcached, and
// status.proxyEndpoint names the Service. Then it runs the agent beside
// the proxy on loopback, with the arguments of the proxy Deployment's
// agent container, against the suite's API server as the ServiceAccount
// the hook made: through a scale-up, a scale-down and a deleted Pod, once
// the Memcached converged the pool file is exactly what its slot table
// says; the time from the status change to the pool written is printed.
func testProxyOnLoopback(s *scenario) {
	const name = "fronted"
	s.create(name, "{size: 3, proxy: {enabled: true}}")
	obs, _ := s.waitConverged(name, 3, "")
	uid := string(obs.mc.Metadata.UID)
	proxy := name + v1alpha1.ProxySuffix

	var d appsv1.Deployment
	s.poll("the proxy Deployment rolled out", convergeTimeout, func() error {
		s.getJSON(&d, "deployment", proxy)
		ds := d.Status
		if d.Spec.Replicas == nil || ds.ObservedGeneration != d.Generation || ds.ReadyReplicas != *d.Spec.Replicas || ds.UpdatedReplicas != *d.Spec.Replicas {
			return fmt.Errorf("deployment %s: replicas %v, status %+v", proxy, d.Spec.Replicas, ds)
		}
		return nil
	})
	children := s.children(uid)
	for _, want := range []string{"Deployment/" + proxy, "Service/" + proxy, "PodDisruptionBudget/" + proxy, "NetworkPolicy/" + proxy,
		"ConfigMap/" + proxy, "ServiceAccount/" + name + "-agent", "Role/" + name + "-agent", "RoleBinding/" + name + "-agent"} {
		if _, ok := children[want]; !ok {
			s.t.Errorf("no %s owned by the Memcached among %v", want, slices.Sorted(maps.Keys(children)))
		}
	}
	if _, ok := children["Deployment/"+name+"-agent"]; ok {
		s.t.Errorf("an agent Deployment without discovery or keepWarm: the proxy's Pods carry their own agent")
	}
	var m struct {
		Status struct {
			ProxyEndpoint string `json:"proxyEndpoint"`
		} `json:"status"`
	}
	s.getJSON(&m, "memcached", name)
	if want := fmt.Sprintf("%s.%s.svc:11211", proxy, s.ns); m.Status.ProxyEndpoint != want {
		s.t.Errorf("status.proxyEndpoint is %q, want %q", m.Status.ProxyEndpoint, want)
	}

	// The Service and the NetworkPolicy select exactly the proxy's Pods.
	var pods corev1.PodList
	s.getJSON(&pods, "pods")
	selects := func(sel labels.Selector) []string {
		var got []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && sel.Matches(labels.Set(p.Labels)) {
				got = append(got, p.Name)
			}
		}
		slices.Sort(got)
		return got
	}
	tmpl, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		s.t.Fatal(err)
	}
	proxyPods := selects(tmpl)
	if len(proxyPods) != int(*d.Spec.Replicas) {
		s.t.Errorf("the proxy Deployment's selector selects %v, want %d Pods", proxyPods, *d.Spec.Replicas)
	}
	var svc corev1.Service
	s.getJSON(&svc, "service", proxy)
	if got := selects(labels.SelectorFromSet(svc.Spec.Selector)); !slices.Equal(got, proxyPods) {
		s.t.Errorf("service %s selects %v, want the proxy's Pods %v", proxy, got, proxyPods)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 11211 || svc.Spec.ClusterIP == "None" {
		s.t.Errorf("service %s: clusterIP %q, ports %+v; want a ClusterIP on 11211", proxy, svc.Spec.ClusterIP, svc.Spec.Ports)
	}
	var np networkingv1.NetworkPolicy
	s.getJSON(&np, "networkpolicy", proxy)
	npSel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		s.t.Fatal(err)
	}
	if got := selects(npSel); !slices.Equal(got, proxyPods) {
		s.t.Errorf("networkpolicy %s selects %v, want the proxy's Pods %v", proxy, got, proxyPods)
	}
	if len(np.Spec.Ingress) == 0 || len(np.Spec.Ingress[0].Ports) != 1 || np.Spec.Ingress[0].Ports[0].Port.String() != "11211" {
		s.t.Errorf("networkpolicy %s: ingress %+v, want a first rule for port 11211", proxy, np.Spec.Ingress)
	}
	var cm corev1.ConfigMap
	s.getJSON(&cm, "configmap", proxy)
	if !strings.Contains(cm.Data["config.lua"], "mcp.register_cron") {
		s.t.Errorf("configmap %s holds no route configuration: %v", proxy, cm.Data)
	}

	// The agent beside the proxy, on loopback: the Deployment's own
	// arguments, with a pool file here and the admin port on loopback.
	var args []string
	poolFile := filepath.Join(s.t.TempDir(), "pool")
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != "agent" {
			continue
		}
		for _, a := range c.Args {
			switch {
			case strings.HasPrefix(a, "--admin-listen="):
			case strings.HasPrefix(a, "--pool-file="):
				args = append(args, "--pool-file="+poolFile)
			default:
				args = append(args, a)
			}
		}
	}
	if !slices.Contains(args, "--pool-file="+poolFile) || !slices.Contains(args, "--listen=") {
		s.t.Fatalf("the proxy Deployment's agent runs with %v: no --pool-file, or an endpoint", args)
	}
	// No proxy runs beside it here: --proxy-addr= asks none (the
	// default, 127.0.0.1:11211, is the proxy in its Pod).
	dataplane.StartAgent(s.t, append(args, "--kubeconfig="+s.agentKubeconfig(name), "--namespace="+s.ns, "--shutdown-delay=0s", "--proxy-addr=")...)

	version := int64(0)
	check := func(step string, size int32) {
		s.t.Helper()
		s.waitConverged(name, size, "")
		var st slotStatus
		s.getJSON(&st, "memcached", name)
		want := dataplane.ExpectedPool(st.Status.SlotTable)
		serving := 0
		for _, e := range st.Status.SlotTable.Slots {
			if e.State == v1alpha1.SlotServing {
				serving++
			}
		}
		if serving != int(size) {
			s.t.Errorf("%s: converged at size %d, the slot table has %d Serving slots: %+v", step, size, serving, st.Status.SlotTable.Slots)
		}
		var got []byte
		s.poll(step+": the pool file the slot table's", convergeTimeout, func() error {
			got, _ = os.ReadFile(poolFile)
			if string(got) != want {
				return fmt.Errorf("the pool file holds\n%s\nthe slot table says\n%s", got, want)
			}
			return nil
		})
		if fi, err := os.Stat(poolFile); err != nil || fi.Mode().Perm() != 0o644 {
			s.t.Errorf("%s: the pool file: %v, %v; want mode 0644", step, fi, err)
		}
		if st.Status.SlotTable.Version <= version {
			s.t.Errorf("%s: version %d did not rise from %d", step, st.Status.SlotTable.Version, version)
		}
		version = st.Status.SlotTable.Version
		s.t.Logf("%s: pool\n%s", step, got)
	}
	// timeToPool measures, from the moment the watch shows the status
	// with a new version, how long until the pool file holds it.
	timeToPool := func(step string, change func()) {
		s.t.Helper()
		v, seen := s.slotTableChange(name, step, version, change)
		testutil.EventuallyEvery(s.t, time.Until(seen.Add(convergeTimeout)), 5*time.Millisecond, func() error {
			b, _ := os.ReadFile(poolFile)
			var got int64
			if _, err := fmt.Sscanf(string(b), "version %d\n", &got); err != nil || got < v {
				return fmt.Errorf("%s: the pool file never took version %d: %q", step, v, b)
			}
			return nil
		})
		record(s.t, "status-to-pool/"+step, time.Since(seen), "")
	}
	check("first pool", 3)
	timeToPool("scale-3-to-5", func() { s.kubectl("scale", "memcached/"+name, "--replicas=5") })
	check("scaled to 5", 5)
	timeToPool("scale-5-to-2", func() { s.kubectl("scale", "memcached/"+name, "--replicas=2") })
	check("scaled to 2", 2)
	var mcPods corev1.PodList
	s.getJSON(&mcPods, "pods", "-l", "app.kubernetes.io/name=memcached,app.kubernetes.io/instance="+name)
	timeToPool("deleted-pod", func() { s.kubectl("delete", "pod", mcPods.Items[0].Name, "--wait=false") })
	check("a deleted Pod replaced", 2)
}
