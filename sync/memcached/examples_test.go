package memcached_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/example/memcached-operator/test/testutil"
	"sigs.k8s.io/yaml"
)

// exampleGoldenDir holds one golden answer per Memcached in examples/: the
// children and status each feature's example produces.
var exampleGoldenDir = filepath.Join("testdata", "golden-examples")

// TestGoldenExamples answers a first sync for every Memcached in examples/,
// as a CompositeController managing every child kind the hook can make
// (servicemonitor overlay included) would send it, and compares the answer
// with testdata/golden-examples/<file>.json.
func TestGoldenExamples(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testutil.Root(), "examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	want := map[string]bool{}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		golden := filepath.Join(exampleGoldenDir, name+".json")
		want[golden] = true
		t.Run(name, func(t *testing.T) {
			body := exampleRequest(t, file)
			got := callHook(t, "sync", body, fixedNow)
			testutil.Golden(t, golden, got)
			checkAnswer(t, "sync", body, got)
			checkFacts(t, body, got)
			if bytes := callHook(t, "sync", body, fixedNow); string(bytes) != string(got) {
				t.Errorf("same request, different bytes:\n%s\n%s", got, bytes)
			}
			cond := parseAnswer(t, got).condition(t, "Degraded")
			if cond.Reason == "InvalidSpec" {
				t.Errorf("example %s is invalid: %s", file, cond.Message)
			}
		})
	}
	goldens, _ := filepath.Glob(filepath.Join(exampleGoldenDir, "*.json"))
	for _, g := range goldens {
		if !want[g] {
			t.Errorf("golden file %s answers no example: delete it", g)
		}
	}
}

// exampleRequest builds the first sync request Metacontroller would send for
// an example Memcached: nothing observed yet.
func exampleRequest(t *testing.T, file string) []byte {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var parent map[string]any
	if err := yaml.Unmarshal(data, &parent); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	meta := parent["metadata"].(map[string]any)
	meta["namespace"] = "default"
	meta["generation"] = 1
	meta["uid"] = "00000000-0000-0000-0000-000000000001"
	return testutil.MustMarshal(t, testutil.FirstSync(parent))
}
