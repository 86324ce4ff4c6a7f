package report

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/test/kube"
)

func TestMain(m *testing.M) { kube.Main(m) }

// step is one call on a Reporter.
type step struct {
	pod    string
	p      *v1alpha1.HandoffProgress // nil: Forget
	wantOK bool
}

var steps = []struct {
	name string
	step step
	// want is the data afterwards.
	want map[string]string
}{
	{name: "first report", step: step{pod: "cache-b", p: &v1alpha1.HandoffProgress{State: "Copying", Items: 10, Bytes: 1000}},
		want: map[string]string{"cache-b": `{"state":"Copying","items":10,"bytes":1000,"skipped":0,"seconds":0}`}},
	{name: "another Pod", step: step{pod: "cache-a", p: &v1alpha1.HandoffProgress{State: "Failed", Message: "x: connection refused"}},
		want: map[string]string{
			"cache-a": `{"state":"Failed","items":0,"bytes":0,"skipped":0,"seconds":0,"message":"x: connection refused"}`,
			"cache-b": `{"state":"Copying","items":10,"bytes":1000,"skipped":0,"seconds":0}`,
		}},
	{name: "progress replaces progress", step: step{pod: "cache-b", p: &v1alpha1.HandoffProgress{State: "Done", Items: 20, Bytes: 2000, Skipped: 1, Seconds: 3}},
		want: map[string]string{
			"cache-a": `{"state":"Failed","items":0,"bytes":0,"skipped":0,"seconds":0,"message":"x: connection refused"}`,
			"cache-b": `{"state":"Done","items":20,"bytes":2000,"skipped":1,"seconds":3}`,
		}},
	{name: "forgotten", step: step{pod: "cache-a"},
		want: map[string]string{"cache-b": `{"state":"Done","items":20,"bytes":2000,"skipped":1,"seconds":3}`}},
	{name: "forgotten twice", step: step{pod: "cache-a"},
		want: map[string]string{"cache-b": `{"state":"Done","items":20,"bytes":2000,"skipped":1,"seconds":3}`}},
}

func apply(t *testing.T, r Reporter, s step) {
	t.Helper()
	var err error
	if s.p != nil {
		err = r.Report(context.Background(), s.pod, *s.p)
	} else {
		err = r.Forget(context.Background(), s.pod)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestFile writes the reports into a file, whole each time, in the same
// bytes for the same reports, and starts from what the file held.
func TestFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reports.json")
	f := NewFile(path, slog.New(slog.DiscardHandler))
	for _, tt := range steps {
		t.Run(tt.name, func(t *testing.T) {
			apply(t, f, tt.step)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]string
			if err := json.Unmarshal(b, &got); err != nil || !equal(got, tt.want) {
				t.Errorf("the file holds %s (%v), want %v", b, err, tt.want)
			}
			// The hook reads each value so.
			for pod, v := range got {
				var p v1alpha1.HandoffProgress
				if err := json.Unmarshal([]byte(v), &p); err != nil || p.State == "" {
					t.Errorf("%s: %q does not decode: %v", pod, v, err)
				}
			}
		})
	}
	checkPut(t, f, func() map[string]string {
		b, _ := os.ReadFile(path)
		var data map[string]string
		json.Unmarshal(b, &data)
		return data
	}, map[string]string{"cache-b": `{"state":"Done","items":20,"bytes":2000,"skipped":1,"seconds":3}`})
	before, _ := os.ReadFile(path)
	again := NewFile(path, slog.New(slog.DiscardHandler))
	apply(t, again, step{pod: "cache-b", p: &v1alpha1.HandoffProgress{State: "Done", Items: 20, Bytes: 2000, Skipped: 1, Seconds: 3}})
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("the same reports wrote\n%s\nthen\n%s", before, after)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
}

// TestKube reports through a real kube-apiserver: merge patches of the
// ConfigMap's data (keys of others left alone), and Events on the
// Memcached that kubectl finds by its name and UID.
func TestKube(t *testing.T) {
	c := kube.Shared(t, kube.Options{})
	kubectl := func(stdin string, args ...string) string {
		t.Helper()
		out, stderr, err := c.KubectlStdin([]byte(stdin), args...)
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, stderr)
		}
		return out
	}
	// A namespace of this run's own: the API server is shared by every
	// run of -count, and no controller deletes a namespace in it.
	ns := kubectl("apiVersion: v1\nkind: Namespace\nmetadata: {generateName: report-}\n", "create", "-f", "-", "-o", "jsonpath={.metadata.name}")
	// The hook's ConfigMap has no data; another writer's key must stay.
	kubectl("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cache-agent, namespace: "+ns+"}\n", "apply", "-f", "-")
	kubectl("", "-n", ns, "patch", "configmap", "cache-agent", "--type=merge", "-p", `{"data":{"other":"x"}}`)
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	k, err := NewKube(cfg, ns, "cache", "cache-agent-7d9f-abcde")
	if err != nil {
		t.Fatal(err)
	}
	k.SetUID("0b6d2f2e-5a61-4c55-9a0e-2d3c6f1a7e11")
	for _, tt := range steps {
		t.Run(tt.name, func(t *testing.T) {
			apply(t, k, tt.step)
			var cm struct {
				Data map[string]string `json:"data"`
			}
			if err := json.Unmarshal([]byte(kubectl("", "-n", ns, "get", "configmap", "cache-agent", "-o", "json")), &cm); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"other": "x"}
			for k, v := range tt.want {
				want[k] = v
			}
			if !equal(cm.Data, want) {
				t.Errorf("data %v, want %v", cm.Data, want)
			}
		})
	}

	checkPut(t, k, func() map[string]string {
		var cm struct {
			Data map[string]string `json:"data"`
		}
		if err := json.Unmarshal([]byte(kubectl("", "-n", ns, "get", "configmap", "cache-agent", "-o", "json")), &cm); err != nil {
			t.Fatal(err)
		}
		return cm.Data
	}, map[string]string{"other": "x", "cache-b": `{"state":"Done","items":20,"bytes":2000,"skipped":1,"seconds":3}`})

	msg := "handed on 3 items (0.0 MiB) from cache-a to cache-b in 0.1 s, 0 already there"
	if err := k.Event(context.Background(), false, "HandedOff", msg); err != nil {
		t.Fatal(err)
	}
	if err := k.Event(context.Background(), true, "HandoffFailed", "it failed"); err != nil {
		t.Fatal(err)
	}
	out := kubectl("", "-n", ns, "get", "events", "--field-selector",
		"involvedObject.kind=Memcached,involvedObject.name=cache,involvedObject.uid=0b6d2f2e-5a61-4c55-9a0e-2d3c6f1a7e11",
		"-o", `jsonpath={range .items[*]}{.type} {.reason} {.source.component} {.reportingComponent} {.reportingInstance}: {.message}{"\n"}{end}`)
	for _, want := range []string{
		"Normal HandedOff memcached-agent memcached-agent cache-agent-7d9f-abcde: " + msg,
		"Warning HandoffFailed memcached-agent memcached-agent cache-agent-7d9f-abcde: it failed",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("events:\n%s\nwant a line %q", out, want)
		}
	}

	// A ConfigMap that is not there is an error that names it.
	k.configMap = "missing-agent"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := k.Report(ctx, "cache-b", v1alpha1.HandoffProgress{State: "Done"}); err == nil || !strings.Contains(err.Error(), ns+"/missing-agent") {
		t.Errorf("Report to a missing ConfigMap: %v", err)
	}
}

// putter is what the proxy's report is written through (confirm.Store).
type putter interface {
	Put(ctx context.Context, key, value string) error
	Forget(ctx context.Context, key string) error
}

// checkPut puts a proxy's report, replaces it, and forgets it, checking
// after each what data() holds: base and the report, then base alone.
func checkPut(t *testing.T, p putter, data func() map[string]string, base map[string]string) {
	t.Helper()
	const key = "_proxy_cache-proxy-0"
	for _, value := range []string{`{"loaded":{"":5}}`, `{"loaded":{"a":7,"b":6}}`, ""} {
		var err error
		if value != "" {
			err = p.Put(context.Background(), key, value)
		} else {
			err = p.Forget(context.Background(), key)
		}
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{}
		for k, v := range base {
			want[k] = v
		}
		if value != "" {
			want[key] = value
		}
		if got := data(); !equal(got, want) {
			t.Errorf("after putting %q: data %v, want %v", value, got, want)
		}
	}
}
