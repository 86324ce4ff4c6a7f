package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/example/memcached-operator/test/testutil"
)

// Polling and waiting. Waits follow kubectl get --watch and re-check at
// least every recheck; their timeouts are generous, for a loaded CI
// machine: only a broken operator needs them.
const (
	recheck         = time.Second
	refetchEvery    = 5 // rechecks
	pollInterval    = 250 * time.Millisecond
	convergeTimeout = 2 * time.Minute
)

// scenario is one scenario's view of the system: its own namespace, and
// kubectl as a user there would run it.
type scenario struct {
	*env
	t  *testing.T
	ns string
}

// notDNS matches what a namespace name may not hold.
var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// newScenario creates a namespace for t, which enforces the restricted Pod
// Security Standard (as the README says the operator's Pods meet), and
// waits until its default ServiceAccount exists (the ServiceAccount
// admission plugin refuses Pods before). When t fails it prints what a
// user would look at: the namespace's objects and events, the hook's calls
// for it and Metacontroller's log lines naming it.
func (e *env) newScenario(t *testing.T, name string) *scenario {
	t.Helper()
	ns := notDNS.ReplaceAllString(strings.ToLower(name), "-")
	ns = "e2e-" + strings.Trim(ns[:min(len(ns), 55)], "-")
	if e.run > 1 {
		ns += fmt.Sprintf("-%d", e.run)
	}
	s := &scenario{env: e, t: t, ns: ns}
	e.kubectl(t, nil, "create", "namespace", ns)
	e.kubectl(t, nil, "label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted")
	s.poll("the namespace's default ServiceAccount", 30*time.Second, func() error {
		_, stderr, err := e.c.Kubectl("get", "serviceaccount", "default", "-n", ns)
		if err != nil {
			return fmt.Errorf("%v: %s", err, stderr)
		}
		return nil
	})
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, args := range [][]string{
			{"get", "memcached,deployments,replicasets,pods,services,poddisruptionbudgets", "-o", "wide"},
			{"get", "memcached", "-o", "yaml"},
			{"get", "events", "--sort-by=.lastTimestamp"},
		} {
			stdout, stderr, _ := e.c.Kubectl(append(args, "-n", ns)...)
			t.Logf("kubectl %s -n %s:\n%s%s", strings.Join(args, " "), ns, stdout, stderr)
		}
		t.Logf("hook calls for namespace %s (%s):\n%s", ns, e.hook.LogPath(), e.hook.LogLinesFor(ns))
		t.Logf("Metacontroller's log lines naming %s (%s):\n%s", ns, e.c.LogPath("metacontroller"), grepTail(e.c.LogPath("metacontroller"), ns, 60))
	})
	return s
}

// grepTail returns the last n lines of a file that contain s.
func grepTail(path, s string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			lines = append(lines, sc.Text())
			if len(lines) > n {
				lines = lines[1:]
			}
		}
	}
	return strings.Join(lines, "\n")
}

// kubectl runs kubectl against the cluster, failing t if it fails.
func (e *env) kubectl(t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	stdout, stderr, err := e.c.KubectlStdin(stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, stdout, stderr)
	}
	return stdout
}

// kubectl runs kubectl in the scenario's namespace, failing the test if it
// fails.
func (s *scenario) kubectl(args ...string) string {
	s.t.Helper()
	return s.env.kubectl(s.t, nil, append(args, "-n", s.ns)...)
}

// kubectlStdin is kubectl with stdin.
func (s *scenario) kubectlStdin(stdin string, args ...string) string {
	s.t.Helper()
	return s.env.kubectl(s.t, []byte(stdin), append(args, "-n", s.ns)...)
}

// getJSON runs kubectl get -o json in the namespace and decodes it.
func (s *scenario) getJSON(into any, args ...string) {
	s.t.Helper()
	out := s.kubectl(append([]string{"get"}, append(args, "-o", "json")...)...)
	if err := json.Unmarshal([]byte(out), into); err != nil {
		s.t.Fatalf("decoding kubectl get %s: %v\n%.2000s", strings.Join(args, " "), err, out)
	}
}

// poll calls check every pollInterval until it passes, failing the test
// with check's last error after timeout (testutil.Eventually).
func (s *scenario) poll(what string, timeout time.Duration, check func() error) {
	s.t.Helper()
	testutil.EventuallyEvery(s.t, timeout, pollInterval, func() error {
		if err := check(); err != nil {
			return fmt.Errorf("%s: still not so: %w", what, err)
		}
		return nil
	})
}

// watchEvent is one line of kubectl get --watch --output-watch-events.
type watchEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// watch runs kubectl get --watch --output-watch-events in the namespace
// with args (a resource and a name, or -l SELECTOR) and sends what it
// prints: first the objects as they are (ADDED), then every change. The
// channel closes when kubectl exits; stop ends it and returns what kubectl
// wrote to its standard error.
func (s *scenario) watch(args ...string) (events <-chan watchEvent, stop func() string) {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	full := append([]string{"get"}, args...)
	full = append(full, "-n", s.ns, "-o", "json", "--watch", "--output-watch-events")
	cmd := s.c.KubectlCommand(ctx, full...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		s.t.Fatalf("kubectl %s: %v", strings.Join(full, " "), err)
	}
	ch := make(chan watchEvent, 64)
	var wg sync.WaitGroup
	var decodeErr error
	wg.Go(func() {
		defer close(ch)
		dec := json.NewDecoder(stdout)
		for {
			var ev watchEvent
			if err := dec.Decode(&ev); err != nil {
				if err != io.EOF {
					decodeErr = err
				}
				return
			}
			select {
			case ch <- ev:
			case <-ctx.Done():
				return
			}
		}
	})
	return ch, func() string {
		cancel()
		wg.Wait()
		_ = cmd.Wait()
		if decodeErr != nil && ctx.Err() == nil {
			return fmt.Sprintf("decoding its output: %v; %s", decodeErr, stderr.String())
		}
		return stderr.String()
	}
}

// waitFor follows one object with kubectl get --watch and returns its JSON
// once check passes on it, with the time it did, as follower.until does.
// It fails the test with check's last error after timeout.
func (s *scenario) waitFor(resource, name, what string, timeout time.Duration, check func(obj []byte) error) ([]byte, time.Time) {
	s.t.Helper()
	f := s.follow(resource, name)
	defer f.close()
	return f.until(what, timeout, check)
}

// follower follows one object with kubectl get --watch, watching again
// when kubectl exits (the server ends watches now and then), and keeps the
// copy it saw last. Started before a change, it sees the change land.
type follower struct {
	s              *scenario
	resource, name string
	events         <-chan watchEvent
	stop           func() string
	latest         []byte
	ticks          int
}

// follow starts following one object; close ends it.
func (s *scenario) follow(resource, name string) *follower {
	s.t.Helper()
	f := &follower{s: s, resource: resource, name: name}
	f.events, f.stop = s.watch(resource, name)
	return f
}

// close ends the watch.
func (f *follower) close() { f.stop() }

// until returns the object's JSON once check passes on it, with the time
// it did, re-checking at every change and at least every recheck (check
// may look at other objects too), on the object as a fresh kubectl get
// shows it every refetchEvery rechecks and in the last second (logging it
// if the watch had not shown it). It fails the test with check's last
// error after timeout.
func (f *follower) until(what string, timeout time.Duration, check func(obj []byte) error) ([]byte, time.Time) {
	s := f.s
	s.t.Helper()
	end := time.Now().Add(timeout)
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(recheck)
	defer tick.Stop()
	lastErr := fmt.Errorf("kubectl get --watch %s %s printed nothing", f.resource, f.name)
	for {
		select {
		case ev, ok := <-f.events:
			if !ok {
				// kubectl exited (the server ends watches now and then):
				// watch again.
				if msg := strings.TrimSpace(f.stop()); msg != "" {
					lastErr = fmt.Errorf("kubectl get --watch %s %s: %s", f.resource, f.name, msg)
				}
				time.Sleep(pollInterval)
				f.events, f.stop = s.watch(f.resource, f.name)
				continue
			}
			f.latest = ev.Object
			if ev.Type == "DELETED" {
				f.latest = nil
				lastErr = fmt.Errorf("%s %s was deleted", f.resource, f.name)
			}
			// Check only the latest of what is queued.
			if len(f.events) > 0 {
				continue
			}
		case <-tick.C:
			if f.ticks++; f.ticks%refetchEvery == 0 || time.Until(end) < recheck {
				if fresh, ok := s.fetch(f.resource, f.name); ok {
					if rv, frv := resourceVersion(f.latest), resourceVersion(fresh); f.latest != nil && rv != frv {
						s.t.Logf("kubectl get --watch %s %s shows resourceVersion %s, a fresh kubectl get %s", f.resource, f.name, rv, frv)
					}
					f.latest = fresh
				}
			}
		case <-deadline.C:
			s.t.Fatalf("%s: not after %s: %v", what, timeout, lastErr)
		}
		if f.latest == nil {
			continue
		}
		if lastErr = check(f.latest); lastErr == nil {
			return f.latest, time.Now()
		}
	}
}

// resourceVersion reads an object's metadata.resourceVersion, "" if none.
func resourceVersion(obj []byte) string {
	var o struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(obj, &o)
	return o.Metadata.ResourceVersion
}

// fetch gets an object with a one-shot kubectl get, as JSON; false if
// that fails.
func (s *scenario) fetch(resource, name string) ([]byte, bool) {
	stdout, _, err := s.c.Kubectl("get", resource, name, "-n", s.ns, "-o", "json")
	return []byte(stdout), err == nil
}

// hookCalls are Metacontroller's counts of its calls to the operator's
// hooks, from its own /metrics (metacontroller_<hook>_requests_total, with
// controller_name="memcached"), keyed "<hook> <HTTP code>": "sync 200".
// Calls that got no answer (hook down) are not counted.
type hookCalls map[string]float64

// metacontrollerCalls scrapes Metacontroller's metrics.
func (e *env) metacontrollerCalls(t *testing.T) hookCalls {
	t.Helper()
	resp, err := http.Get(e.c.MetacontrollerMetricsURL())
	if err != nil {
		t.Fatalf("scraping Metacontroller: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scraping Metacontroller: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing Metacontroller's metrics: %v", err)
	}
	calls := hookCalls{}
	for _, hook := range []string{"customize", "sync", "finalize"} {
		f := families["metacontroller_"+hook+"_requests_total"]
		if f == nil {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["controller_name"] != compositeController {
				continue
			}
			calls[hook+" "+labels["code"]] += m.GetCounter().GetValue()
		}
	}
	return calls
}

// total is the number of calls to hook, whatever their answer.
func (c hookCalls) total(hook string) float64 {
	n := 0.0
	for k, v := range c {
		if strings.HasPrefix(k, hook+" ") {
			n += v
		}
	}
	return n
}

// since returns the calls made after before was scraped.
func (c hookCalls) since(before hookCalls) hookCalls {
	d := hookCalls{}
	for k, v := range c {
		if v != before[k] {
			d[k] = v - before[k]
		}
	}
	return d
}
