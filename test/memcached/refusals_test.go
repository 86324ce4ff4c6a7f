//go:build linux

package memcached_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/test/pod"
	"github.com/example/memcached-operator/test/testutil"
)

// TestRefusalsAreWhatMemcachedDoes runs, against the real programs, specs
// the CRD and the hook refuse for memcached's sake, as the hook would have
// answered them before it refused them: each shows the failure the
// refusal prevents (an exit at start, an argument silently ignored, an
// exporter that cannot read memcached).
func TestRefusalsAreWhatMemcachedDoes(t *testing.T) {
	tests := []struct {
		name  string
		spec  string
		check func(t *testing.T, p *pod.Pod)
	}{
		{name: "16 connections for 4 threads", spec: `{"memcached":{"maxConnections":16}}`, check: exits},
		{name: "100 connections for 64 threads", spec: `{"memcached":{"maxConnections":100,"threads":64}}`, check: exits},
		{name: "a trailing -o", spec: `{"memcached":{"extraArgs":["-o","modern","-o"]}}`, check: exits},
		{name: "an unknown suboption", spec: `{"memcached":{"extraArgs":["-o","foo"]}}`, check: exits},
		{name: "a suboption without its value", spec: `{"memcached":{"extraArgs":["-o","slab_sizes"]}}`, check: exits},
		{name: "a bare word", spec: `{"memcached":{"extraArgs":["idle_timeout=600"]}}`, check: func(t *testing.T, p *pod.Pod) {
			if got := dial(t, p, memcached.Port).stats(t, "stats settings")["idle_timeout"]; got != "0" {
				t.Errorf("idle_timeout = %s, want 0: memcached ignores a word that is no option", got)
			}
		}},
		{name: "binary protocol with metrics", spec: `{"metrics":{"enabled":true},"memcached":{"extraArgs":["-B","binary"]}}`, check: func(t *testing.T, p *pod.Pod) {
			// memcached listens before the scrape: memcached_up 0 then
			// says that the exporter cannot read it, not that it has
			// not started yet.
			waitListening(t, p, memcached.Port)
			var metrics map[string]string
			if !testutil.Poll(20*time.Second, func() bool {
				metrics = scrape(t, p, memcached.ExporterPort)
				return metrics["memcached_up"] != ""
			}) {
				t.Fatalf("the exporter reports no memcached_up:\n%s", p.Container("exporter").Output())
			}
			if got := metrics["memcached_up"]; got != "0" {
				t.Errorf("memcached_up = %q, want 0: the exporter speaks the text protocol", got)
			}
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var spec v1alpha1.MemcachedSpec
			if err := json.Unmarshal([]byte(tt.spec), &spec); err != nil {
				t.Fatal(err)
			}
			spec.Default()
			if errs := v1alpha1.Validate(&v1alpha1.Memcached{Spec: spec}); len(errs) == 0 {
				t.Fatalf("the hook accepts it; this test is about what it refuses")
			}
			// The Pod of a valid spec with metrics as wanted, memcached
			// given the refused spec's arguments.
			base := `{}`
			if spec.Metrics != nil && spec.Metrics.Enabled {
				base = `{"metrics":{"enabled":true}}`
			}
			tmpl := template(t, answer(t, withSpec(fmt.Sprintf("refused-%d", i), base)))
			tmpl.Spec.Containers[0].Args = memcached.Args(&spec)
			tt.check(t, pod.Run(t, tmpl, pod.Options{}))
		})
	}
}

// exits checks that memcached ends at start.
func exits(t *testing.T, p *pod.Pod) {
	t.Helper()
	c := p.Container("memcached")
	if done, err := c.Wait(10 * time.Second); !done || err == nil {
		t.Errorf("memcached still runs or exited cleanly (%v), want it to fail at start; it wrote:\n%s", err, c.Output())
		return
	}
	t.Logf("memcached failed at start, as the refusal says it would:\n%s", c.Output())
}
