package dataplane

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/sync/metacontroller"
	"github.com/example/memcached-operator/test/testutil"
)

// Pod is a memcached Pod as the hook sees it.
type Pod struct {
	Name string
	IP   string
	// Zone is the zone it runs in (its v1alpha1.LabelZone label), for a
	// Memcached with zones; "" for one without.
	Zone string
	// Ready is its Ready condition; Leaving, that it is terminating.
	Ready, Leaving bool
}

// Cluster is a Memcached and its Pods, with the status the hook's own
// logic answers for them: Sync runs memcached.Sync on the request
// Metacontroller would send, the previous status included, as a real sync
// does. The agent follows what WriteFile writes (--from-file).
type Cluster struct {
	Name, Namespace string
	// Spec is the Memcached's spec, as JSON.
	Spec string
	Pods []Pod
	// Proxies are the proxy tier's Pods (with a Zone, that zone's), as
	// the customize hook has Metacontroller send them: the hook counts
	// what each one's agent reported its proxy loaded. A proxy's Pod
	// name is its agent's (Agent.Name).
	Proxies []Pod
	// Children are more observed children, as objects (the agent's
	// ConfigMap with its reports, say).
	Children []any
	// MaxResync, when set, is the longest resyncAfterSeconds Sync follows
	// on its clock: the slot table's waits for events to settle, not a
	// make-before-break bound (sync/slots.Fill: tens of seconds), which
	// followed at once would end the fill in the Sync that began it. A
	// test that sets it syncs again itself, each Sync as long after the
	// last as it really is (not a second later): the bound then passes in
	// real time, however often the test syncs.
	MaxResync time.Duration
	// synced is when the last Sync began, in real time.
	synced time.Time

	status v1alpha1.MemcachedStatus
	// children are the last Sync's answered children.
	children []any
	now      time.Time
	// times are what the API server records of each Pod's changes, as
	// the Syncs that saw them happen: the slot table orders its decisions
	// by them.
	times map[string]*podTimes
}

// podTimes are a Pod's timestamps: when it was made, when its Ready
// condition last changed (and to what), when its deletion was asked.
type podTimes struct {
	created, readySince, leavingSince time.Time
	ready                             bool
}

// Status is the status the last Sync answered.
func (c *Cluster) Status() v1alpha1.MemcachedStatus { return c.status }

// SetStatus replaces the status the next Sync starts from (to wipe it, as
// a restore from a backup without status does).
func (c *Cluster) SetStatus(s v1alpha1.MemcachedStatus) { c.status = s }

// Sync answers a sync for the Cluster as it is now, a second later than
// the last (with MaxResync, as long after it as really passed), and keeps
// the status. When the hook asks to be called again
// (resyncAfterSeconds: the slot table waits for the Pods' events to
// settle), Sync does so then, as Metacontroller would, so that the status
// it returns has taken in every change made before the call.
func (c *Cluster) Sync(t testing.TB) v1alpha1.MemcachedStatus {
	t.Helper()
	switch {
	case c.now.IsZero():
		c.now = time.Now().Truncate(time.Second).Add(time.Second)
	case c.MaxResync > 0:
		// As long after the last as it really is: a test that syncs
		// every 20 ms must not run a fill's bound out in a second.
		c.now = c.now.Add(max(time.Since(c.synced), time.Millisecond))
	default:
		c.now = c.now.Add(time.Second)
	}
	c.synced = time.Now()
	for range 5 {
		resync := c.syncOnce(t)
		if resync == 0 || (c.MaxResync > 0 && resync > c.MaxResync) {
			break
		}
		c.now = c.now.Add(resync)
	}
	return c.status
}

// syncOnce answers one sync at c.now and says when the hook asked to be
// called again (0: not).
func (c *Cluster) syncOnce(t testing.TB) time.Duration {
	t.Helper()
	if c.times == nil {
		c.times = map[string]*podTimes{}
	}
	stamp := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	pods := map[string]any{}
	for _, p := range c.Proxies {
		labels := memcached.ProxySelectorLabels(c.Name)
		if p.Zone != "" {
			labels[v1alpha1.LabelZone] = p.Zone
		}
		ready := "False"
		if p.Ready {
			ready = "True"
		}
		pods[c.Namespace+"/"+p.Name] = map[string]any{
			"metadata": map[string]any{"name": p.Name, "namespace": c.Namespace, "labels": labels, "creationTimestamp": stamp(c.now)},
			"status": map[string]any{
				"phase":      "Running",
				"podIP":      p.IP,
				"conditions": []any{map[string]any{"type": "Ready", "status": ready, "lastTransitionTime": stamp(c.now)}},
			},
		}
	}
	for _, p := range c.Pods {
		at := c.times[p.Name]
		if at == nil {
			at = &podTimes{created: c.now, readySince: c.now}
			c.times[p.Name] = at
		}
		if p.Ready != at.ready {
			at.ready, at.readySince = p.Ready, c.now
		}
		if p.Leaving && at.leavingSince.IsZero() {
			at.leavingSince = c.now
		}
		labels := memcached.SelectorLabels(c.Name)
		if p.Zone != "" {
			labels = memcached.ZoneSelectorLabels(c.Name, p.Zone)
		}
		meta := map[string]any{
			"name":              p.Name,
			"namespace":         c.Namespace,
			"labels":            labels,
			"creationTimestamp": stamp(at.created),
		}
		if p.Leaving {
			meta["deletionTimestamp"] = stamp(at.leavingSince)
		}
		ready := "False"
		if p.Ready {
			ready = "True"
		}
		pods[c.Namespace+"/"+p.Name] = map[string]any{
			"metadata": meta,
			"status": map[string]any{
				"phase":      "Running",
				"podIP":      p.IP,
				"conditions": []any{map[string]any{"type": "Ready", "status": ready, "lastTransitionTime": stamp(at.readySince)}},
			},
		}
	}
	children := map[string]map[string]any{}
	for _, k := range testutil.ManagedKinds {
		children[k] = map[string]any{}
	}
	for _, o := range c.Children {
		obj := testutil.DecodeObject(t, testutil.MustMarshal(t, o))
		key := testutil.GetString(obj, "kind") + "." + testutil.GetString(obj, "apiVersion")
		children[key][c.Namespace+"/"+testutil.GetString(obj, "metadata", "name")] = obj
	}
	body := testutil.MustMarshal(t, map[string]any{
		"controller": map[string]any{},
		"parent":     c.object(t),
		"children":   children,
		"related":    map[string]any{metacontroller.PodKey: pods},
	})
	req, err := metacontroller.DecodeSyncRequest(body)
	if err != nil {
		t.Fatalf("dataplane: decoding the sync request: %v", err)
	}
	a, err := memcached.Sync(req, c.now, memcached.Options{AgentImage: "memcached-hook:test"})
	if err != nil {
		t.Fatalf("dataplane: the hook: %v", err)
	}
	c.status = *a.Response.Status
	c.children = a.Response.Children
	return time.Duration(a.Response.ResyncAfterSeconds * float64(time.Second))
}

// object is the Memcached as the API server would hold it.
func (c *Cluster) object(t testing.TB) map[string]any {
	t.Helper()
	spec := c.Spec
	if spec == "" {
		spec = "{}"
	}
	return map[string]any{
		"apiVersion": v1alpha1.APIVersion,
		"kind":       v1alpha1.Kind,
		"metadata": map[string]any{
			"name":       c.Name,
			"namespace":  c.Namespace,
			"uid":        "6d1c2f0e-0000-4000-8000-000000000018",
			"generation": 1,
		},
		"spec":   json.RawMessage(spec),
		"status": c.status,
	}
}

// WriteFile writes the Memcached, with the last status, as `kubectl get
// -o json` prints it, atomically (a temporary file renamed into place), as
// a user rendering the status for --from-file would.
func (c *Cluster) WriteFile(t testing.TB, path string) {
	t.Helper()
	b, err := json.MarshalIndent(c.object(t), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// Answered returns the last Sync's answered child of kind and name, as
// JSON, if it answered one.
func (c *Cluster) Answered(t testing.TB, kind, name string) ([]byte, bool) {
	t.Helper()
	for _, o := range c.children {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if json.Unmarshal(b, &meta) == nil && meta.Kind == kind && meta.Metadata.Name == name {
			return b, true
		}
	}
	return nil, false
}

// AgentArgs are the arguments the hook gives the agent container of the
// agent Deployment (NAME-agent), for a test to start the agent with the
// settings the hook chose (--handoff-settle, say).
func (c *Cluster) AgentArgs(t testing.TB) []string {
	t.Helper()
	var d appsv1.Deployment
	if err := json.Unmarshal(c.child(t, "Deployment", c.Name+"-agent"), &d); err != nil {
		t.Fatalf("dataplane: the agent Deployment: %v", err)
	}
	for _, ctr := range d.Spec.Template.Spec.Containers {
		if ctr.Name == "agent" {
			return ctr.Args
		}
	}
	t.Fatalf("dataplane: the agent Deployment has no agent container")
	return nil
}

// Set changes the named Pod.
func (c *Cluster) Set(t testing.TB, name string, change func(p *Pod)) {
	t.Helper()
	for i := range c.Pods {
		if c.Pods[i].Name == name {
			change(&c.Pods[i])
			return
		}
	}
	t.Fatalf("dataplane: no Pod %s", name)
}

// Remove deletes the named Pod, as once it is gone.
func (c *Cluster) Remove(name string) {
	delete(c.times, name)
	for i := range c.Pods {
		if c.Pods[i].Name == name {
			c.Pods = append(c.Pods[:i], c.Pods[i+1:]...)
			return
		}
	}
}
