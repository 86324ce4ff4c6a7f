package memcached

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/metacontroller"
)

// A feature is one thing a Memcached can ask for, in one file: the child
// kinds it needs, the children it adds, and what it changes in the memcached
// Pod template and in the agent's. desiredChildren walks features in their
// order, which is the order of the children in the answer and of the
// containers in the Pods: a new feature is a file with a type embedding
// noFeature, and one entry in features.
//
// A feature implements only the methods it needs; noFeature answers the
// others. So a method whose name is misspelt would compile and never be
// called: TestFeatureMethods fails on any method of a feature that the
// interface does not have, and on a feature that implements none.
//
// Zones are not a feature but the shape of the plan: a Memcached is one or
// more cells (plan.go), copies of the cache, and the features whose
// children are per copy (pods, proxy) make them for each of d.cells; a
// Memcached without zones is the one cell "".
//
// The memcached Pods' own children (kinds) are each made when the
// CompositeController manages their kind. The agent's and the proxy's
// (agentKinds) come all or none: an agent without its Role could not read
// its Memcached.
type feature interface {
	// kinds are the child kinds the feature's children need beside the
	// memcached Pods, for this spec.
	kinds(s *v1alpha1.MemcachedSpec) []string
	// agentKinds are the kinds its children in the agent's and the proxy's
	// tier need, for this spec.
	agentKinds(s *v1alpha1.MemcachedSpec) []string
	// args are memcached's arguments for the feature (see Args).
	args(s *v1alpha1.MemcachedSpec) []string
	// pod changes the memcached Pod template.
	pod(s *v1alpha1.MemcachedSpec, t *corev1.PodTemplateSpec)
	// children are the children it adds.
	children(d *desire) []any
	// agentRules are what it lets the agent do beside reading its
	// Memcached.
	agentRules(d *desire) []rbacv1.PolicyRule
	// agentPod changes the agent Deployment's Pod template.
	agentPod(s *v1alpha1.MemcachedSpec, t *corev1.PodTemplateSpec)
	// besideAgent are the children made with the agent Deployment, and
	// only with it.
	besideAgent(d *desire) []any
	// report fills the feature's fields of the status.
	report(pl *plan, st *v1alpha1.MemcachedStatus)
}

// features are every feature, in the order desiredChildren walks them.
// The order is part of the hook's answer, and changing it is a change of
// behaviour:
//
//   - it is the order of the children in the answer, of the containers,
//     volumes and arguments in the Pod templates (Args) and of the rules in
//     the agent's Role: another order is another template, which rolls
//     every memcached Pod (and another golden answer);
//   - pod builds on what the features before it made: pods{} writes the
//     template's base (memcached's container, its preStop sleep and grace
//     period), which the others change, and handoff{} replaces that
//     preStop and grace period with keepWarm's;
//   - agent{} builds the agent's Role and Deployment from every feature's
//     agentRules, agentPod and besideAgent, and the features above it are
//     those that give the agent something to do; proxy{} runs its own
//     agents, beside the proxies, and comes last.
var features = []feature{
	pods{},          // pods.go: the memcached Deployment, its Service and PodDisruptionBudget
	extstore{},      // extstore.go: values on a disk of the Pod's own
	metrics{},       // metrics.go: the exporter sidecar and the ServiceMonitor
	security{},      // security.go: TLS and authentication
	networkPolicy{}, // networkpolicy.go: who may reach the Pods
	discovery{},     // discovery.go: the configuration endpoint, which the agent serves
	stableNames{},   // stablenames.go: a DNS name per slot, NAME-0.NAME-slots
	handoff{},       // handoff.go: keepWarm, leaving Pods hand their items on through the agent
	agent{},         // agent.go: the agent's identity and Deployment, for the features above
	proxy{},         // proxy.go: the proxy tier, an agent beside each proxy
}

// noFeature is a feature that does nothing: a feature embeds it and
// implements what it does.
type noFeature struct{}

func (noFeature) kinds(*v1alpha1.MemcachedSpec) []string                    { return nil }
func (noFeature) agentKinds(*v1alpha1.MemcachedSpec) []string               { return nil }
func (noFeature) args(*v1alpha1.MemcachedSpec) []string                     { return nil }
func (noFeature) pod(*v1alpha1.MemcachedSpec, *corev1.PodTemplateSpec)      {}
func (noFeature) children(*desire) []any                                    { return nil }
func (noFeature) agentRules(*desire) []rbacv1.PolicyRule                    { return nil }
func (noFeature) agentPod(*v1alpha1.MemcachedSpec, *corev1.PodTemplateSpec) {}
func (noFeature) besideAgent(*desire) []any                                 { return nil }
func (noFeature) report(*plan, *v1alpha1.MemcachedStatus)                   {}

// desire is what the features build their children from: a valid spec
// with its defaults, and what the request says the CompositeController
// manages and has observed.
type desire struct {
	p        *metacontroller.Parent
	s        *v1alpha1.MemcachedSpec
	opts     Options
	managed  map[string]bool
	observed map[string]map[string]metacontroller.Child
	// pod is the memcached Pod template, as every feature's pod made it.
	pod corev1.PodTemplateSpec
	// cells are the copies of the cache this sync decided (plan.go): the
	// one cell "" without zones. Stable names follow the first one's
	// table, the only one (validation refuses them with zones).
	cells []cell
}

// desiredChildren builds every child the spec calls for, of the kinds the
// CompositeController manages, in a fixed order: each feature's, in the
// order of features.
func desiredChildren(p *metacontroller.Parent, s *v1alpha1.MemcachedSpec, managed map[string]bool, opts Options, observed map[string]map[string]metacontroller.Child, cells []cell) []any {
	d := &desire{p: p, s: s, opts: opts, managed: managed, observed: observed, pod: memcachedPod(s), cells: cells}
	var children []any
	for _, f := range features {
		children = append(children, f.children(d)...)
	}
	return children
}

// memcachedPod is the memcached Pods' template: each feature's part of it,
// in the order of features.
func memcachedPod(s *v1alpha1.MemcachedSpec) corev1.PodTemplateSpec {
	var t corev1.PodTemplateSpec
	for _, f := range features {
		f.pod(s, &t)
	}
	return t
}

// neededKinds are the child kinds a spec's agent and proxy need the
// CompositeController to manage, sorted.
func neededKinds(s *v1alpha1.MemcachedSpec) []string {
	var kinds []string
	for _, f := range features {
		kinds = append(kinds, f.agentKinds(s)...)
	}
	slices.Sort(kinds)
	return slices.Compact(kinds)
}

// podKindOrder is the order in which Degraded names the missing kinds of
// the memcached Pods' children; the agent's follow, sorted.
var podKindOrder = []string{ServiceKey, NetworkPolicyKey, PDBKey, ServiceMonitorKey}

// missingKinds names the child kinds the spec needs that the
// CompositeController does not manage, so the hook could not make them.
func missingKinds(s *v1alpha1.MemcachedSpec, obs observed) []string {
	var need []string
	for _, f := range features {
		need = append(need, f.kinds(s)...)
	}
	slices.SortStableFunc(need, func(a, b string) int {
		rank := func(k string) int {
			if i := slices.Index(podKindOrder, k); i >= 0 {
				return i
			}
			return len(podKindOrder)
		}
		return rank(a) - rank(b)
	})
	need = append(need, neededKinds(s)...)
	var missing []string
	for _, k := range need {
		if !obs.managed[k] && !slices.Contains(missing, k) {
			missing = append(missing, k)
		}
	}
	return missing
}

func managesAll(managed map[string]bool, kinds []string) bool {
	for _, k := range kinds {
		if !managed[k] {
			return false
		}
	}
	return true
}
