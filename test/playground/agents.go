package playground

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/test/kube"
	"github.com/example/memcached-operator/test/testutil"
)

// Agents runs, on loopback, the agent of every Memcached that asks for
// the configuration endpoint (spec.discovery.enabled), as the agent
// Deployment's Pods would run in a cluster (here they are kwok's, and run
// nothing): memcached-agent built from this checkout, following its
// Memcached through the API server as the ServiceAccount the hook made for
// it (a token of that account), so with exactly the RBAC the hook gave it.
// Each agent's address is in Dir/<namespace>/<name>.
type Agents struct {
	// Root is the repository, Dir where the binary, the kubeconfigs, the
	// logs and the addresses go.
	Root, Dir string
	Logf      testutil.Logf

	mu      sync.Mutex
	bin     string
	running map[string]*agentProcess // by namespace/name
}

type agentProcess struct {
	cmd  *exec.Cmd
	done <-chan struct{}
}

// BuildAgent builds cmd/memcached-agent of the repository at root into dir.
func BuildAgent(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "memcached-agent")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/memcached-agent")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/memcached-agent in %s: %v\n%s", root, err, out)
	}
	return bin, nil
}

// Sync starts the agents the cluster's Memcacheds ask for and stops those
// no Memcached asks for any more. A Memcached whose ServiceAccount the
// hook has not made yet is left for a later Sync.
func (a *Agents) Sync(ctx context.Context, c *kube.Cluster) error {
	out, stderr, err := c.Kubectl("get", "memcached", "--all-namespaces", "-o", "json")
	if err != nil {
		return fmt.Errorf("kubectl get memcached: %v: %s", err, stderr)
	}
	var list struct {
		Items []struct {
			Metadata struct{ Name, Namespace string } `json:"metadata"`
			Spec     struct {
				Discovery struct {
					Enabled bool `json:"enabled"`
				} `json:"discovery"`
			} `json:"spec"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return err
	}
	want := map[string]bool{}
	for _, m := range list.Items {
		if m.Spec.Discovery.Enabled {
			want[m.Metadata.Namespace+"/"+m.Metadata.Name] = true
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.running == nil {
		a.running = map[string]*agentProcess{}
	}
	for key, p := range a.running {
		select {
		case <-p.done:
			delete(a.running, key) // exited: started again below
		default:
			if !want[key] {
				a.stop(key)
			}
		}
	}
	for _, key := range slices.Sorted(maps.Keys(want)) {
		if _, ok := a.running[key]; ok {
			continue
		}
		ns, name, _ := strings.Cut(key, "/")
		if err := a.start(ctx, c, ns, name); err != nil {
			a.Logf.Printf("agent of %s: %v (trying again)", key, err)
		}
	}
	return nil
}

// start starts the agent of Memcached ns/name.
func (a *Agents) start(ctx context.Context, c *kube.Cluster, ns, name string) error {
	if _, _, err := c.Kubectl("get", "serviceaccount", name+"-agent", "-n", ns); err != nil {
		return fmt.Errorf("its ServiceAccount %s-agent does not exist yet", name)
	}
	if a.bin == "" {
		bin, err := BuildAgent(ctx, a.Root, a.Dir)
		if err != nil {
			return err
		}
		a.bin = bin
	}
	token, stderr, err := c.Kubectl("create", "token", name+"-agent", "-n", ns, "--duration=24h")
	if err != nil {
		return fmt.Errorf("kubectl create token: %v: %s", err, stderr)
	}
	kubeconfig, err := TokenKubeconfig(c.Kubeconfig(), strings.TrimSpace(token), ns)
	if err != nil {
		return err
	}
	dir := filepath.Join(a.Dir, ns)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	kcPath := filepath.Join(dir, name+".kubeconfig")
	if err := os.WriteFile(kcPath, kubeconfig, 0o600); err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(a.bin, "--kubeconfig="+kcPath, "--memcached="+name, "--namespace="+ns,
		"--listen=127.0.0.1:0", "--admin-listen=127.0.0.1:0", "--shutdown-delay=0")
	addrPath := filepath.Join(dir, name)
	listening := make(chan string, 1)
	done, err := startLogged(cmd, logFile, func(line []byte) {
		var l struct {
			Msg     string `json:"msg"`
			Address string `json:"address"`
		}
		if json.Unmarshal(line, &l) == nil && l.Msg == "listening" {
			listening <- l.Address
		}
	}, func() { os.Remove(addrPath) })
	if err != nil {
		return err
	}
	p := &agentProcess{cmd: cmd, done: done}
	select {
	case addr := <-listening:
		if err := os.WriteFile(addrPath, []byte(addr+"\n"), 0o600); err != nil {
			return err
		}
		a.running[ns+"/"+name] = p
		a.Logf.Printf("agent of %s/%s: the configuration endpoint is %s (in %s; log %s.log)", ns, name, addr, addrPath, addrPath)
		return nil
	case <-p.done:
		return fmt.Errorf("it exited at once (log %s.log)", addrPath)
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("it did not listen within 30s (log %s.log)", addrPath)
	}
}

// stop stops the agent of key and waits. The caller holds a.mu.
func (a *Agents) stop(key string) {
	p := a.running[key]
	delete(a.running, key)
	testutil.Stop(p.cmd, p.done, syscall.SIGTERM, 15*time.Second)
}

// Stop stops every agent.
func (a *Agents) Stop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for key := range a.running {
		a.stop(key)
	}
}

// PIDs returns the running agents' process IDs, by "memcached-agent ns/name".
func (a *Agents) PIDs() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	pids := map[string]int{}
	for key, p := range a.running {
		pids["memcached-agent "+key] = p.cmd.Process.Pid
	}
	return pids
}

// TokenKubeconfig is the admin kubeconfig at path with its user's
// credentials replaced by token and its namespace set to ns.
func TokenKubeconfig(path, token, ns string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return nil, err
	}
	users, _ := cfg["users"].([]any)
	ctxs, _ := cfg["contexts"].([]any)
	if len(users) != 1 || len(ctxs) != 1 {
		return nil, fmt.Errorf("%s: want one user and one context", path)
	}
	name := users[0].(map[string]any)["name"]
	cfg["users"] = []any{map[string]any{"name": name, "user": map[string]any{"token": token}}}
	ctxs[0].(map[string]any)["context"].(map[string]any)["namespace"] = ns
	return yaml.Marshal(cfg)
}
