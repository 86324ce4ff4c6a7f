package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/example/memcached-operator/sync"
)

// serverOptions are what the handler needs from outside: limits, a clock,
// the readiness switch that shutdown flips, metrics and credentials.
type serverOptions struct {
	maxRequestBytes int64
	now             func() time.Time
	ready           func() bool
	// maxConcurrentCalls bounds the hook calls worked on at once (0: no
	// bound); a call waits up to queueTimeout for a slot, then gets 429.
	maxConcurrentCalls int
	queueTimeout       time.Duration
	// metrics counts calls; nil gets a registry of its own.
	metrics *metrics
	// auth checks every hook call's credentials; nil lets every call in.
	auth *authenticator
}

// newServer returns the hook's whole HTTP surface.
func newServer(logger *slog.Logger, opts serverOptions) http.Handler {
	r := chi.NewRouter()
	routes(r, logger, opts)
	return r
}

// routes is the hook's HTTP surface in one place.
//
// Every hook call goes through, in order: panic recovery; metrics (so that
// refused calls are counted); authentication (so that a caller without
// credentials takes no slot); the concurrency limit; then the handler.
// /healthz, /readyz and /metrics need no credentials: kubelet and
// Prometheus carry none.
func routes(r chi.Router, logger *slog.Logger, opts serverOptions) {
	if opts.metrics == nil {
		opts.metrics = newMetrics()
	}
	r.Use(recoverPanics(logger), closeWhenNotReady(opts.ready))
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &httpError{status: http.StatusNotFound, msg: fmt.Sprintf("no such path %q: the hooks are POST /customize, /sync and /finalize", r.URL.Path)})
	})
	router := r
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost} {
			if router.Match(chi.NewRouteContext(), m, r.URL.Path) {
				w.Header().Add("Allow", m)
			}
		}
		writeError(w, &httpError{status: http.StatusMethodNotAllowed, msg: fmt.Sprintf("method %s is not allowed on %s", r.Method, r.URL.Path)})
	})
	hook := func(name string) chi.Router {
		h := r.With(opts.metrics.instrument(name))
		if opts.auth != nil {
			h = h.With(opts.auth.middleware)
		}
		if opts.maxConcurrentCalls > 0 {
			h = h.With(limitConcurrency(opts.maxConcurrentCalls, opts.queueTimeout))
		}
		return h
	}
	hook("customize").Post("/customize", handleCustomize(logger, opts))
	hook("sync").Post("/sync", handleSync(logger, opts, "sync"))
	hook("finalize").Post("/finalize", handleSync(logger, opts, "finalize"))
	r.Method(http.MethodGet, "/metrics", opts.metrics.handler())
	r.Get("/healthz", handleHealthz())
	r.Head("/healthz", handleHealthz())
	r.Get("/readyz", handleReadyz(opts.ready))
	r.Head("/readyz", handleReadyz(opts.ready))
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

// callLog gathers what one hook call's log line says.
type callLog struct {
	hook       string
	namespace  string
	name       string
	generation int64
	children   int
	pods       int
	start      time.Time
}

func (c *callLog) log(ctx context.Context, logger *slog.Logger, status int, err error) {
	attrs := []slog.Attr{
		slog.String("hook", c.hook),
		slog.String("namespace", c.namespace),
		slog.String("name", c.name),
		slog.Int64("generation", c.generation),
		slog.Int("children", c.children),
		slog.Int("pods", c.pods),
		slog.Int("status", status),
		slog.Float64("duration_ms", float64(time.Since(c.start).Microseconds())/1000),
	}
	level, msg := slog.LevelInfo, "hook call"
	if err != nil {
		level = slog.LevelWarn
		if status >= 500 {
			level = slog.LevelError
		}
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	logger.LogAttrs(ctx, level, msg, attrs...)
}

func handleSync(logger *slog.Logger, opts serverOptions, hook string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		call := &callLog{hook: hook, start: time.Now()}
		var req sync.Request
		if err := decode(w, r, opts.maxRequestBytes, &req); err != nil {
			fail(w, r, logger, call, err)
			return
		}
		if hook == "finalize" {
			req.Finalizing = true
		}
		if p := req.Parent; p != nil {
			call.namespace, call.name, call.generation = p.Metadata.Namespace, p.Metadata.Name, p.Metadata.Generation
		}
		for _, objs := range req.Children {
			call.children += len(objs)
		}
		call.pods = len(req.Related.Pods)

		resp, err := sync.Sync(&req, opts.now())
		if err != nil {
			fail(w, r, logger, call, err)
			return
		}
		status, err := encode(w, r, resp)
		if err != nil {
			fail(w, r, logger, call, err)
			return
		}
		opts.metrics.observeSync(hook, resp)
		call.log(r.Context(), logger, status, nil)
	}
}

func handleCustomize(logger *slog.Logger, opts serverOptions) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		call := &callLog{hook: "customize", start: time.Now()}
		var req sync.CustomizeRequest
		if err := decode(w, r, opts.maxRequestBytes, &req); err != nil {
			fail(w, r, logger, call, err)
			return
		}
		if p := req.Parent; p != nil {
			call.namespace, call.name, call.generation = p.Metadata.Namespace, p.Metadata.Name, p.Metadata.Generation
		}
		resp, err := sync.Customize(&req)
		if err != nil {
			fail(w, r, logger, call, err)
			return
		}
		status, err := encode(w, r, resp)
		if err != nil {
			fail(w, r, logger, call, err)
			return
		}
		call.log(r.Context(), logger, status, nil)
	}
}

func handleHealthz() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	}
}

// closeWhenNotReady closes each connection after its answer once shutdown
// has begun, so that a caller reusing a connection goes back through the
// Service to a Pod that is not going away. Connections stay open until
// their next answer, rather than being closed while idle, because closing
// an idle connection races with a caller sending on it: a POST lost that
// way is not retried by Go's HTTP client.
func closeWhenNotReady(ready func() bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !ready() {
				w.Header().Set("Connection", "close")
			}
			next.ServeHTTP(w, r)
		})
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

// fail answers a failed call and logs it. Any error that is not an
// httpError or a request error is the hook's own fault: 500, details only
// in the log.
func fail(w http.ResponseWriter, r *http.Request, logger *slog.Logger, call *callLog, err error) {
	var he *httpError
	var re *sync.RequestError
	switch {
	case errors.As(err, &he):
	case errors.As(err, &re):
		he = &httpError{status: http.StatusBadRequest, msg: re.Msg}
	default:
		he = &httpError{status: http.StatusInternalServerError, msg: "internal error", err: err}
	}
	writeError(w, he)
	call.log(r.Context(), logger, he.status, he)
}

// decode reads a JSON request body into v, a *sync.Request or a
// *sync.CustomizeRequest, with the decoders of package sync (JSON v2: field
// names case-sensitive, duplicate names and invalid UTF-8 refused). Everything
// that can be wrong with a body is an error naming the problem: an httpError,
// or a *sync.RequestError that fail turns into a 400.
func decode(w http.ResponseWriter, r *http.Request, maxBytes int64, v any) error {
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return &httpError{status: http.StatusUnsupportedMediaType, msg: fmt.Sprintf("Content-Type is %q, want application/json", ct)}
	}
	body, err := readBody(w, r, maxBytes)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return &httpError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("request body is larger than %d bytes (--max-request-bytes)", maxBytes)}
	case err != nil:
		return &httpError{status: http.StatusBadRequest, msg: "reading request body", err: err}
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return &httpError{status: http.StatusBadRequest, msg: "request body is empty"}
	}
	switch v := v.(type) {
	case *sync.Request:
		req, err := sync.DecodeRequest(body)
		if err != nil {
			return err
		}
		*v = *req
	case *sync.CustomizeRequest:
		req, err := sync.DecodeCustomizeRequest(body)
		if err != nil {
			return err
		}
		*v = *req
	default:
		return fmt.Errorf("decode: no decoder for %T", v)
	}
	return nil
}

// readBody reads the whole request body, at most maxBytes of it. A body that
// states its length (Metacontroller's always does) is read into one buffer of
// that size: io.ReadAll's doubling would allocate about twice the body, which
// for a 1,000-Pod sync is 4 to 5 MB.
func readBody(w http.ResponseWriter, r *http.Request, maxBytes int64) ([]byte, error) {
	body := http.MaxBytesReader(w, r.Body, maxBytes)
	if r.ContentLength <= 0 || r.ContentLength > maxBytes {
		return io.ReadAll(body)
	}
	// net/http ends the body at the stated length, and fails a shorter one.
	buf := make([]byte, r.ContentLength)
	if _, err := io.ReadFull(body, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// encode writes v as a 200 JSON answer with its ETag, or a 304 with no body
// when the request's If-None-Match names that ETag (see notModified). It
// marshals first, so a failure is a 500, never a truncated 200. It returns
// the status sent.
func encode(w http.ResponseWriter, r *http.Request, v any) (int, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return 0, fmt.Errorf("encoding answer: %w", err)
	}
	b = append(b, '\n')
	etag := etagOf(b)
	w.Header().Set("ETag", etag)
	if notModified(r, etag) {
		w.WriteHeader(http.StatusNotModified)
		return http.StatusNotModified, nil
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(b)))
	w.WriteHeader(http.StatusOK)
	w.Write(b)
	return http.StatusOK, nil
}

// writeError answers {"error": "..."} with the error's status.
func writeError(w http.ResponseWriter, e *httpError) {
	b, _ := json.Marshal(map[string]string{"error": e.msg})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(e.status)
	w.Write(append(b, '\n'))
}

// recoverPanics turns a panic in one call into a logged 500, so that the
// process and every other call go on. If the answer had already begun, a
// 500 can no longer be sent: the connection is cut instead, which
// Metacontroller treats as a failed call, never as a short 200.
func recoverPanics(logger *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tw := &trackingWriter{ResponseWriter: w}
			defer func() {
				v := recover()
				if v == nil {
					return
				}
				if v == http.ErrAbortHandler {
					panic(v)
				}
				logger.Error("panic in hook call", "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				if tw.wroteHeader {
					panic(http.ErrAbortHandler)
				}
				writeError(w, &httpError{status: http.StatusInternalServerError, msg: "internal error"})
			}()
			next.ServeHTTP(tw, r)
		})
	}
}

// trackingWriter remembers whether the answer has begun.
type trackingWriter struct {
	http.ResponseWriter
	wroteHeader bool
}

func (w *trackingWriter) WriteHeader(code int) {
	w.wroteHeader = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *trackingWriter) Write(b []byte) (int, error) {
	w.wroteHeader = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the real writer.
func (w *trackingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
