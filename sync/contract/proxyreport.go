package contract

import (
	"encoding/json"
	"fmt"
	"strings"
)

// A proxy confirms the pool it routes by (#40, "clients confirm"): the
// agent beside each proxy asks its proxy which pool it has loaded, and
// reports it under ProxyReportKey in ConfigMap NAME-agent, the ConfigMap
// the hand-offs are reported in. The hook reads every live proxy Pod's
// report and writes, in each slot table, the highest version every proxy
// has loaded (v1alpha1.SlotTable.ProxyVersion); a copy waits for it before
// it takes a slot's clients as moved.

// proxyReportPrefix starts a proxy's report key. It starts with
// reportKeySep, which is in no Pod name, so no hand-off's key
// (ParseReportKey) is ever one.
const proxyReportPrefix = reportKeySep + "proxy" + reportKeySep

// ProxyReportKey is the report key of the proxy Pod pod.
func ProxyReportKey(pod string) string { return proxyReportPrefix + pod }

// ParseProxyReportKey reads a key ProxyReportKey made: the proxy Pod's
// name, and whether it is one.
func ParseProxyReportKey(key string) (string, bool) {
	pod, ok := strings.CutPrefix(key, proxyReportPrefix)
	return pod, ok && pod != ""
}

// ProxyReport is what a proxy's agent reports: for each zone of the pool
// its proxy has loaded ("" without zones), the version of the zone's slot
// table that pool was written from. Loaded is empty while the proxy has
// loaded no pool.
//
// A version names the served list (the Serving slots' Pods and addresses,
// in order), not every byte of the pool: a table that only drops trailing
// slots that are down keeps its version. Every switch a copy waits for
// (a slot served by a new Pod, a Removing slot gone, Adding slots listed,
// a refilled slot up) changes the served list, so its version rises.
type ProxyReport struct {
	Loaded map[string]int64 `json:"loaded"`
}

// DecodeProxyReport reads a report; an error names what is wrong.
func DecodeProxyReport(raw string) (ProxyReport, error) {
	var r ProxyReport
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return ProxyReport{}, fmt.Errorf("proxy report: %w", err)
	}
	for zone, v := range r.Loaded {
		if v < 0 {
			return ProxyReport{}, fmt.Errorf("proxy report: zone %q's version is %d, negative", zone, v)
		}
	}
	return r, nil
}

// Encode is the report as the agent writes it (map keys sorted, so the
// same report is the same bytes).
func (r ProxyReport) Encode() string {
	if r.Loaded == nil {
		r.Loaded = map[string]int64{}
	}
	b, _ := json.Marshal(r)
	return string(b)
}
