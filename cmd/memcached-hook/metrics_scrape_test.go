package main

import (
	"bytes"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape GETs /metrics, checks that it is Prometheus's text format, and
// returns every sample keyed `name{label="value",...}` (labels sorted; a
// histogram gives name_count and name_sum).
func scrape(t *testing.T, client *http.Client, base string) map[string]float64 {
	t.Helper()
	res := do(t, client, http.MethodGet, base+"/metrics", "", nil)
	if res.status != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", res.status, res.body)
	}
	if mt, params, _ := mime.ParseMediaType(res.header.Get("Content-Type")); mt != "text/plain" || params["version"] != "0.0.4" {
		t.Errorf("GET /metrics Content-Type = %q, want Prometheus text format 0.0.4", res.header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(bytes.NewReader(res.body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v\n%s", err, res.body)
	}
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			labels := labelString(m.GetLabel())
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[name+labels] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[name+labels] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[name+"_count"+labels] = float64(m.GetHistogram().GetSampleCount())
				out[name+"_sum"+labels] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

func labelString(pairs []*dto.LabelPair) string {
	if len(pairs) == 0 {
		return ""
	}
	var parts []string
	for _, p := range pairs {
		parts = append(parts, fmt.Sprintf("%s=%q", p.GetName(), p.GetValue()))
	}
	slices.Sort(parts)
	return "{" + strings.Join(parts, ",") + "}"
}
