// Package monitoring checks what an on-call engineer reads (#35): the
// alerts and recording rules of manifests/components/prometheusrule and the
// Grafana dashboard of manifests/components/dashboard. promtool, built by
// make from Prometheus's module (PROMTOOL_BIN), checks the rules and runs
// their unit tests (testdata/rules_test.yaml), and every expression of the
// dashboard parses; every metric name they read is one that
// memcached_exporter, the agent or the hook really exposes
// (testdata/exposed.txt, scraped from the real programs: see names_test.go).
// And the rules run in a real Prometheus, Debian's, scraping the real
// programs, through a healthy minute and a fault for each alert that
// matters at the limits (prometheus_test.go). Without promtool or
// prometheus the tests that run them skip, or fail when CI is set.
package monitoring

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/test/testutil"
)

const (
	componentDir = "../../manifests/components/prometheusrule"
	ruleFile     = componentDir + "/prometheusrule.yaml"
	runbook      = componentDir + "/RUNBOOK.md"
	unitTests    = "testdata/rules_test.yaml"
	// runbookURL is where every alert's runbook_url points, followed by
	// the anchor of the alert's section.
	runbookURL = "https://github.com/example/memcached-operator/blob/main/manifests/components/prometheusrule/RUNBOOK.md#"
)

// rule is one rule of a group, as Prometheus's rule files spell it.
type rule struct {
	Record      string            `json:"record,omitempty"`
	Alert       string            `json:"alert,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type group struct {
	Name  string `json:"name"`
	Rules []rule `json:"rules"`
}

// readGroups reads the PrometheusRule's rule groups.
func readGroups(t *testing.T, file string) []group {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Spec       struct {
			Groups []group `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(data, &pr); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if pr.Kind != "PrometheusRule" || len(pr.Spec.Groups) == 0 {
		t.Fatalf("%s: kind %q with %d groups, want a PrometheusRule with groups", file, pr.Kind, len(pr.Spec.Groups))
	}
	return pr.Spec.Groups
}

// writeRuleFile writes groups as a Prometheus rule file, rules.yaml in
// dir, which is what the Prometheus Operator makes of a PrometheusRule.
func writeRuleFile(t *testing.T, dir string, groups []group) string {
	t.Helper()
	data, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// promtool runs promtool with args in dir and returns its output, failing
// t when it fails.
func promtool(t *testing.T, dir string, args ...string) string {
	t.Helper()
	bin := testutil.Program(t, "PROMTOOL_BIN", "promtool (make promtool)")
	var out bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// TestRulesCheck runs promtool check rules on the PrometheusRule's groups:
// every expression parses and type-checks, every name is unique where it
// must be, every template in the annotations parses.
func TestRulesCheck(t *testing.T) {
	dir := t.TempDir()
	writeRuleFile(t, dir, readGroups(t, ruleFile))
	out := promtool(t, dir, "check", "rules", "rules.yaml")
	if !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool check rules: %s", out)
	}
}

// TestRulesUnit runs promtool test rules on testdata/rules_test.yaml with
// the PrometheusRule's groups: every alert fires on the series that should
// make it fire, with the labels and annotations it should have, and not
// before its "for" or on the series beside them.
func TestRulesUnit(t *testing.T) {
	dir := t.TempDir()
	writeRuleFile(t, dir, readGroups(t, ruleFile))
	tests, err := os.ReadFile(unitTests)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules_test.yaml"), tests, 0o600); err != nil {
		t.Fatal(err)
	}
	out := promtool(t, dir, "test", "rules", "rules_test.yaml")
	if !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool test rules: %s", out)
	}
}

// TestAlertsUnitTested holds testdata/rules_test.yaml to covering every
// alert both ways: at some time it fires (exp_alerts not empty) and at
// another it does not (exp_alerts empty); and every recording rule is
// read by an alert, or has a test of its own.
func TestAlertsUnitTested(t *testing.T) {
	data, err := os.ReadFile(unitTests)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
			PromQLExprTest []struct {
				Expr string `json:"expr"`
			} `json:"promql_expr_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatalf("%s: %v", unitTests, err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	var exprs []string
	for _, tc := range file.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
		for _, e := range tc.PromQLExprTest {
			exprs = append(exprs, e.Expr)
		}
	}
	groups := readGroups(t, ruleFile)
	var alertExprs []string
	for _, g := range groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				alertExprs = append(alertExprs, r.Expr)
			}
		}
	}
	for _, g := range groups {
		for _, r := range g.Rules {
			switch {
			case r.Alert != "":
				if !fires[r.Alert] {
					t.Errorf("%s: no test where alert %s fires", unitTests, r.Alert)
				}
				if !quiet[r.Alert] {
					t.Errorf("%s: no test where alert %s does not fire", unitTests, r.Alert)
				}
			case r.Record != "":
				used := slices.ContainsFunc(append(alertExprs, exprs...), func(e string) bool { return strings.Contains(e, r.Record) })
				if !used {
					t.Errorf("%s: recording rule %s is read by no alert and has no promql_expr_test", unitTests, r.Record)
				}
			}
		}
	}
}

// TestAlertsHaveRunbooks checks every alert's labels and annotations: a
// severity, a summary and a description, and a runbook_url pointing at a
// section of RUNBOOK.md named after the alert.
func TestAlertsHaveRunbooks(t *testing.T) {
	data, err := os.ReadFile(runbook)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	heading := regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	for _, m := range heading.FindAllStringSubmatch(string(data), -1) {
		anchors[githubAnchor(m[1])] = true
	}
	for _, g := range readGroups(t, ruleFile) {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			t.Run(r.Alert+" "+r.Labels["severity"], func(t *testing.T) {
				if !slices.Contains([]string{"critical", "warning", "info"}, r.Labels["severity"]) {
					t.Errorf("severity %q, want critical, warning or info", r.Labels["severity"])
				}
				for _, k := range []string{"summary", "description"} {
					if r.Annotations[k] == "" {
						t.Errorf("no %s annotation", k)
					}
				}
				url := r.Annotations["runbook_url"]
				anchor, ok := strings.CutPrefix(url, runbookURL)
				switch {
				case !ok:
					t.Errorf("runbook_url %q, want %s<section>", url, runbookURL)
				case anchor != strings.ToLower(r.Alert):
					t.Errorf("runbook_url %q points at #%s, want the alert's own section #%s", url, anchor, strings.ToLower(r.Alert))
				case !anchors[anchor]:
					t.Errorf("runbook_url %q: %s has no section #%s", url, runbook, anchor)
				}
			})
		}
	}
}

// githubAnchor is the anchor GitHub gives a Markdown heading.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}
