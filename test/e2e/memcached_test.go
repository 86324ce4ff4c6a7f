package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
)

// memcached is a Memcached as kubectl get -o json shows it, as far as the
// scenarios read it: the fields the README documents.
type memcached struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     struct {
		Size  *int32 `json:"size"`
		Image string `json:"image"`
	} `json:"spec"`
	Status struct {
		Nodes              []string           `json:"nodes"`
		Replicas           int32              `json:"replicas"`
		ReadyReplicas      int32              `json:"readyReplicas"`
		Endpoints          []string           `json:"endpoints"`
		Selector           string             `json:"selector"`
		Image              string             `json:"image"`
		ObservedGeneration int64              `json:"observedGeneration"`
		Conditions         []metav1.Condition `json:"conditions"`
		// Extstore is spec.extstore's file, as the hook computed it.
		Extstore *v1alpha1.ExtstoreStatus `json:"extstore"`
	} `json:"status"`
}

// condition returns the status condition of type typ, or nil.
func (m *memcached) condition(typ string) *metav1.Condition {
	for i := range m.Status.Conditions {
		if m.Status.Conditions[i].Type == typ {
			return &m.Status.Conditions[i]
		}
	}
	return nil
}

// conditions renders the status conditions for a failure message:
// Type=Status/Reason, space-separated.
func (m *memcached) conditions() string {
	var out []string
	for _, c := range m.Status.Conditions {
		out = append(out, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, " ")
}

// memcachedPort is the port in status.endpoints.
const memcachedPort = 11211

// The README's conditions and reasons the scenarios expect.
const (
	available   = "Available"
	progressing = "Progressing"
	degraded    = "Degraded"
)

// wantCondition is a condition's expected status and reason.
type wantCondition struct {
	typ, status, reason string
}

// convergedConditions are the conditions of a Memcached whose Pods all run
// the spec and are ready.
func convergedConditions(size int32) []wantCondition {
	avail := wantCondition{available, "True", "EnoughPodsReady"}
	if size == 0 {
		avail = wantCondition{available, "False", "ScaledToZero"}
	}
	return []wantCondition{avail, {progressing, "False", "RolloutComplete"}, {degraded, "False", "AsExpected"}}
}

// checkConditions returns an error unless m has each condition as wanted,
// for its current generation.
func checkConditions(m *memcached, want []wantCondition) error {
	var problems []string
	for _, w := range want {
		c := m.condition(w.typ)
		switch {
		case c == nil:
			problems = append(problems, fmt.Sprintf("no %s condition, want %s/%s", w.typ, w.status, w.reason))
		case string(c.Status) != w.status || c.Reason != w.reason:
			problems = append(problems, fmt.Sprintf("%s is %s/%s (%q), want %s/%s", w.typ, c.Status, c.Reason, c.Message, w.status, w.reason))
		case c.ObservedGeneration != m.Metadata.Generation:
			problems = append(problems, fmt.Sprintf("%s has observedGeneration %d, want %d", w.typ, c.ObservedGeneration, m.Metadata.Generation))
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// observed is what a user sees of a converged Memcached.
type observed struct {
	mc         *memcached
	deployment *appsv1.Deployment
	pods       []corev1.Pod // live (not terminating), sorted by name
}

// statusConverged returns nil when the Memcached's status, alone, says it
// runs size ready Pods of the current spec (and of image, if not ""):
// status of the current generation, size nodes and endpoints, the
// converged conditions.
func statusConverged(m *memcached, size int32, image string) error {
	st := m.Status
	switch {
	case st.ObservedGeneration != m.Metadata.Generation:
		return fmt.Errorf("status.observedGeneration is %d, want the generation %d", st.ObservedGeneration, m.Metadata.Generation)
	case len(st.Nodes) != int(size) || st.Replicas != size || st.ReadyReplicas != size || len(st.Endpoints) != int(size):
		return fmt.Errorf("status has %d nodes, %d endpoints, replicas %d, readyReplicas %d; want %d of each (conditions: %s)", len(st.Nodes), len(st.Endpoints), st.Replicas, st.ReadyReplicas, size, m.conditions())
	case image != "" && st.Image != image:
		return fmt.Errorf("status.image is %q, want %q", st.Image, image)
	case !slices.IsSorted(st.Nodes):
		return fmt.Errorf("status.nodes %v is not sorted", st.Nodes)
	}
	return checkConditions(m, convergedConditions(size))
}

// converged checks, beyond statusConverged, that the Deployment and the
// Pods say the same as the status: the Deployment has rolled out size
// ready replicas of its current generation, and status.nodes and
// status.endpoints are exactly the live Pods, all Running and Ready.
func (s *scenario) converged(m *memcached, size int32, image string) (*observed, error) {
	if err := statusConverged(m, size, image); err != nil {
		return nil, err
	}
	name := m.Metadata.Name
	stdout, stderr, err := s.c.Kubectl("get", "deployment", name, "-n", s.ns, "-o", "json")
	if err != nil {
		return nil, fmt.Errorf("kubectl get deployment %s: %v: %s", name, err, stderr)
	}
	var d appsv1.Deployment
	if err := json.Unmarshal([]byte(stdout), &d); err != nil {
		return nil, err
	}
	ds := d.Status
	switch {
	case d.Spec.Replicas == nil || *d.Spec.Replicas != size:
		return nil, fmt.Errorf("deployment %s has spec.replicas %v, want %d", name, d.Spec.Replicas, size)
	case ds.ObservedGeneration != d.Generation:
		return nil, fmt.Errorf("deployment %s status is of generation %d, want %d", name, ds.ObservedGeneration, d.Generation)
	case ds.Replicas != size || ds.ReadyReplicas != size || ds.UpdatedReplicas != size || ds.AvailableReplicas != size:
		return nil, fmt.Errorf("deployment %s has replicas %d, ready %d, updated %d, available %d; want %d of each", name, ds.Replicas, ds.ReadyReplicas, ds.UpdatedReplicas, ds.AvailableReplicas, size)
	}
	if img := containerImage(d.Spec.Template.Spec); img != m.Status.Image {
		return nil, fmt.Errorf("deployment %s runs image %q, status.image says %q", name, img, m.Status.Image)
	}
	pods, err := s.livePods(m.Status.Selector)
	if err != nil {
		return nil, err
	}
	var names, endpoints []string
	for _, p := range pods {
		if !podReady(&p) {
			return nil, fmt.Errorf("pod %s is %s, not Running and Ready", p.Name, p.Status.Phase)
		}
		names = append(names, p.Name)
		endpoints = append(endpoints, net.JoinHostPort(p.Status.PodIP, strconv.Itoa(memcachedPort)))
	}
	slices.Sort(endpoints)
	if !slices.Equal(names, m.Status.Nodes) {
		return nil, fmt.Errorf("status.nodes is %v, kubectl get pods shows %v", m.Status.Nodes, names)
	}
	if !slices.Equal(endpoints, m.Status.Endpoints) {
		return nil, fmt.Errorf("status.endpoints is %v, the Pods' IPs give %v", m.Status.Endpoints, endpoints)
	}
	return &observed{mc: m, deployment: &d, pods: pods}, nil
}

// livePods returns the Pods selector selects in the namespace, less those
// being deleted, sorted by name.
func (s *scenario) livePods(selector string) ([]corev1.Pod, error) {
	if selector == "" {
		return nil, errors.New("no selector to list Pods with")
	}
	stdout, stderr, err := s.c.Kubectl("get", "pods", "-n", s.ns, "-l", selector, "-o", "json")
	if err != nil {
		return nil, fmt.Errorf("kubectl get pods -l %s: %v: %s", selector, err, stderr)
	}
	var list corev1.PodList
	if err := json.Unmarshal([]byte(stdout), &list); err != nil {
		return nil, err
	}
	var live []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	slices.SortFunc(live, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return live, nil
}

// podReady tells whether a Pod is Running with its Ready condition True.
func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// containerImage is the image of the memcached container of a Pod spec.
func containerImage(spec corev1.PodSpec) string {
	for _, c := range spec.Containers {
		if c.Name == "memcached" {
			return c.Image
		}
	}
	return ""
}

// decodeMemcached decodes a Memcached as kubectl printed it.
func decodeMemcached(b []byte) (*memcached, error) {
	var m memcached
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decoding the Memcached: %v", err)
	}
	return &m, nil
}

// waitConverged waits until what a user sees says the Memcached name runs
// size ready Pods of its current spec (and of image, if not ""), and
// returns it with the time it first did.
func (s *scenario) waitConverged(name string, size int32, image string) (*observed, time.Time) {
	s.t.Helper()
	var obs *observed
	_, at := s.waitFor("memcached", name, fmt.Sprintf("memcached %s converged to %d ready Pods", name, size), convergeTimeout, func(b []byte) error {
		m, err := decodeMemcached(b)
		if err != nil {
			return err
		}
		obs, err = s.converged(m, size, image)
		return err
	})
	return obs, at
}

// memcachedYAML is a Memcached with a spec in YAML flow style.
func memcachedYAML(name, spec string) string {
	return fmt.Sprintf("apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: %s}\nspec: %s\n", name, spec)
}

// create applies a Memcached and returns when kubectl did.
func (s *scenario) create(name, spec string) time.Time {
	s.t.Helper()
	began := time.Now()
	s.kubectlStdin(memcachedYAML(name, spec), "apply", "-f", "-")
	return began
}

// patchSpec merges a JSON patch into the Memcached's spec and returns the
// time the user ran it.
func (s *scenario) patchSpec(name, specJSON string) time.Time {
	s.t.Helper()
	began := time.Now()
	s.kubectl("patch", "memcached", name, "--type=merge", "-p", `{"spec":`+specJSON+`}`)
	return began
}

// child is one child object of a Memcached as a user lists it.
type child struct {
	UID             string
	ResourceVersion string
	// Generation moves only when the spec is written.
	Generation int64
}

// children returns the namespace's objects of every kind the
// CompositeController manages that the Memcached with uid owns, keyed
// "Kind/name", plus its ReplicaSets and Pods (which the Deployment owns).
func (s *scenario) children(uid string) map[string]child {
	s.t.Helper()
	var list struct {
		Items []metav1.PartialObjectMetadata `json:"items"`
	}
	s.getJSON(&list, strings.Join(s.childResources(s.t), ","))
	out := map[string]child{}
	deployments := map[string]bool{}
	for _, o := range list.Items {
		for _, ref := range o.OwnerReferences {
			if string(ref.UID) == uid {
				out[o.Kind+"/"+o.Name] = child{string(o.UID), o.ResourceVersion, o.Generation}
				if o.Kind == "Deployment" {
					deployments[string(o.UID)] = true
				}
			}
		}
	}
	// The Deployment's ReplicaSets, and their Pods.
	var rs struct {
		Items []metav1.PartialObjectMetadata `json:"items"`
	}
	s.getJSON(&rs, "replicasets,pods")
	owned := map[string]bool{}
	for _, kind := range []string{"ReplicaSet", "Pod"} {
		for _, o := range rs.Items {
			if o.Kind != kind {
				continue
			}
			for _, ref := range o.OwnerReferences {
				if deployments[string(ref.UID)] || owned[string(ref.UID)] {
					out[o.Kind+"/"+o.Name] = child{string(o.UID), o.ResourceVersion, o.Generation}
					owned[string(o.UID)] = true
				}
			}
		}
	}
	return out
}
