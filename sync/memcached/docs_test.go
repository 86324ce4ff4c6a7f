package memcached_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/example/memcached-operator/test/crdschema"
	"github.com/example/memcached-operator/test/testutil"
)

// The API's reference (sync/api/v1alpha1/README.md) is generated from the
// CRD, whose descriptions are the API's doc comments. Those say in words
// what the hook does when a field is left out; these tests hold them to
// what the hook answers, and the reference's prose to the reasons the hook
// gives.

// TestDescriptionsStateTheDefaults checks the words of the descriptions of
// spec.resources, spec.metrics.resources and spec.topologySpreadConstraints
// against the containers and the spread the hook answers when they are left
// out.
func TestDescriptionsStateTheDefaults(t *testing.T) {
	a := fixture{spec: `{"metrics": {"enabled": true}}`}.run(t, fixedNow)
	memcached, exporter := a.container(t, "memcached").Resources, a.container(t, "exporter").Resources

	var want []string
	if _, ok := memcached.Limits[corev1.ResourceCPU]; ok {
		t.Errorf("memcached has a CPU limit; spec.resources says it has none")
	}
	cpu := memcached.Requests[corev1.ResourceCPU]
	want = append(want, "a CPU request of "+cpu.String()+", and no CPU limit")
	for _, w := range want {
		if d := crdschema.Description(t, "spec.resources"); !strings.Contains(d, w) {
			t.Errorf("spec.resources: %q does not say %q", d, w)
		}
	}

	if len(exporter.Limits) != 1 {
		t.Errorf("the exporter's limits are %v; spec.metrics.resources names one", exporter.Limits)
	}
	eCPU, eMem, eLimit := exporter.Requests[corev1.ResourceCPU], exporter.Requests[corev1.ResourceMemory], exporter.Limits[corev1.ResourceMemory]
	w := "requests of " + eCPU.String() + " CPU and " + eMem.String() + " of memory, a limit of " + eLimit.String() + " of memory"
	if d := crdschema.Description(t, "spec.metrics.resources"); !strings.Contains(d, w) {
		t.Errorf("spec.metrics.resources: %q does not say %q", d, w)
	}

	spread := a.deployment(t).Spec.Template.Spec.TopologySpreadConstraints
	var keys []string
	for _, c := range spread {
		keys = append(keys, c.TopologyKey)
		if c.WhenUnsatisfiable != corev1.ScheduleAnyway {
			t.Errorf("the default spread over %s is %s; spec.topologySpreadConstraints says it is soft", c.TopologyKey, c.WhenUnsatisfiable)
		}
	}
	if got := strings.Join(keys, " "); got != corev1.LabelHostname+" "+corev1.LabelTopologyZone {
		t.Errorf("the default spread is over %s; spec.topologySpreadConstraints says nodes and zones", got)
	}
	if d := crdschema.Description(t, "spec.topologySpreadConstraints"); !strings.Contains(d, "Left out, the Pods spread across nodes and zones, softly") {
		t.Errorf("spec.topologySpreadConstraints: %q does not say how the Pods spread by default", d)
	}
}

// TestREADMEListsEveryReason checks that the conditions table of the API's
// README names every reason the hook can give (every constant of type
// Reason in reasons.go).
func TestREADMEListsEveryReason(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "reasons.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Reason" {
				continue
			}
			for _, v := range vs.Values {
				s, err := strconv.Unquote(v.(*ast.BasicLit).Value)
				if err != nil {
					t.Fatal(err)
				}
				reasons = append(reasons, s)
			}
		}
	}
	if len(reasons) < 10 {
		t.Fatalf("found only the reasons %v in reasons.go", reasons)
	}
	b, err := os.ReadFile(filepath.Join(testutil.Root(), "sync", "api", "v1alpha1", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "| condition | True when | reasons |")
	if !ok {
		t.Fatal("sync/api/v1alpha1/README.md has no conditions table")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	for _, r := range reasons {
		if !strings.Contains(table, "`"+r+"`") {
			t.Errorf("the conditions table of sync/api/v1alpha1/README.md does not name the reason %s", r)
		}
	}
}
