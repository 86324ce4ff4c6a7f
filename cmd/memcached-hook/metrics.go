package main

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/example/memcached-operator/cmd/internal/program"
	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/sync/metacontroller"
)

// metrics are the hook's Prometheus metrics, in a registry of their own
// (see program.Registry), so that each test server (and each run) counts
// only its own calls.
type metrics struct {
	registry *program.Registry

	calls        *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	requestBytes *prometheus.HistogramVec
	children     *prometheus.HistogramVec
	invalidSpecs prometheus.Counter
	authFailures *prometheus.CounterVec
	inFlight     prometheus.Gauge
	// answered is memcached_hook_answer_timestamp_seconds; mu guards it
	// with reasons, the reason each Memcached's series carries now.
	mu       sync.Mutex
	answered *prometheus.GaugeVec
	reasons  map[memcachedKey]string
	// threads is memcached_hook_memcached_threads, kept beside answered
	// (and removed with it) under mu.
	threads *prometheus.GaugeVec
}

// newMetrics registers the hook's metrics, and the Go runtime's and the
// process's, in a new registry.
func newMetrics() *metrics {
	reg := program.NewRegistry()
	m := &metrics{
		registry: reg,
		calls:    reg.CounterVec("memcached_hook_calls_total", "Hook calls answered, by hook and HTTP status code.", "hook", "code"),
		duration: reg.HistogramVec("memcached_hook_call_duration_seconds", "Time from a hook call's headers to the end of its answer, by hook.",
			// Metacontroller gives up after 10 s by default.
			[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}, "hook"),
		requestBytes: reg.HistogramVec("memcached_hook_request_size_bytes", "Request size (headers and stated body length), by hook. A 1,000-Pod sync request is 4 to 5 MB.",
			// 1 KiB to 64 MiB.
			prometheus.ExponentialBuckets(1024, 4, 9), "hook"),
		children: reg.HistogramVec("memcached_hook_children_returned", "Children in each 200 answer, by hook.", []float64{0, 1, 2, 3, 4, 5, 10, 20}, "hook"),
		invalidSpecs: reg.Counter("memcached_hook_invalid_specs_total",
			"Sync answers that kept every child as it was because the Memcached's spec is invalid (Degraded, reason InvalidSpec)."),
		authFailures: reg.CounterVec("memcached_hook_auth_failures_total",
			"Hook calls refused with 401, by reason: missing or wrong credentials, or no verified client certificate.", "reason"),
		inFlight: reg.Gauge("memcached_hook_calls_in_flight", "Hook calls being answered now (waiting for a slot included)."),
		answered: reg.GaugeVec("memcached_hook_answer_timestamp_seconds",
			"Unix time of this hook's last sync answer for a Memcached, with the reason of the Degraded condition it answered (AsExpected when not Degraded). "+
				"One series per Memcached this process answered; removed when it answers the Memcached's finalize.",
			"namespace", "memcached", "reason"),
		reasons: map[memcachedKey]string{},
		// memcached_exporter shows -c (memcached_max_connections) but not
		// -t, and memcached refuses clients at a count that depends on
		// both (v1alpha1.MinConnections): the alerts read -t here.
		threads: reg.GaugeVec("memcached_hook_memcached_threads",
			"Worker threads (-t) of the memcached Pods this hook's last valid sync answer for a Memcached asks for. "+
				"One series per Memcached this process answered; removed when it answers the Memcached's finalize.",
			"namespace", "memcached"),
	}
	// Every auth failure reason shows as 0 from the start, so that a rate
	// over it is defined before the first failure.
	for _, reason := range authFailureReasons {
		m.authFailures.WithLabelValues(reason)
	}
	return m
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

// memcachedKey names a Memcached: its namespace and name.
type memcachedKey struct{ namespace, name string }

// observeSync records what a 200 sync or finalize answer for the Memcached
// p, answered at now, holds.
func (m *metrics) observeSync(hook string, p *metacontroller.Parent, now time.Time, a *memcached.Answer) {
	m.children.WithLabelValues(hook).Observe(float64(len(a.Response.Children)))
	if a.Degraded == memcached.ReasonInvalidSpec {
		m.invalidSpecs.Inc()
	}
	k := memcachedKey{p.Namespace, p.Name}
	m.answeredFor(k, hook == "finalize", now, a.Degraded)
	// An invalid spec changes no Pod: the threads the Pods run stay the
	// last valid answer's.
	if hook != "finalize" && a.Degraded != memcached.ReasonInvalidSpec {
		s := p.Spec.DeepCopy()
		s.Default()
		m.threadsFor(k, *s.Memcached.Threads)
	}
}

// threadsFor sets memcached_hook_memcached_threads for the Memcached k.
func (m *metrics) threadsFor(k memcachedKey, threads int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.threads.WithLabelValues(k.namespace, k.name).Set(float64(threads))
}

// answeredFor keeps one memcached_hook_answer_timestamp_seconds series per
// Memcached: the last answer's time and Degraded reason, the series of its
// previous reason removed; a finalize removes it, so that the series stay
// as many as the Memcacheds there are. Two hook replicas each keep the
// series of the Memcacheds they answered: the latest time across them is
// the status Metacontroller wrote last (the alert rule compares them).
func (m *metrics) answeredFor(k memcachedKey, finalize bool, now time.Time, degraded memcached.Reason) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.reasons[k]; ok && (finalize || old != string(degraded)) {
		m.answered.DeleteLabelValues(k.namespace, k.name, old)
		delete(m.reasons, k)
	}
	if finalize {
		m.threads.DeleteLabelValues(k.namespace, k.name)
		return
	}
	m.reasons[k] = string(degraded)
	m.answered.WithLabelValues(k.namespace, k.name, string(degraded)).Set(float64(now.UnixNano()) / 1e9)
}
