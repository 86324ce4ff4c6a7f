package memcached_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/example/memcached-operator/test/testutil"
)

// podTemplateDir holds the memcached Pod template the hook answers for
// each example: the bytes whose change rolls every Pod of a Memcached.
var podTemplateDir = filepath.Join("testdata", "pod-templates")

// TestPodTemplatesOnlyChangeOnPurpose guards the rule that upgrading the
// operator must not roll a cache by accident: the memcached Pod template
// of every example is held in testdata/pod-templates, and its digest must
// be named in the upgrade notes (sync/api/v1alpha1/README.md). A change to
// a template (a script, a default, the default image) fails here until
// the golden file is accepted with -update and the new digest is named in
// the notes, with what changes and what the rollout does to the cache.
func TestPodTemplatesOnlyChangeOnPurpose(t *testing.T) {
	notes := upgradeNotes(t)
	files, err := filepath.Glob(filepath.Join(testutil.Root(), "examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	want := map[string]bool{}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		golden := filepath.Join(podTemplateDir, name+".json")
		want[golden] = true
		t.Run(name, func(t *testing.T) {
			a := parseAnswer(t, callHook(t, "sync", exampleRequest(t, file), fixedNow))
			// With zones, the first zone's: the others differ by the zone.
			tmpl, err := json.MarshalIndent(a.memcachedDeployments(t)[0].Spec.Template, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			tmpl = append(tmpl, '\n')
			testutil.Golden(t, golden, tmpl)
			sum := sha256.Sum256(tmpl)
			digest := hex.EncodeToString(sum[:6])
			if !strings.Contains(notes, "`"+name+"`: `"+digest+"`") {
				t.Errorf("the memcached Pod template of examples/%s.yaml is %s, which the upgrade notes (sync/api/v1alpha1/README.md, ## Upgrade notes) do not name as \"`%s`: `%s`\": "+
					"upgrading the operator would roll every such Pod. If that is meant, accept the template with go test ./sync/memcached -run TestPodTemplates -update, and say in the notes what changes and what the rollout does to the cache",
					name, digest, name, digest)
			}
		})
	}
	goldens, _ := filepath.Glob(filepath.Join(podTemplateDir, "*.json"))
	for _, g := range goldens {
		if !want[g] {
			t.Errorf("golden file %s holds no example's template: delete it", g)
		}
	}
}

// upgradeNotes reads the upgrade notes section of the API's README.
func upgradeNotes(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testutil.Root(), "sync", "api", "v1alpha1", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, notes, ok := strings.Cut(string(b), "\n## Upgrade notes\n")
	if !ok {
		t.Fatal("sync/api/v1alpha1/README.md has no ## Upgrade notes section")
	}
	notes, _, _ = strings.Cut(notes, "\n## ")
	return notes
}
