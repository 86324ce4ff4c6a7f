package main

import (
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/example/memcached-operator/sync"
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
			Help: "Request body bytes read, by hook. A 1,000-Pod sync request is 4 to 5 MB.",
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

// instrument counts every call to one hook: its status code, duration and
// request size. It sits outside authentication and the concurrency limit,
// so that 401s and 429s are counted too.
func (m *metrics) instrument(hook string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			m.inFlight.Inc()
			sw := &statusWriter{ResponseWriter: w}
			body := &countingReader{ReadCloser: r.Body}
			r.Body = body
			defer func() {
				m.inFlight.Dec()
				// A handler that wrote nothing panicked: recoverPanics,
				// outside this, answers 500.
				code := http.StatusInternalServerError
				if sw.status != 0 {
					code = sw.status
				}
				m.calls.WithLabelValues(hook, strconv.Itoa(code)).Inc()
				m.duration.WithLabelValues(hook).Observe(time.Since(start).Seconds())
				if body.n > 0 {
					m.requestBytes.WithLabelValues(hook).Observe(float64(body.n))
				}
			}()
			next.ServeHTTP(sw, r)
		})
	}
}

// observeSync records what a 200 sync or finalize answer holds.
func (m *metrics) observeSync(hook string, resp *sync.Response) {
	m.children.WithLabelValues(hook).Observe(float64(len(resp.Children)))
	if resp.Status == nil {
		return
	}
	for _, c := range resp.Status.Conditions {
		if c.Type == sync.ConditionDegraded && c.Reason == "InvalidSpec" {
			m.invalidSpecs.Inc()
		}
	}
}

// statusWriter remembers the status code of the answer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the real writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// countingReader counts the request body bytes read.
type countingReader struct {
	io.ReadCloser
	n int64
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.n += int64(n)
	return n, err
}
