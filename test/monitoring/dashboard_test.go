package monitoring

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const dashboardFile = "../../manifests/components/dashboard/memcached.json"

// dashboard is what the tests read of the Grafana dashboard's JSON.
type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type panel struct {
	Title      string `json:"title"`
	Type       string `json:"type"`
	Datasource struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr       string `json:"expr"`
		Datasource struct {
			UID string `json:"uid"`
		} `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// panels are the dashboard's panels, those inside rows included, rows not.
func (d dashboard) panels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			out = append(out, p)
		}
	}
	walk(d.Panels)
	return out
}

// labelValues is a query variable's label_values(EXPR, label).
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*[A-Za-z_]+\)$`)

// expression is one PromQL expression of the dashboard, and where it is.
type expression struct{ where, expr string }

// expressions are every PromQL expression of the dashboard: each panel's
// targets', and the query variables' series selectors.
func (d dashboard) expressions(t *testing.T) []expression {
	t.Helper()
	var out []expression
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("variable %s: query %s: %v", v.Name, v.Query, err)
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			t.Fatalf("variable %s: query %q is not label_values(SELECTOR, LABEL)", v.Name, q.Query)
		}
		out = append(out, expression{"variable " + v.Name, m[1]})
	}
	for _, p := range d.panels() {
		for i, tg := range p.Targets {
			out = append(out, expression{fmt.Sprintf("panel %q target %d", p.Title, i), tg.Expr})
		}
	}
	return out
}

// grafanaValues are what Grafana puts in place of the variables before
// Prometheus reads an expression, the Memcached cache/memcached chosen.
func grafanaValues(memcached string) *strings.Replacer {
	return strings.NewReplacer("$__rate_interval", "1m", "$__range", "1h", "$namespace", promNamespace, "$memcached", memcached)
}

// readsExtstore says whether an expression reads memcached_extstore_
// series, which the exporter shows only for a memcached with extstore on
// (spec.extstore).
func readsExtstore(expr string) bool {
	return slices.ContainsFunc(metricNames(expr), func(n string) bool { return strings.HasPrefix(n, "memcached_extstore_") })
}

// TestDashboardShape checks what Grafana's sidecar and a user need: a
// title and a fixed uid, the variables datasource, namespace and
// memcached, every panel on the datasource variable with at least one
// query, and every query of a Memcached's series narrowed to the chosen
// namespace and Memcached (the hook's calls, shared by every Memcached,
// are not).
func TestDashboardShape(t *testing.T) {
	d := readDashboard(t)
	if d.Title == "" || d.UID == "" {
		t.Errorf("title %q, uid %q: want both", d.Title, d.UID)
	}
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name+":"+v.Type)
	}
	for _, want := range []string{"datasource:datasource", "namespace:query", "memcached:query"} {
		if !slices.Contains(vars, want) {
			t.Errorf("variables %q, want %s among them", vars, want)
		}
	}
	for _, p := range d.panels() {
		t.Run(p.Title, func(t *testing.T) {
			if p.Datasource.UID != "${datasource}" {
				t.Errorf("datasource %q, want ${datasource}", p.Datasource.UID)
			}
			if len(p.Targets) == 0 {
				t.Errorf("no query")
			}
			for _, tg := range p.Targets {
				if tg.Datasource.UID != "${datasource}" {
					t.Errorf("query %q: datasource %q, want ${datasource}", tg.Expr, tg.Datasource.UID)
				}
				shared := !slices.ContainsFunc(metricNames(tg.Expr), func(n string) bool {
					return !strings.HasPrefix(n, "memcached_hook_") || n == "memcached_hook_answer_timestamp_seconds"
				})
				if !shared && (!strings.Contains(tg.Expr, `namespace="$namespace"`) || !strings.Contains(tg.Expr, `memcached="$memcached"`)) {
					t.Errorf("query %q: not narrowed to namespace=\"$namespace\", memcached=\"$memcached\"", tg.Expr)
				}
			}
		})
	}
}

// TestDashboardExpressionsParse runs promtool check rules on a rule file
// holding each expression of the dashboard, its variables replaced, as a
// recording rule: each must parse and type-check as Prometheus reads it.
func TestDashboardExpressionsParse(t *testing.T) {
	exprs := readDashboard(t).expressions(t)
	var rules []rule
	for i, e := range exprs {
		rules = append(rules, rule{Record: fmt.Sprintf("dashboard:expression_%d", i), Expr: grafanaValues(promMemcached).Replace(e.expr)})
	}
	dir := t.TempDir()
	writeRuleFile(t, dir, []group{{Name: "dashboard", Rules: rules}})
	out := promtool(t, dir, "check", "rules", "rules.yaml")
	if want := fmt.Sprintf("SUCCESS: %d rules found", len(rules)); !strings.Contains(out, want) {
		t.Errorf("promtool check rules: %s, want %q", out, want)
	}
}

// TestDashboardMetricsExist checks that every metric a panel or a variable
// reads is one the exporter, the agent or the hook really shows.
func TestDashboardMetricsExist(t *testing.T) {
	exposed := exposedNames(t)
	for _, e := range readDashboard(t).expressions(t) {
		for _, n := range metricNames(e.expr) {
			if !exposed[n] {
				t.Errorf("%s reads %s, which neither memcached_exporter, the agent nor the hook shows (testdata/exposed, or the exporter's scrape)", e.where, n)
			}
		}
	}
}

// TestRunbookPanelsExist checks that every panel the runbook sends the
// reader to is one of the dashboard's.
func TestRunbookPanelsExist(t *testing.T) {
	data, err := os.ReadFile(runbook)
	if err != nil {
		t.Fatal(err)
	}
	var titles []string
	for _, p := range readDashboard(t).panels() {
		titles = append(titles, p.Title)
	}
	refs := regexp.MustCompile(`panels? "([^"]+)"(?: and "([^"]+)")?`).FindAllStringSubmatch(strings.ReplaceAll(string(data), "\n", " "), -1)
	if len(refs) == 0 {
		t.Fatalf("%s names no panel", runbook)
	}
	for _, m := range refs {
		for _, title := range m[1:] {
			if title != "" && !slices.Contains(titles, title) {
				t.Errorf("%s names the panel %q, which the dashboard does not have (it has %q)", runbook, title, titles)
			}
		}
	}
}
