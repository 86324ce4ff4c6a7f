package main

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/example/memcached-operator/cmd/internal/program"
	"github.com/example/memcached-operator/cmd/memcached-agent/internal/confirm"
	"github.com/example/memcached-operator/cmd/memcached-agent/internal/handoff"
	"github.com/example/memcached-operator/cmd/memcached-agent/internal/pool"
	"github.com/example/memcached-operator/cmd/memcached-agent/internal/protocol"
	"github.com/example/memcached-operator/cmd/memcached-agent/internal/serverlist"
	"github.com/example/memcached-operator/sync/contract"
)

// metrics are the agent's Prometheus metrics, in a registry of their own
// (see program.Registry), so that each run counts only its own.
type metrics struct {
	registry *program.Registry

	version      prometheus.Gauge
	servers      prometheus.Gauge
	published    prometheus.Gauge
	refused      *prometheus.CounterVec
	connsOpen    prometheus.Gauge
	connsTotal   prometheus.Counter
	connsRefused prometheus.Counter
	commands     *prometheus.CounterVec
	followErrors *prometheus.CounterVec
	copies       *prometheus.CounterVec
	handedItems  prometheus.Counter
	handedBytes  prometheus.Counter
	copySeconds  prometheus.Histogram

	poolWrites      prometheus.Counter
	poolVersion     prometheus.Gauge
	poolSlots       prometheus.Gauge
	poolDown        prometheus.Gauge
	poolWritten     prometheus.Gauge
	poolRefused     *prometheus.CounterVec
	poolWriteErrors prometheus.Counter

	proxyLoaded         prometheus.Gauge
	proxyLoadedVersion  prometheus.Gauge
	proxyWatchErrors    prometheus.Counter
	proxyLinesRefused   prometheus.Counter
	proxyReportFailures prometheus.Counter
}

// newMetrics registers the agent's metrics, and the Go runtime's and the
// process's, in a new registry.
func newMetrics() *metrics {
	reg := program.NewRegistry()
	m := &metrics{
		registry: reg,
		version: reg.Gauge("memcached_agent_list_version",
			"Version of the server list served (status.slotTable.version); 0 before the first good list."),
		servers:   reg.Gauge("memcached_agent_list_servers", "Servers in the list served."),
		published: reg.Gauge("memcached_agent_list_published_timestamp_seconds", "Unix time at which the list served began to be served."),
		refused: reg.CounterVec("memcached_agent_lists_refused_total",
			"Server lists seen and not served (the one served before stays), by reason.", "reason"),
		connsOpen:    reg.Gauge("memcached_agent_connections_open", "Client connections open now."),
		connsTotal:   reg.Counter("memcached_agent_connections_total", "Client connections accepted."),
		connsRefused: reg.Counter("memcached_agent_connections_refused_total", "Client connections refused over --max-connections."),
		commands: reg.CounterVec("memcached_agent_commands_total",
			"Command lines read, by kind (config_get_cluster, get, gets, version, quit, unknown, bad_format, http, too_long, store, unserved).", "kind"),
		followErrors: reg.CounterVec("memcached_agent_follow_errors_total",
			"Failures to read the Memcached, by source: watch (a list or watch that failed, an expired watch included) or file.", "source"),
		copies: reg.CounterVec("memcached_agent_handoff_copies_total",
			"Hand-off copies this agent ran, by result: done, failed, or cancelled (the entry left the status, the agent stopped, or the lock went to the other agent).", "result"),
		handedItems: reg.Counter("memcached_agent_handoff_items_total", "Items handed on (stored on their destination) by this agent's copies."),
		handedBytes: reg.Counter("memcached_agent_handoff_bytes_total", "Bytes of values handed on by this agent's copies."),
		copySeconds: reg.Histogram("memcached_agent_handoff_copy_seconds",
			"How long this agent's copies took, from taking the source's lock to their end.", prometheus.ExponentialBuckets(0.25, 2, 14)),
		poolWrites: reg.Counter("memcached_agent_pool_writes_total", "Pool files written (--pool-file): one per change of the pool."),
		poolVersion: reg.Gauge("memcached_agent_pool_version",
			"Version of the slot table the pool file holds (status.slotTable.version); 0 before the first pool."),
		poolSlots: reg.Gauge("memcached_agent_pool_slots", "Slots (backends) in the pool file, placeholders included."),
		poolDown: reg.Gauge("memcached_agent_pool_down_slots",
			"Slots in the pool file with no Serving Pod: placeholders the proxy answers with an error."),
		poolWritten: reg.Gauge("memcached_agent_pool_written_timestamp_seconds", "Unix time at which the pool file took the pool it holds."),
		poolRefused: reg.CounterVec("memcached_agent_pool_refused_total",
			"Slot tables seen and not written into the pool file (it keeps the last pool), by reason.", "reason"),
		poolWriteErrors: reg.Counter("memcached_agent_pool_write_errors_total",
			"Writes of the pool file that failed (each is tried again every second)."),
		proxyLoaded: reg.Gauge("memcached_agent_proxy_loaded",
			"1 while the proxy beside the agent says it routes by a pool (--proxy-addr), 0 before and once it has said nothing for 5 s."),
		proxyLoadedVersion: reg.Gauge("memcached_agent_proxy_loaded_version",
			"Highest slot table version of the pool the proxy says it routes by (its zones' highest, as the pool file's version line); 0 while it says none, or none it knows."),
		proxyWatchErrors: reg.Counter("memcached_agent_proxy_watch_errors_total",
			"Connections to the proxy's user log (watch proxyuser) that could not be made, or ended (each is made again)."),
		proxyLinesRefused: reg.Counter("memcached_agent_proxy_announcements_refused_total",
			"Lines of the proxy's user log that claimed to be an announcement of the pool it loaded and were not taken (cut short, malformed, too long)."),
		proxyReportFailures: reg.Counter("memcached_agent_proxy_report_errors_total",
			"Writes of the proxy's report into ConfigMap NAME-agent (or --report-file) that failed (each is tried again)."),
	}
	// Every label value shows as 0 from the start, so that a rate over it
	// is defined before the first event.
	for _, r := range serverlist.Reasons {
		m.refused.WithLabelValues(r)
	}
	for _, k := range protocol.Kinds() {
		m.commands.WithLabelValues(k.String())
	}
	for _, s := range []string{"watch", "file"} {
		m.followErrors.WithLabelValues(s)
	}
	for _, r := range handoff.Results {
		m.copies.WithLabelValues(r)
	}
	for _, r := range pool.Reasons {
		m.poolRefused.WithLabelValues(r)
	}
	return m
}

// Published records a new list (serverlist.Observer).
func (m *metrics) Published(s *serverlist.Snapshot) {
	m.version.Set(float64(s.Version))
	m.servers.Set(float64(len(s.Nodes)))
	m.published.Set(float64(s.Published.UnixNano()) / 1e9)
}

// Refused counts a list refused (serverlist.Observer).
func (m *metrics) Refused(reason string) { m.refused.WithLabelValues(reason).Inc() }

// The protocol.Observer methods.
func (m *metrics) ConnOpened()               { m.connsOpen.Inc(); m.connsTotal.Inc() }
func (m *metrics) ConnClosed()               { m.connsOpen.Dec() }
func (m *metrics) ConnRefused()              { m.connsRefused.Inc() }
func (m *metrics) Command(k protocol.Kind)   { m.commands.WithLabelValues(k.String()).Inc() }
func (m *metrics) followError(source string) { m.followErrors.WithLabelValues(source).Inc() }

// Handed counts items and bytes handed on (handoff.Observer).
func (m *metrics) Handed(items, bytes int64) {
	m.handedItems.Add(float64(items))
	m.handedBytes.Add(float64(bytes))
}

// Ended counts a copy that ended (handoff.Observer).
func (m *metrics) Ended(result string, d time.Duration) {
	m.copies.WithLabelValues(result).Inc()
	m.copySeconds.Observe(d.Seconds())
}

// PoolWritten records the pool the file holds (pool.Observer).
func (m *metrics) PoolWritten(p *contract.Pool, wrote bool) {
	if wrote {
		m.poolWrites.Inc()
	}
	m.poolVersion.Set(float64(p.Version))
	m.poolSlots.Set(float64(p.Slots))
	m.poolDown.Set(float64(p.Down))
	m.poolWritten.SetToCurrentTime()
}

// PoolRefused counts a slot table not written (pool.Observer).
func (m *metrics) PoolRefused(reason string) { m.poolRefused.WithLabelValues(reason).Inc() }

// PoolWriteFailed counts a failed write (pool.Observer).
func (m *metrics) PoolWriteFailed() { m.poolWriteErrors.Inc() }

// ProxyLoaded records what the proxy says it routes by (confirm.Observer).
func (m *metrics) ProxyLoaded(l *confirm.Loaded) {
	if l == nil {
		m.proxyLoaded.Set(0)
		m.proxyLoadedVersion.Set(0)
		return
	}
	var v int64
	for _, t := range l.Tables {
		v = max(v, t.Version)
	}
	m.proxyLoaded.Set(1)
	m.proxyLoadedVersion.Set(float64(v))
}

// ProxyWatchFailed counts a watch connection that failed or ended
// (confirm.Observer).
func (m *metrics) ProxyWatchFailed() { m.proxyWatchErrors.Inc() }

// ProxyLineRefused counts an announcement not taken (confirm.Observer).
func (m *metrics) ProxyLineRefused() { m.proxyLinesRefused.Inc() }

// proxyReportFailed counts a report that could not be written.
func (m *metrics) proxyReportFailed() { m.proxyReportFailures.Inc() }
