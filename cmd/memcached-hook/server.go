package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/sync/metacontroller"
)

// serverOptions are what the handler needs from outside: limits, a clock,
// the readiness switch that shutdown flips, metrics and credentials.
type serverOptions struct {
	maxRequestBytes int64
	now             func() time.Time
	ready           func() bool
	// maxConcurrentCalls bounds the hook calls worked on at once (0: no
	// bound); maxQueuedCalls more may wait, each up to queueTimeout, for a
	// slot. Past either, a call gets 429.
	maxConcurrentCalls int
	maxQueuedCalls     int
	queueTimeout       time.Duration
	// metrics counts calls; nil gets a registry of its own.
	metrics *metrics
	// auth checks every hook call's credentials; nil lets every call in.
	auth *authenticator
	// logic is what the hook's settings tell the logic (the agent's
	// image).
	logic memcached.Options
}

// newServer returns the hook's whole HTTP surface.
func newServer(logger *slog.Logger, opts serverOptions) http.Handler {
	r := chi.NewRouter()
	routes(r, logger, opts)
	return r
}

// routes is the hook's HTTP surface in one place.
//
// Every request is logged (hook calls at info, the rest at debug). A hook
// call then goes through, in order: JSON errors (any error answer, whoever
// writes it, is JSON); metrics (so that refused calls are counted); authentication (so
// that a caller without credentials takes no slot); the concurrency limit;
// panic recovery (inside the metrics, so that a panic counts as the 500 it
// is answered with); the body size limit; then the hook. /healthz, /readyz
// and /metrics need no credentials: kubelet and Prometheus carry none.
func routes(r chi.Router, logger *slog.Logger, opts serverOptions) {
	if opts.metrics == nil {
		opts.metrics = newMetrics()
	}
	r.Use(middleware.RequestLogger(callLogger{logger}), closeWhenNotReady(opts.ready))
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such path %q: the hooks are POST /customize, /sync and /finalize", r.URL.Path))
	})
	router := r
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost} {
			if router.Match(chi.NewRouteContext(), m, r.URL.Path) {
				w.Header().Add("Allow", m)
			}
		}
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s is not allowed on %s", r.Method, r.URL.Path))
	})
	hook := func(name string) chi.Router {
		h := r.With(jsonErrors, readBeforeRefusing(opts.maxRequestBytes), opts.metrics.instrument(name))
		if opts.auth != nil {
			h = h.With(opts.auth.middleware)
		}
		if opts.maxConcurrentCalls > 0 {
			h = h.With(middleware.ThrottleWithOpts(middleware.ThrottleOpts{
				Limit:          opts.maxConcurrentCalls,
				BacklogLimit:   opts.maxQueuedCalls,
				BacklogTimeout: opts.queueTimeout,
				// Metacontroller takes a 429 with Retry-After as
				// "requeue this parent then", with no SyncError event and
				// no growing backoff.
				RetryAfterFn: func(bool) time.Duration { return time.Second },
			}))
		}
		return h.With(middleware.Recoverer, middleware.RequestSize(opts.maxRequestBytes))
	}
	hook("customize").Post("/customize", handle(opts, metacontroller.DecodeCustomizeRequest, customize))
	hook("sync").Post("/sync", handle(opts, metacontroller.DecodeSyncRequest, syncWith(memcached.Sync, opts)))
	hook("finalize").Post("/finalize", handle(opts, metacontroller.DecodeSyncRequest, syncWith(memcached.Finalize, opts)))
	r.Method(http.MethodGet, "/metrics", opts.metrics.registry.Handler())
	r.Get("/healthz", handleHealthz())
	r.Head("/healthz", handleHealthz())
	r.Get("/readyz", handleReadyz(opts.ready))
	r.Head("/readyz", handleReadyz(opts.ready))
}

// answerFunc answers one decoded hook request at now, noting on c what the
// call log should say of it.
type answerFunc[Req any] func(req *Req, now time.Time, c *callLog) (any, error)

// handle is the one skeleton of every hook: read and decode the body,
// answer it, encode the answer, and fill in the call's log line. Every
// failure is an error answer naming the problem, never a 200.
func handle[Req any](opts serverOptions, decode func([]byte) (*Req, error), answer answerFunc[Req]) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c := logOf(r)
		body, err := readBody(r, opts.maxRequestBytes)
		if err != nil {
			fail(w, c, err)
			return
		}
		req, err := decode(body)
		if err != nil {
			fail(w, c, err)
			return
		}
		resp, err := answer(req, opts.now(), c)
		if err != nil {
			fail(w, c, err)
			return
		}
		if err := encode(w, r, resp); err != nil {
			fail(w, c, err)
		}
	}
}

// customize answers the customize hook.
func customize(req *metacontroller.CustomizeRequest, _ time.Time, c *callLog) (any, error) {
	c.parent(req.Parent)
	return memcached.Customize(req)
}

// syncWith answers the sync or finalize hook with f, and counts what its
// answer decided.
func syncWith(f func(*metacontroller.SyncRequest, time.Time, memcached.Options) (*memcached.Answer, error), opts serverOptions) answerFunc[metacontroller.SyncRequest] {
	return func(req *metacontroller.SyncRequest, now time.Time, c *callLog) (any, error) {
		c.parent(req.Parent)
		for _, objs := range req.Children {
			c.children += len(objs)
		}
		c.pods = len(req.Pods)
		a, err := f(req, now, opts.logic)
		if err != nil {
			return nil, err
		}
		opts.metrics.observeSync(c.hook, req.Parent, now, a)
		return a.Response, nil
	}
}

// httpError is a failed call: status and msg are what the client sees, err
// (if any) is what is logged beside them.
type httpError struct {
	status int
	msg    string
	err    error
}

func (e *httpError) Error() string {
	if e.err != nil {
		return e.msg + ": " + e.err.Error()
	}
	return e.msg
}

// fail answers a failed call and notes why for its log line. A request the
// hook cannot read or answer is the client's (400); any other error is the
// hook's own fault: 500, details only in the log.
func fail(w http.ResponseWriter, c *callLog, err error) {
	var he *httpError
	var re *metacontroller.Error
	switch {
	case errors.As(err, &he):
	case errors.As(err, &re):
		he = &httpError{status: http.StatusBadRequest, msg: re.Error()}
	default:
		he = &httpError{status: http.StatusInternalServerError, msg: "internal error", err: err}
	}
	c.err = he
	writeError(w, he.status, he.msg)
}

// readBody checks the request's media type and reads its whole body. A body
// that states its length (Metacontroller's always does) is read into one
// buffer of that size: io.ReadAll's doubling would allocate about twice the
// body, which for a 1,000-Pod sync is 4 to 5 MB. A stated length over limit
// is refused before anything is allocated; middleware.RequestSize bounds a
// body that states none.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return nil, &httpError{status: http.StatusUnsupportedMediaType, msg: fmt.Sprintf("Content-Type is %q, want application/json", ct)}
	}
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	var body []byte
	var err error
	if n := r.ContentLength; n > 0 {
		body = make([]byte, n)
		// net/http ends the body at the stated length, and fails a
		// shorter one.
		_, err = io.ReadFull(r.Body, body)
	} else {
		body, err = io.ReadAll(r.Body)
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, tooLarge(tooBig.Limit)
	case err != nil:
		return nil, &httpError{status: http.StatusBadRequest, msg: "reading request body", err: err}
	case len(bytes.TrimSpace(body)) == 0:
		return nil, &httpError{status: http.StatusBadRequest, msg: "request body is empty"}
	}
	return body, nil
}

// tooLarge is the 413 of a body over limit bytes.
func tooLarge(limit int64) *httpError {
	return &httpError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("request body is larger than %d bytes (--max-request-bytes)", limit)}
}

// encode writes v as a 200 JSON answer with its ETag, or a 304 with no body
// when the request's If-None-Match names that ETag (see notModified). It
// marshals first, so a failure is a 500, never a truncated 200.
func encode(w http.ResponseWriter, r *http.Request, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding answer: %w", err)
	}
	b = append(b, '\n')
	etag := etagOf(b)
	w.Header().Set("ETag", etag)
	if notModified(r, etag) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	w.Write(b)
	return nil
}

// writeError answers {"error": msg} with status.
func writeError(w http.ResponseWriter, status int, msg string) {
	b, _ := json.Marshal(map[string]string{"error": msg})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func handleHealthz() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	}
}

// handleReadyz fails once shutdown has begun, so that endpoints drop the Pod
// while it still answers the calls already routed to it.
func handleReadyz(ready func() bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "shutting down\n")
			return
		}
		io.WriteString(w, "ok\n")
	}
}
