// Package playground brings the operator up as a user installs it, on a
// throw-away control plane on 127.0.0.1 (test/kube): the hook built from
// this checkout and started on loopback, Metacontroller's CRDs, a stand-in
// ServiceMonitor CRD, manifests/ applied with kubectl apply -k through an
// overlay that only points the CompositeController's hooks at the loopback
// hook, then kube-controller-manager, kube-scheduler, three fake Nodes
// (kwok) and the real Metacontroller.
//
// The end-to-end suite (test/e2e) and the local playground (make up, the
// command in cmd/playground) both start the system with it, so the
// playground runs exactly what the suite proves. See README.md for what the
// playground does not do.
//
// Two ways in: Start starts all of it (the playground); Prepare and Check
// around a launch of the caller's own (the suite, whose cluster is
// kube.Shared's):
//
//	s, opts, err := playground.Prepare(ctx, cfg)   // the hook builds meanwhile
//	s.Cluster = kube.Shared(t, opts)               // opts.Setup installs
//	err = s.Check()
//	...
//	err = s.StopHook()
package playground

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/example/memcached-operator/test/kube"
	"github.com/example/memcached-operator/test/testutil"
)

// DirEnv is set, to make up's state directory, in the environment of
// every process make up starts (they inherit it from its supervisor): how
// make down, and the test that runs the README's commands, find them all
// in /proc.
const DirEnv = "MEMCACHED_PLAYGROUND_DIR"

// Nodes are the fake Nodes: three zones, every Node a cache Node for the
// placement example, and fake-2 reserved for Pods that tolerate
// dedicated=cache (the placement example's hard zone spread can only be met
// by putting one of its Pods there).
var Nodes = []kube.Node{
	{Name: "fake-0", Labels: nodeLabels("zone-a", "m7i.large")},
	{Name: "fake-1", Labels: nodeLabels("zone-b", "m7i.xlarge")},
	{Name: "fake-2", Labels: nodeLabels("zone-c", "m7i.large"),
		Taints: []kube.Taint{{Key: "dedicated", Value: "cache", Effect: "NoSchedule"}}},
}

// nodeLabels are the labels a cloud Node of the placement example's kind
// would carry.
func nodeLabels(zone, instanceType string) map[string]string {
	return map[string]string{
		"topology.kubernetes.io/region":    "e2e",
		"topology.kubernetes.io/zone":      zone,
		"node.kubernetes.io/instance-type": instanceType,
		"node-role.example.com/cache":      "true",
	}
}

// Options are the control plane's, but for Setup (which Prepare adds).
var Options = kube.Options{
	Controllers:    true,
	Nodes:          Nodes,
	Metacontroller: true,
	// Metacontroller's API client allows 5 requests a second (burst 10)
	// by default. The end-to-end scenarios create Memcacheds at once, and
	// at that rate the figures measured Metacontroller's throttle (create
	// to ready 15 s instead of 3 s), not the operator.
	MetacontrollerArgs: []string{"--client-go-qps=50", "--client-go-burst=100"},
}

// Config says where the system comes from and where its files go.
type Config struct {
	// Root is the repository's root: the hook is built from it and its
	// manifests/ installed.
	Root string
	// Dir holds the hook's binary and output (hook.log) and the install
	// overlays (install/). It is made if missing.
	Dir string
	// Race builds the hook with the race detector.
	Race bool
	// Logf, if set, is told of progress.
	Logf testutil.Logf
}

// System is the operator running on a control plane.
type System struct {
	// Cluster is the control plane: set by Start, or by the caller of
	// Prepare once it has launched the cluster.
	Cluster *kube.Cluster
	// Hook is the hook; it runs once the cluster's Setup has returned.
	Hook *Hook

	cfg      Config
	cancel   context.CancelFunc // ends a build or start of the hook still going
	hookDone chan struct{}      // closed when the hook's build and start ended
	hookErr  error              // their error, valid after hookDone
}

// Prepare builds the hook and starts it on 127.0.0.1:0 in the background,
// and returns the options to launch the cluster with: Options, with a
// Setup that waits for the hook and installs the operator (Install) before
// the controllers start (their discovery would miss CRDs made later). Once
// the cluster runs, set s.Cluster and call Check. StopHook stops the hook,
// or the build or start still going, however far the launch got.
func Prepare(ctx context.Context, cfg Config) (*System, kube.Options, error) {
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, kube.Options{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &System{
		Hook:     NewHook("", filepath.Join(cfg.Dir, "hook.log")),
		cfg:      cfg,
		cancel:   cancel,
		hookDone: make(chan struct{}),
	}
	go func() {
		defer close(s.hookDone)
		cfg.Logf.Printf("playground: building the hook from %s", cfg.Root)
		bin, err := BuildHook(ctx, cfg.Root, cfg.Dir, cfg.Race)
		if err == nil {
			s.Hook.bin = bin
			err = s.Hook.Start("127.0.0.1:0")
		}
		if err == nil {
			cfg.Logf.Printf("playground: hook listening on %s (output in %s)", s.Hook.URL(), s.Hook.LogPath())
		}
		s.hookErr = err
	}()
	opts := Options
	opts.Setup = func(c *kube.Cluster) error {
		select {
		case <-s.hookDone:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		if s.hookErr != nil {
			return fmt.Errorf("the hook: %w", s.hookErr)
		}
		cfg.Logf.Printf("playground: installing Metacontroller's CRDs, a ServiceMonitor CRD and %s/ with the hooks on %s", Manifests, s.Hook.URL())
		return Install(c, cfg.Root, s.Hook.URL(), cfg.Dir)
	}
	return s, opts, nil
}

// Check fails unless the installed CompositeController calls the loopback
// hook (CheckHookURLs).
func (s *System) Check() error {
	return CheckHookURLs(s.Cluster, s.Hook.URL())
}

// Start starts the whole system, with the cluster's files under
// clusterDir, and returns once it is ready: Prepare, kube.Launch and Check.
// On error it has stopped everything it started; the System it returns
// then, if not nil, tells where the output is.
func Start(ctx context.Context, cfg Config, programs kube.Programs, clusterDir string) (*System, error) {
	s, opts, err := Prepare(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s.Cluster, err = kube.Launch(ctx, kube.Config{Dir: clusterDir, Programs: programs, Options: opts, Logf: cfg.Logf})
	if err == nil {
		err = s.Check()
	}
	if err != nil {
		if stopErr := s.Stop(); stopErr != nil {
			err = fmt.Errorf("%w; stopping: %v", err, stopErr)
		}
		return s, err
	}
	return s, nil
}

// StopHook stops the hook (ending its build or start if still going) and
// waits until it has exited. It returns an error if the race-built hook
// reported a data race.
func (s *System) StopHook() error {
	s.cancel()
	<-s.hookDone
	return s.Hook.Stop()
}

// Stop stops the hook, then the cluster (its clients, then the API server,
// then etcd), and returns once every process has exited.
func (s *System) Stop() error {
	err := s.StopHook()
	if s.Cluster != nil {
		s.Cluster.Stop()
	}
	return err
}

// PIDs returns the process IDs of every process of the system by name: the
// cluster's (etcd, kube-apiserver, ...) and memcached-hook.
func (s *System) PIDs() map[string]int {
	pids := map[string]int{}
	if s.Cluster != nil {
		pids = s.Cluster.PIDs()
	}
	if pid := s.Hook.PID(); pid != 0 {
		pids["memcached-hook"] = pid
	}
	return pids
}

// Exited returns an error naming a process of the system that has exited,
// or nil while all of them run.
func (s *System) Exited() error {
	if s.Cluster != nil {
		if err := s.Cluster.Exited(); err != nil {
			return err
		}
	}
	if !s.Hook.Running() {
		return fmt.Errorf("memcached-hook exited (output in %s)", s.Hook.LogPath())
	}
	return nil
}
