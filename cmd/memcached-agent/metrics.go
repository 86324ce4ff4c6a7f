package main

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/example/memcached-operator/cmd/memcached-agent/internal/handoff"
	"github.com/example/memcached-operator/cmd/memcached-agent/internal/pool"
	"github.com/example/memcached-operator/cmd/memcached-agent/internal/protocol"
	"github.com/example/memcached-operator/cmd/memcached-agent/internal/serverlist"
	"github.com/example/memcached-operator/sync/contract"
)

// metrics are the agent's Prometheus metrics, in a registry of their own
// (never the global one), so that each run counts only its own.
type metrics struct {
	registry *prometheus.Registry

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
}

func newMetrics() *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{
		registry: reg,
		version: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "memcached_agent_list_version",
			Help: "Version of the server list served (status.slotTable.version); 0 before the first good list.",
		}),
		servers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "memcached_agent_list_servers",
			Help: "Servers in the list served.",
		}),
		published: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "memcached_agent_list_published_timestamp_seconds",
			Help: "Unix time at which the list served began to be served.",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memcached_agent_lists_refused_total",
			Help: "Server lists seen and not served (the one served before stays), by reason.",
		}, []string{"reason"}),
		connsOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "memcached_agent_connections_open",
			Help: "Client connections open now.",
		}),
		connsTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memcached_agent_connections_total",
			Help: "Client connections accepted.",
		}),
		connsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memcached_agent_connections_refused_total",
			Help: "Client connections refused over --max-connections.",
		}),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memcached_agent_commands_total",
			Help: "Command lines read, by kind (config_get_cluster, get, gets, version, quit, unknown, bad_format, http, too_long, store, unserved).",
		}, []string{"kind"}),
		followErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memcached_agent_follow_errors_total",
			Help: "Failures to read the Memcached, by source: watch (a list or watch that failed, an expired watch included) or file.",
		}, []string{"source"}),
		copies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memcached_agent_handoff_copies_total",
			Help: "Hand-off copies this agent ran, by result: done, failed, or cancelled (the entry left the status, the agent stopped, or the lock went to the other agent).",
		}, []string{"result"}),
		handedItems: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memcached_agent_handoff_items_total",
			Help: "Items handed on (stored on their destination) by this agent's copies.",
		}),
		handedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memcached_agent_handoff_bytes_total",
			Help: "Bytes of values handed on by this agent's copies.",
		}),
		copySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "memcached_agent_handoff_copy_seconds",
			Help:    "How long this agent's copies took, from taking the source's lock to their end.",
			Buckets: prometheus.ExponentialBuckets(0.25, 2, 14),
		}),
		poolWrites: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memcached_agent_pool_writes_total",
			Help: "Pool files written (--pool-file): one per change of the pool.",
		}),
		poolVersion: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "memcached_agent_pool_version",
			Help: "Version of the slot table the pool file holds (status.slotTable.version); 0 before the first pool.",
		}),
		poolSlots: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "memcached_agent_pool_slots",
			Help: "Slots (backends) in the pool file, placeholders included.",
		}),
		poolDown: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "memcached_agent_pool_down_slots",
			Help: "Slots in the pool file with no Serving Pod: placeholders the proxy answers with an error.",
		}),
		poolWritten: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "memcached_agent_pool_written_timestamp_seconds",
			Help: "Unix time at which the pool file took the pool it holds.",
		}),
		poolRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memcached_agent_pool_refused_total",
			Help: "Slot tables seen and not written into the pool file (it keeps the last pool), by reason.",
		}, []string{"reason"}),
		poolWriteErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memcached_agent_pool_write_errors_total",
			Help: "Writes of the pool file that failed (each is tried again every second).",
		}),
	}
	reg.MustRegister(m.version, m.servers, m.published, m.refused, m.connsOpen, m.connsTotal, m.connsRefused, m.commands, m.followErrors,
		m.copies, m.handedItems, m.handedBytes, m.copySeconds,
		m.poolWrites, m.poolVersion, m.poolSlots, m.poolDown, m.poolWritten, m.poolRefused, m.poolWriteErrors,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
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

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
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
