package kube

import (
	"context"
	"crypto/tls"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/test/testutil"
)

// Environment variables naming the programs Options may ask for, beside
// those of Start.
const (
	// EnvKubeControllerManager names the variable holding
	// kube-controller-manager.
	EnvKubeControllerManager = "KUBE_CONTROLLER_MANAGER_BIN"
	// EnvKubeScheduler names the variable holding kube-scheduler.
	EnvKubeScheduler = "KUBE_SCHEDULER_BIN"
	// EnvKwok names the variable holding kwok.
	EnvKwok = "KWOK_BIN"
	// EnvMetacontroller names the variable holding Metacontroller.
	EnvMetacontroller = "METACONTROLLER_BIN"
)

// Options say what Launch (and Start and Shared) run beside etcd
// and kube-apiserver. The zero value runs nothing more, which is Start.
type Options struct {
	// Setup, if set, runs once the API server is ready and before anything
	// below starts. Install every CRD here: the controller manager's garbage
	// collector learns resource types when it starts and then only every
	// 30 s (so the children of a parent whose CRD came later outlive it by
	// up to 30 s), and Metacontroller started before its CRDs takes seconds
	// to recover.
	Setup func(c *Cluster) error
	// Controllers runs kube-controller-manager and kube-scheduler: with
	// them Deployments make ReplicaSets and Pods, Pods are scheduled,
	// deleting an owner deletes its dependents, namespaces get their
	// ServiceAccount (so the ServiceAccount admission plugin stays on, as
	// in a real cluster), PodDisruptionBudgets and EndpointSlices are kept
	// up to date, and new Nodes lose their not-ready taint once Ready.
	Controllers bool
	// Nodes are fake Nodes run by kwok: Pods scheduled on them become
	// Running and Ready (with made-up IPs from 10.244.0.0/16) without
	// running anything. They need Controllers.
	Nodes []Node
	// Metacontroller runs Metacontroller with its metrics on loopback
	// (MetacontrollerMetricsURL). Setup must install its CRDs.
	Metacontroller bool
	// MetacontrollerArgs are more flags for Metacontroller (after the
	// harness's: --kubeconfig, --zap-log-level=4, its two loopback
	// addresses, --discovery-interval=2s).
	MetacontrollerArgs []string
}

// kwokStages are the Pod stages kwok runs: its default ones, but a deleted
// Pod stays Terminating until its finalizers are gone (see the file).
//
//go:embed kwok-stages.yaml
var kwokStages string

// Node is a fake Node for kwok.
type Node struct {
	// Name is the Node's name, also its kubernetes.io/hostname label.
	Name string
	// Labels are added to kubernetes.io/hostname and kubernetes.io/os.
	Labels map[string]string
	// Taints stay on the Node; the start waits until it has exactly these.
	Taints []Taint
}

// Taint is a Node taint.
type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

const (
	// kwokNodeAnnotation marks the Nodes kwok manages; kwok is told to
	// manage only those.
	kwokNodeAnnotation = "kwok.x-k8s.io/node"
	// podCIDR is where kwok takes Pod IPs from: away from serviceCIDR.
	podCIDR = "10.244.0.1/16"
	// nodeIP is every fake Node's address. Nothing connects to it.
	nodeIP = "10.255.0.1"
	// controllers are the controller manager's controllers the options
	// promise (the 1.36 names).
	controllers = "deployment-controller,replicaset-controller,garbage-collector-controller," +
		"namespace-controller,serviceaccount-controller,root-ca-certificate-publisher-controller," +
		"node-lifecycle-controller,disruption-controller,endpointslice-controller"
)

// check refuses options that cannot work together.
func (o Options) check() error {
	if len(o.Nodes) > 0 && !o.Controllers {
		return errors.New("kube: Options.Nodes needs Options.Controllers: without node-lifecycle-controller new Nodes keep their not-ready taint")
	}
	return nil
}

// portsNeeded is how many loopback ports the options' programs listen on.
func (o Options) portsNeeded() int {
	n := 0
	if o.Controllers {
		n += 2 // controller manager, scheduler
	}
	if o.Metacontroller {
		n += 2 // metrics, health probes
	}
	return n
}

// RequirePrograms skips t (fails it when CI is set) unless every program
// Start or Shared would run for opts is found, so that a test can
// check before it prepares anything else.
func RequirePrograms(t testing.TB, opts Options) {
	t.Helper()
	lookupPrograms(t, opts)
}

// extraProgramsFromEnv finds the programs opts ask for beside the API
// server, etcd and kubectl; the error is a *MissingError.
func extraProgramsFromEnv(getenv func(string) string, opts Options, p *Programs) error {
	var missing []string
	need := func(env, what string) string {
		path, problem := testutil.ProgramAt(getenv, env)
		if problem == "" {
			return path
		}
		missing = append(missing, fmt.Sprintf("kube: no %s: %s; run `make test-tools` to build it (and `make test` to set the variables)", what, problem))
		return ""
	}
	if opts.Controllers {
		p.ControllerManager = need(EnvKubeControllerManager, "kube-controller-manager")
		p.Scheduler = need(EnvKubeScheduler, "kube-scheduler")
	}
	if len(opts.Nodes) > 0 {
		p.Kwok = need(EnvKwok, "kwok")
	}
	if opts.Metacontroller {
		p.Metacontroller = need(EnvMetacontroller, "Metacontroller")
	}
	if len(missing) > 0 {
		return &MissingError{strings.Join(missing, "; ")}
	}
	return nil
}

// MetacontrollerMetricsURL returns the URL of Metacontroller's Prometheus
// metrics, http://127.0.0.1:PORT/metrics, or "" if it does not run.
func (c *Cluster) MetacontrollerMetricsURL() string { return c.metacontrollerMetrics }

// LogPath returns the file holding the output of one of the cluster's
// processes (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kwok, metacontroller), or "" if it does not run.
func (c *Cluster) LogPath(name string) string {
	for _, p := range c.processes() {
		if p != nil && p.name == name {
			return p.logPath
		}
	}
	return ""
}

// PIDs returns the process IDs of the cluster's processes by name (etcd,
// kube-apiserver, ...), for a test that checks what they listen on or
// connect to.
func (c *Cluster) PIDs() map[string]int {
	pids := map[string]int{}
	for _, p := range c.processes() {
		if p != nil && p.cmd.Process != nil {
			pids[p.name] = p.cmd.Process.Pid
		}
	}
	return pids
}

// startMore runs Setup, then starts what the options ask for beside the
// API server and waits until all of it is ready, the Nodes Ready.
func (c *Cluster) startMore(ctx context.Context, cfg Config, dir string, pki pkiFiles, ports []int) error {
	opts, progs := cfg.Options, cfg.Programs
	if opts.Setup != nil {
		if err := opts.Setup(c); err != nil {
			return fmt.Errorf("setup: %w", err)
		}
	}
	type check struct {
		p   *process
		url string
	}
	var checks []check
	start := func(name, bin string, args ...string) (*process, error) {
		p, err := startProcess(dir, name, bin, args...)
		if err == nil {
			c.clients = append(c.clients, p)
		}
		return p, err
	}
	// Every program gets the admin kubeconfig, and serves only on
	// 127.0.0.1 (they default to every interface).
	if opts.Controllers {
		// kube-controller-manager and kube-scheduler take the same flags
		// to reach the API server and to serve, and both are checked on
		// /healthz: kube-scheduler 1.30, the version the tests pin, serves
		// no /readyz (later releases add it).
		component := func(name, bin string, port int, certDir string, more ...string) error {
			p, err := start(name, bin, append([]string{
				"--kubeconfig=" + c.kubeconfig,
				"--authentication-kubeconfig=" + c.kubeconfig,
				"--authorization-kubeconfig=" + c.kubeconfig,
				// The API server has no requestheader CA: without this the
				// lookup fails and is logged every few seconds.
				"--authentication-skip-lookup",
				"--bind-address=127.0.0.1",
				"--secure-port=" + strconv.Itoa(port),
				"--cert-dir=" + filepath.Join(dir, certDir),
				"--leader-elect=false",
				"--profiling=false",
			}, more...)...)
			if err == nil {
				checks = append(checks, check{p, "https://127.0.0.1:" + strconv.Itoa(port) + "/healthz"})
			}
			return err
		}
		if err := component("kube-controller-manager", progs.ControllerManager, ports[0], "kcm-certs",
			"--controllers="+controllers, "--root-ca-file="+pki.caCert); err != nil {
			return err
		}
		if err := component("kube-scheduler", progs.Scheduler, ports[1], "scheduler-certs"); err != nil {
			return err
		}
		ports = ports[2:]
	}
	var kwok *process
	if len(opts.Nodes) > 0 {
		// The configuration brings the Pod stages (kwokStages) and no
		// KwokConfiguration: kwok v0.8.0 fills in its defaults only when
		// none is given (one read from a file gets a parallelism of 0 and
		// kwok refuses to start), and the flags below set the rest. kwok
		// still reads ~/.kwok/kwok.yaml first, where one exists.
		config := filepath.Join(dir, "kwok.yaml")
		if err := os.WriteFile(config, []byte(kwokStages), 0o600); err != nil {
			return err
		}
		var err error
		kwok, err = start("kwok", progs.Kwok,
			"--kubeconfig="+c.kubeconfig,
			"--config="+config,
			"--manage-nodes-with-annotation-selector="+kwokNodeAnnotation+"=fake",
			"--cidr="+podCIDR,
			"--node-ip="+nodeIP,
			// Without Leases (kwok alone keeps none by default) the
			// node-lifecycle-controller marks every Node unknown after
			// 50 s and their taints flap.
			"--node-lease-duration-seconds=40",
		)
		if err != nil {
			return err
		}
	}
	if opts.Metacontroller {
		metricsPort, healthPort := ports[0], ports[1]
		p, err := start("metacontroller", progs.Metacontroller, append([]string{
			"--kubeconfig=" + c.kubeconfig,
			"--zap-log-level=4",
			"--metrics-address=127.0.0.1:" + strconv.Itoa(metricsPort),
			"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(healthPort),
			// pprof stays off (its default); leader election too.
			"--discovery-interval=2s",
		}, opts.MetacontrollerArgs...)...,
		)
		if err != nil {
			return err
		}
		c.metacontrollerMetrics = "http://127.0.0.1:" + strconv.Itoa(metricsPort) + "/metrics"
		checks = append(checks, check{p, "http://127.0.0.1:" + strconv.Itoa(healthPort) + "/readyz"})
	}

	if len(checks) > 0 || kwok != nil {
		var names []string
		for _, p := range c.clients {
			names = append(names, p.name)
		}
		cfg.Logf.Printf("kube: started %s; waiting until they are ready", strings.Join(names, ", "))
	}
	deadline := time.Now().Add(readyTimeout)
	for _, ch := range checks {
		if err := c.waitHTTP(ctx, ch.p, ch.url, deadline); err != nil {
			return err
		}
	}
	if len(opts.Nodes) > 0 {
		if err := c.addNodes(ctx, opts.Nodes, kwok, deadline); err != nil {
			return err
		}
		cfg.Logf.Printf("kube: %d fake Nodes Ready", len(opts.Nodes))
	}
	return nil
}

// waitHTTP polls url until it answers 200, failing when p exits or the
// deadline passes or ctx ends. The self-signed serving certificates of the
// controller manager and the scheduler are not checked: /healthz and
// /readyz say nothing secret.
func (c *Cluster) waitHTTP(ctx context.Context, p *process, url string, deadline time.Time) error {
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	}
	defer client.CloseIdleConnections()
	last := "no answer yet"
	for {
		if err := c.Exited(); err != nil {
			return err
		}
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		var ok bool
		if ok, last = probe(client, req); ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s; last %s: %s (output in %s)", p.name, readyTimeout, url, last, p.logPath)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// Exited returns an error naming the first of the cluster's processes that
// has exited (and where its output is), or nil while all of them run. After
// Stop every one has.
func (c *Cluster) Exited() error {
	for _, p := range c.processes() {
		if p == nil {
			continue
		}
		select {
		case <-p.done:
			status := "exit status 0"
			if p.err != nil {
				status = p.err.Error()
			}
			return fmt.Errorf("%s exited (%s; output in %s)", p.name, status, p.logPath)
		default:
		}
	}
	return nil
}

// addNodes creates the fake Nodes and waits until kwok has made them Ready
// and the node-lifecycle-controller has taken away the not-ready taint
// every new Node gets, so that they carry exactly the taints asked for.
func (c *Cluster) addNodes(ctx context.Context, nodes []Node, kwok *process, deadline time.Time) error {
	var list []any
	want := map[string][]Taint{}
	for _, n := range nodes {
		labels := map[string]string{"kubernetes.io/hostname": n.Name, "kubernetes.io/os": "linux"}
		maps.Copy(labels, n.Labels)
		taints := n.Taints
		if taints == nil {
			taints = []Taint{}
		}
		want[n.Name] = taints
		list = append(list, map[string]any{
			"apiVersion": "v1",
			"kind":       "Node",
			"metadata": map[string]any{
				"name":   n.Name,
				"labels": labels,
				"annotations": map[string]string{
					kwokNodeAnnotation: "fake",
					// Pods' Secrets and ConfigMaps: no cache.
					"node.alpha.kubernetes.io/ttl": "0",
				},
			},
			"spec": map[string]any{"taints": taints},
		})
	}
	body, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": list})
	if err != nil {
		return err
	}
	if stdout, stderr, err := c.KubectlStdin(body, "apply", "-f", "-"); err != nil {
		return fmt.Errorf("creating the Nodes: %v\n%s%s", err, stdout, stderr)
	}
	last := "no answer yet"
	for {
		if err := c.Exited(); err != nil {
			return err
		}
		stdout, stderr, err := c.Kubectl("get", "nodes", "-o", "json")
		if err == nil {
			if last = nodesNotReady(stdout, want); last == "" {
				return nil
			}
		} else {
			last = fmt.Sprintf("kubectl get nodes: %v: %s", err, stderr)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("fake Nodes not ready after %s: %s (kwok's output in %s)", readyTimeout, last, kwok.logPath)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// nodeCondition is a Node condition, as far as nodesNotReady reads it.
type nodeCondition struct {
	Type   string `json:"type"`
	Status string `json:"status"`
}

// nodesNotReady says which Node is not yet Ready with exactly its taints,
// or "" when all are.
func nodesNotReady(nodeList string, want map[string][]Taint) string {
	var list struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				Taints []Taint `json:"taints"`
			} `json:"spec"`
			Status struct {
				Conditions []nodeCondition `json:"conditions"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(nodeList), &list); err != nil {
		return "decoding kubectl get nodes: " + err.Error()
	}
	seen := 0
	for _, n := range list.Items {
		wantTaints, ok := want[n.Metadata.Name]
		if !ok {
			continue
		}
		seen++
		ready := slices.ContainsFunc(n.Status.Conditions, func(c nodeCondition) bool {
			return c.Type == "Ready" && c.Status == "True"
		})
		if !ready {
			return "Node " + n.Metadata.Name + " not Ready"
		}
		key := func(t Taint) string { return t.Key + "=" + t.Value + ":" + t.Effect }
		got, wnt := make([]string, 0, len(n.Spec.Taints)), make([]string, 0, len(wantTaints))
		for _, t := range n.Spec.Taints {
			got = append(got, key(t))
		}
		for _, t := range wantTaints {
			wnt = append(wnt, key(t))
		}
		slices.Sort(got)
		slices.Sort(wnt)
		if !slices.Equal(got, wnt) {
			return fmt.Sprintf("Node %s has taints [%s], want [%s]", n.Metadata.Name, strings.Join(got, " "), strings.Join(wnt, " "))
		}
	}
	if seen < len(want) {
		return fmt.Sprintf("%d of %d Nodes exist", seen, len(want))
	}
	return ""
}
