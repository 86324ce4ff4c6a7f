//go:build linux

package memcached_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/test/kube"
	"github.com/example/memcached-operator/test/pod"
	"github.com/example/memcached-operator/test/testutil"
)

// crdOnce installs the CRD in the shared API server once.
var crdOnce struct {
	sync.Once
	err string
}

// admit asks a real API server to create a Memcached (a dry run, with
// strict field validation, as kubectl does) and returns the object as it
// would be stored, defaults filled in, or its refusal.
func admit(t *testing.T, object []byte) (stored []byte, refusal string) {
	t.Helper()
	c := kube.Shared(t, kube.Options{})
	crdOnce.Do(func() {
		crd := filepath.Join(testutil.Root(), "manifests", "base", "crd", "cache.example.com_memcacheds.yaml")
		if out, errOut, err := c.Kubectl("apply", "--server-side", "-f", crd); err != nil {
			crdOnce.err = fmt.Sprintf("%v: %s%s", err, out, errOut)
			return
		}
		if out, errOut, err := c.Kubectl("wait", "--for=condition=established", "--timeout=60s", "crd/memcacheds.cache.example.com"); err != nil {
			crdOnce.err = fmt.Sprintf("%v: %s%s", err, out, errOut)
		}
	})
	if crdOnce.err != "" {
		t.Fatalf("installing the CRD: %s", crdOnce.err)
	}
	out, errOut, err := c.KubectlStdin(object, "create", "-n", "default", "--dry-run=server", "--validate=strict", "-o", "json", "-f", "-")
	if err != nil {
		return nil, errOut
	}
	return []byte(out), ""
}

// settingsOf is what stats settings must say for a Memcached's spec:
// memcached's own defaults where the spec says nothing, as the README
// documents them.
func settingsOf(t *testing.T, object []byte) map[string]string {
	t.Helper()
	var obj struct {
		Spec struct {
			Memcached struct {
				MaxMemoryMB    *int64             `json:"maxMemoryMB"`
				MaxConnections *int64             `json:"maxConnections"`
				Threads        *int64             `json:"threads"`
				MaxItemSize    *resource.Quantity `json:"maxItemSize"`
				Verbosity      *int64             `json:"verbosity"`
			} `json:"memcached"`
			TLS *struct {
				ClientCertificates string `json:"clientCertificates"`
				MinVersion         string `json:"minVersion"`
			} `json:"tls"`
			Auth *struct {
				Mode string `json:"mode"`
			} `json:"auth"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(object, &obj); err != nil {
		t.Fatal(err)
	}
	m := obj.Spec.Memcached
	or := func(p *int64, def int64) int64 {
		if p == nil {
			return def
		}
		return *p
	}
	item := int64(1 << 20)
	if m.MaxItemSize != nil {
		item = m.MaxItemSize.Value()
	}
	want := map[string]string{
		"tcpport":            "11211",
		"maxbytes":           fmt.Sprint(or(m.MaxMemoryMB, 64) << 20),
		"maxconns":           fmt.Sprint(or(m.MaxConnections, 1024)),
		"num_threads":        fmt.Sprint(or(m.Threads, 4)),
		"item_size_max":      fmt.Sprint(item),
		"verbosity":          fmt.Sprint(or(m.Verbosity, 0)),
		"ssl_enabled":        "no",
		"auth_enabled_sasl":  "no",
		"auth_enabled_ascii": "no",
	}
	if tls := obj.Spec.TLS; tls != nil {
		want["ssl_enabled"], want["ssl_verify_mode"], want["ssl_min_version"] = "yes", "0", "tlsv1.2"
		if tls.ClientCertificates == "Required" {
			// ssl_verify_mode=2 reads back as OpenSSL's flags:
			// SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT.
			want["ssl_verify_mode"] = "3"
		}
		if tls.MinVersion == "1.3" {
			want["ssl_min_version"] = "tlsv1.3"
		}
	}
	if a := obj.Spec.Auth; a != nil {
		if a.Mode == "ASCII" {
			want["auth_enabled_ascii"] = "/run/memcached/auth/users"
		} else {
			want["auth_enabled_sasl"] = "yes"
		}
	}
	return want
}

// checkSettings compares memcached's stats settings with want.
func checkSettings(t *testing.T, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("stats settings %s = %q, want %q", k, got[k], v)
		}
	}
}

// TestExamplesRun runs the Pod the hook answers for every example: the
// CRD accepts it, the hook answers a Deployment, and memcached runs with
// exactly the settings the example asks for.
func TestExamplesRun(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testutil.Root(), "examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			stored, refusal := admit(t, b)
			if refusal != "" {
				t.Fatalf("the CRD refuses the example: %s", refusal)
			}
			tmpl := template(t, answer(t, stored))
			p := pod.Run(t, tmpl, pod.Options{Secrets: secretsFor(t, tmpl)})
			checkSettings(t, statsSettings(t, p, tmpl), settingsOf(t, stored))
		})
	}
}

// edgeSpecs are the smallest and largest of each field, and each shape of
// extraArgs: refused by the CRD, or by the hook, naming the field; or run,
// with what stats settings must say beyond settingsOf.
var edgeSpecs = []struct {
	name string
	spec string
	// refusedBy is "crd" or "hook"; "" means memcached runs.
	refusedBy string
	field     string            // what the refusal names
	settings  map[string]string // more stats settings to check
}{
	{name: "smallest memory", spec: `{"memcached":{"maxMemoryMB":2}}`},
	{name: "memory 1 MB", spec: `{"memcached":{"maxMemoryMB":1}}`, refusedBy: "crd", field: "spec.memcached.maxMemoryMB"},
	{name: "largest memory", spec: `{"memcached":{"maxMemoryMB":1048576}}`},
	{name: "one thread, fewest connections", spec: `{"memcached":{"threads":1,"maxConnections":25}}`},
	{name: "64 threads, fewest connections", spec: `{"memcached":{"threads":64,"maxConnections":340}}`},
	{name: "65 threads", spec: `{"memcached":{"threads":65}}`, refusedBy: "crd", field: "spec.memcached.threads"},
	{name: "too few connections for 4 threads", spec: `{"memcached":{"maxConnections":16}}`, refusedBy: "crd", field: "spec.memcached.maxConnections"},
	{name: "too few connections for 64 threads", spec: `{"memcached":{"threads":64,"maxConnections":100}}`, refusedBy: "crd", field: "spec.memcached.maxConnections"},
	{name: "smallest item size", spec: `{"memcached":{"maxItemSize":"512Ki"}}`},
	{name: "largest item size", spec: `{"memcached":{"maxMemoryMB":2048,"maxItemSize":"1Gi"}}`},
	{name: "item size over half the memory", spec: `{"memcached":{"maxItemSize":"33Mi"}}`, refusedBy: "crd", field: "spec.memcached.maxItemSize"},
	{name: "item size not a multiple of the chunk", spec: `{"memcached":{"maxItemSize":"600Ki"}}`, refusedBy: "crd", field: "spec.memcached.maxItemSize"},
	{name: "most verbose", spec: `{"memcached":{"verbosity":2}}`},
	{name: "an -o suboption", spec: `{"memcached":{"extraArgs":["-o","idle_timeout=600"]}}`, settings: map[string]string{"idle_timeout": "600"}},
	{name: "several -o suboptions in one", spec: `{"memcached":{"extraArgs":["-o","modern,idle_timeout=30,hash_algorithm=xxh3"]}}`, settings: map[string]string{"idle_timeout": "30", "hash_algorithm": "xxh3"}},
	{name: "an -o suboption attached", spec: `{"memcached":{"extraArgs":["-oidle_timeout=45"]}}`, settings: map[string]string{"idle_timeout": "45"}},
	{name: "a short option group with a value", spec: `{"memcached":{"extraArgs":["-MR40"]}}`, settings: map[string]string{"evictions": "off", "reqs_per_event": "40"}},
	{name: "a long option by a prefix", spec: `{"memcached":{"extraArgs":["--disable-ev","--max-reqs=30"]}}`, settings: map[string]string{"evictions": "off", "reqs_per_event": "30"}},
	{name: "the text protocol only", spec: `{"memcached":{"extraArgs":["-B","ascii"]}}`, settings: map[string]string{"binding_protocol": "ascii"}},
	{name: "a managed flag", spec: `{"memcached":{"extraArgs":["-m","128"]}}`, refusedBy: "crd", field: "spec.memcached.extraArgs"},
	{name: "a managed flag by a long prefix", spec: `{"memcached":{"extraArgs":["--thr=8"]}}`, refusedBy: "crd", field: "spec.memcached.extraArgs"},
	{name: "a trailing -o", spec: `{"memcached":{"extraArgs":["-o","modern","-o"]}}`, refusedBy: "crd", field: "spec.memcached.extraArgs"},
	{name: "a bare word", spec: `{"memcached":{"extraArgs":["modern"]}}`, refusedBy: "hook", field: "spec.memcached.extraArgs[0]"},
	{name: "an unknown option", spec: `{"memcached":{"extraArgs":["-q"]}}`, refusedBy: "hook", field: "spec.memcached.extraArgs[0]"},
	{name: "an unknown suboption", spec: `{"memcached":{"extraArgs":["-o","foo"]}}`, refusedBy: "hook", field: "spec.memcached.extraArgs[1]"},
	{name: "a suboption that crashes without its value", spec: `{"memcached":{"extraArgs":["-o","slab_sizes"]}}`, refusedBy: "hook", field: "spec.memcached.extraArgs[1]"},
	{name: "smallest extstore", spec: `{"extstore":{"size":"320Mi","expectedItemSize":4096}}`,
		settings: map[string]string{"ext_wbuf_size": "8388608", "ext_item_size": "512", "ext_item_age": "0", "ext_recache_rate": "0", "ext_max_sleep": "10000", "slab_automove_freeratio": "0.100"}},
	{name: "extstore with the largest write buffer", spec: `{"memcached":{"maxMemoryMB":1024,"maxItemSize":"64Mi"},"extstore":{"size":"1Gi","writeBufferMB":64,"threads":1,"expectedItemSize":65536}}`,
		settings: map[string]string{"ext_wbuf_size": "67108864", "item_size_max": "67108864"}},
	{name: "extstore item size above the write buffer", spec: `{"memcached":{"maxMemoryMB":1024,"maxItemSize":"16Mi"},"extstore":{"size":"1Gi","expectedItemSize":65536}}`, refusedBy: "crd", field: "spec.extstore.writeBufferMB"},
	{name: "extstore of four pages", spec: `{"extstore":{"size":"256Mi","expectedItemSize":4096}}`, refusedBy: "crd", field: "spec.extstore.size"},
	{name: "ext_path in extraArgs", spec: `{"memcached":{"extraArgs":["-o","ext_path=/tmp/f:64m"]}}`, refusedBy: "hook", field: "spec.memcached.extraArgs[1]"},
	{name: "binary protocol with metrics", spec: `{"metrics":{"enabled":true},"memcached":{"extraArgs":["-B","binary"]}}`, refusedBy: "hook", field: "spec.memcached.extraArgs[1]"},
}

// TestEdgeSpecs takes every edge spec through the API server, the hook and
// the real memcached: either one of the first two refuses it, naming the
// field, or memcached runs with exactly the settings it asks for.
func TestEdgeSpecs(t *testing.T) {
	for i, tt := range edgeSpecs {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stored, refusal := admit(t, withSpec(fmt.Sprintf("edge-%d", i), tt.spec))
			a := (*memcached.Answer)(nil)
			if refusal == "" {
				a = answer(t, stored)
				if a.Degraded == memcached.ReasonInvalidSpec {
					refusal = degradedMessage(a)
				}
			}
			switch {
			case tt.refusedBy == "crd" && stored != nil:
				t.Fatalf("the CRD accepts it, want it refused naming %s", tt.field)
			case tt.refusedBy == "hook" && stored == nil:
				t.Fatalf("the CRD refuses it, want the hook to (the CRD cannot judge it): %s", refusal)
			case tt.refusedBy == "" && refusal != "":
				t.Fatalf("refused: %s", refusal)
			case tt.refusedBy != "":
				if !strings.Contains(refusal, tt.field) {
					t.Errorf("the %s's refusal does not name %s:\n%s", tt.refusedBy, tt.field, refusal)
				}
				return
			}
			p := pod.Run(t, template(t, a), pod.Options{})
			want := settingsOf(t, stored)
			for k, v := range tt.settings {
				want[k] = v
			}
			checkSettings(t, dial(t, p, memcached.Port).stats(t, "stats settings"), want)
		})
	}
}

// degradedMessage is the Degraded condition's message of an answer.
func degradedMessage(a *memcached.Answer) string {
	for _, c := range a.Response.Status.Conditions {
		if c.Type == memcached.ConditionDegraded {
			return c.Message
		}
	}
	return ""
}
