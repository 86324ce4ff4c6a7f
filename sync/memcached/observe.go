package memcached

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/sync/metacontroller"
)

// observed is what the request says exists, reduced to what the status
// needs.
type observed struct {
	childCount int
	// deployment is the memcached Deployment NAME; deployments, every
	// observed Deployment by name (a zone's is NAME-ZONE).
	deployment  *deploymentState
	deployments map[string]*deploymentState
	pods        []metacontroller.Pod                // the parent's live Pods, sorted by name
	leaving     []metacontroller.Pod                // its terminating Pods that have not finished, sorted by name
	managed     map[string]bool                     // the child kinds the CompositeController manages
	names       map[string]bool                     // the observed children, as kind key + "/" + name
	reports     map[string]v1alpha1.HandoffProgress // the agent's, by contract.ReportKey
	// proxies are the proxy tier's Pods that have not finished, sorted
	// by name; proxyReports, what the agent beside each said its proxy
	// loaded, by Pod name (contract.ProxyReportKey).
	proxies      []metacontroller.Pod
	proxyReports map[string]contract.ProxyReport
	finalizing   bool
}

// deploymentState is the observed Deployment's spec and status, as far as
// the status needs them.
type deploymentState struct {
	generation int64
	replicas   int32
	image      string
	status     appsv1.DeploymentStatus
}

func observe(req *metacontroller.SyncRequest, finalizing bool) observed {
	obs := observed{managed: make(map[string]bool, len(req.Children)), names: map[string]bool{}, finalizing: finalizing,
		deployments: map[string]*deploymentState{}}
	for kind, objs := range req.Children {
		obs.managed[kind] = true
		obs.childCount += len(objs)
		for _, c := range objs {
			obs.names[kind+"/"+c.Metadata.Name] = true
		}
	}
	name := req.Parent.Name
	if c, ok := findChild(req.Children[ConfigMapKey], agentName(name)); ok {
		obs.reports = readReports(c)
		obs.proxyReports = readProxyReports(c)
	}
	for _, c := range req.Children[DeploymentKey] {
		obs.deployments[c.Metadata.Name] = readDeployment(c)
	}
	obs.deployment = obs.deployments[name]
	want := labelList(SelectorLabels(name))
	wantProxy := labelList(ProxySelectorLabels(name))
	live := make([]metacontroller.Pod, 0, len(req.Pods))
	for _, pod := range req.Pods {
		// The proxy tier's Pods (the customize hook asks for them too)
		// count only for what their proxies loaded (proxyVersion); a
		// terminating one still serves the connections it has through
		// its preStop, and counts while its agent still reports.
		if pod.Metadata.Namespace == req.Parent.Namespace && hasLabels(pod.Metadata.Labels, wantProxy) {
			if pod.Status.Phase != string(corev1.PodFailed) && pod.Status.Phase != string(corev1.PodSucceeded) {
				obs.proxies = append(obs.proxies, pod)
			}
			continue
		}
		// Finished (evicted, completed) Pods are gone for good, and Pods
		// of another Memcached are none of its business.
		if pod.Status.Phase == string(corev1.PodFailed) || pod.Status.Phase == string(corev1.PodSucceeded) ||
			pod.Metadata.Namespace != req.Parent.Namespace ||
			!hasLabels(pod.Metadata.Labels, want) {
			continue
		}
		// Terminating Pods are not members any more (the ReplicaSet has
		// already replaced them), but they still hold their items and,
		// until a Ready Pod takes it, their slot.
		if pod.Metadata.DeletionTimestamp != nil {
			obs.leaving = append(obs.leaving, pod)
			continue
		}
		live = append(live, pod)
	}
	obs.pods, obs.leaving, obs.proxies = sortedByName(live), sortedByName(obs.leaving), sortedByName(obs.proxies)
	return obs
}

// label is a label's key and value.
type label struct{ key, value string }

// labelList lists a set of labels.
func labelList(set map[string]string) []label {
	var list []label
	for k, v := range set {
		list = append(list, label{k, v})
	}
	return list
}

// hasLabels tells whether labels holds every label of want, as the
// selector of those labels matches: the selector's requirements (and a
// walk over a map of them for each Pod) took a tenth of a 1,000-Pod
// sync's computing to say it.
func hasLabels(labels map[string]string, want []label) bool {
	for _, l := range want {
		if got, ok := labels[l.key]; !ok || got != l.value {
			return false
		}
	}
	return true
}

// sortedByName returns the Pods sorted by name (nil for none). It sorts
// their names and places, then copies each Pod once: sorting a thousand
// Pods in place moved each (176 bytes) a dozen times, a fifth of a
// 1,000-Pod sync's computing.
func sortedByName(pods []metacontroller.Pod) []metacontroller.Pod {
	if len(pods) == 0 {
		return nil
	}
	if len(pods) == 1 {
		return pods
	}
	type place struct {
		name string
		i    int
	}
	order := make([]place, len(pods))
	for i := range pods {
		order[i] = place{pods[i].Metadata.Name, i}
	}
	slices.SortFunc(order, func(a, b place) int { return strings.Compare(a.name, b.name) })
	sorted := make([]metacontroller.Pod, len(pods))
	for i, p := range order {
		sorted[i] = pods[p.i]
	}
	return sorted
}

// findChild finds a child by name, whichever way the hook version keys the
// map.
func findChild(objs map[string]metacontroller.Child, name string) (metacontroller.Child, bool) {
	for _, c := range objs {
		if c.Metadata.Name == name {
			return c, true
		}
	}
	return metacontroller.Child{}, false
}

// deploymentSpecFields is the part of an observed Deployment's spec that the
// status reads: replicas and the containers' images. Decoding only these
// skips the bulk of the Pod template (resources, probes, affinity, spread),
// which as a full appsv1.DeploymentSpec was most of a small sync's work.
type deploymentSpecFields struct {
	Replicas *int32 `json:"replicas"`
	Template struct {
		Spec struct {
			Containers []struct {
				Name  string `json:"name"`
				Image string `json:"image"`
			} `json:"containers"`
		} `json:"spec"`
	} `json:"template"`
}

func readDeployment(c metacontroller.Child) *deploymentState {
	d := &deploymentState{generation: c.Metadata.Generation}
	var spec deploymentSpecFields
	if metacontroller.DecodeObject(c.Spec, &spec) == nil {
		if spec.Replicas != nil {
			d.replicas = *spec.Replicas
		} else {
			d.replicas = 1
		}
		for _, ctr := range spec.Template.Spec.Containers {
			if ctr.Name == "memcached" {
				d.image = ctr.Image
			}
		}
	}
	_ = metacontroller.DecodeObject(c.Status, &d.status)
	return d
}

// hasChild tells whether a child of kind (its key) and name was observed.
func (obs observed) hasChild(kind, name string) bool { return obs.names[kind+"/"+name] }

// serviceEndpoint is the host:port of the Service name, once it is
// observed, for a feature that is on.
func (obs observed) serviceEndpoint(p *metacontroller.Parent, on bool, name string, port int) string {
	if !on || !obs.hasChild(ServiceKey, name) {
		return ""
	}
	return name + "." + p.Namespace + ".svc:" + strconv.Itoa(port)
}

// readReports reads the agent's reports: the data of its ConfigMap, one
// JSON object a hand-off, keyed by contract.ReportKey. One that does not
// decode is left out: the hook only carries them into the status.
func readReports(c metacontroller.Child) map[string]v1alpha1.HandoffProgress {
	out := map[string]v1alpha1.HandoffProgress{}
	for key, raw := range c.Data {
		var r v1alpha1.HandoffProgress
		if json.Unmarshal([]byte(raw), &r) == nil && r.State != "" {
			out[key] = r
		}
	}
	return out
}

// readProxyReports reads what the agent beside each proxy reported its
// proxy loaded, by the proxy Pod's name. One that does not decode is left
// out, as if not said yet.
func readProxyReports(c metacontroller.Child) map[string]contract.ProxyReport {
	var out map[string]contract.ProxyReport
	for key, raw := range c.Data {
		pod, ok := contract.ParseProxyReportKey(key)
		if !ok {
			continue
		}
		if r, err := contract.DecodeProxyReport(raw); err == nil {
			if out == nil {
				out = map[string]contract.ProxyReport{}
			}
			out[pod] = r
		}
	}
	return out
}
