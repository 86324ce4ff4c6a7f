package main

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/example/memcached-operator/sync/memcached"
)

// metrics are the hook's Prometheus metrics. They live in a registry of
// their own, never the global one, so that each test server (and each run)
// counts only its own calls.
type metrics struct {
	registry *prometheus.Registry

	calls        *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	requestBytes *prometheus.HistogramVec
	children     *prometheus.HistogramVec
	invalidSpecs prometheus.Counter
	authFailures *prometheus.CounterVec
	inFlight     prometheus.Gauge
}

// newMetrics registers the hook's metrics, and the Go runtime's and the
// process's, in a new registry.
func newMetrics() *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{
		registry: reg,
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memcached_hook_calls_total",
			Help: "Hook calls answered, by hook and HTTP status code.",
		}, []string{"hook", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "memcached_hook_call_duration_seconds",
			Help: "Time from a hook call's headers to the end of its answer, by hook.",
			// Metacontroller gives up after 10 s by default.
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"hook"}),
		requestBytes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "memcached_hook_request_size_bytes",
			Help: "Request size (headers and stated body length), by hook. A 1,000-Pod sync request is 4 to 5 MB.",
			// 1 KiB to 64 MiB.
			Buckets: prometheus.ExponentialBuckets(1024, 4, 9),
		}, []string{"hook"}),
		children: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "memcached_hook_children_returned",
			Help:    "Children in each 200 answer, by hook.",
			Buckets: []float64{0, 1, 2, 3, 4, 5, 10, 20},
		}, []string{"hook"}),
		invalidSpecs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memcached_hook_invalid_specs_total",
			Help: "Sync answers that kept every child as it was because the Memcached's spec is invalid (Degraded, reason InvalidSpec).",
		}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memcached_hook_auth_failures_total",
			Help: "Hook calls refused with 401, by reason: missing or wrong credentials, or no verified client certificate.",
		}, []string{"reason"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "memcached_hook_calls_in_flight",
			Help: "Hook calls being answered now (waiting for a slot included).",
		}),
	}
	reg.MustRegister(m.calls, m.duration, m.requestBytes, m.children, m.invalidSpecs, m.authFailures, m.inFlight,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Every auth failure reason shows as 0 from the start, so that a rate
	// over it is defined before the first failure.
	for _, reason := range authFailureReasons {
		m.authFailures.WithLabelValues(reason)
	}
	return m
}

// handler serves the registry in Prometheus's text format.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// instrument counts every call to one hook with client_golang's own
// instrumentation: its status code, duration and request size, and the
// calls in flight. It sits outside authentication and the concurrency
// limit, so that 401s and 429s are counted too.
func (m *metrics) instrument(hook string) func(http.Handler) http.Handler {
	labels := prometheus.Labels{"hook": hook}
	return func(next http.Handler) http.Handler {
		return promhttp.InstrumentHandlerInFlight(m.inFlight,
			promhttp.InstrumentHandlerDuration(m.duration.MustCurryWith(labels),
				promhttp.InstrumentHandlerCounter(m.calls.MustCurryWith(labels),
					promhttp.InstrumentHandlerRequestSize(m.requestBytes.MustCurryWith(labels), next))))
	}
}

// observeSync records what a 200 sync or finalize answer holds.
func (m *metrics) observeSync(hook string, a *memcached.Answer) {
	m.children.WithLabelValues(hook).Observe(float64(len(a.Response.Children)))
	if a.Degraded == memcached.ReasonInvalidSpec {
		m.invalidSpecs.Inc()
	}
}
