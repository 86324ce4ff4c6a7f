package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/example/memcached-operator/sync/metacontroller"
)

// callLogger makes chi's request logger write one slog line per request:
// a hook call at info (warn or error when it fails), with what the call was
// about; probes and scrapes at debug.
type callLogger struct{ logger *slog.Logger }

// NewLogEntry starts the log line of one request.
func (l callLogger) NewLogEntry(r *http.Request) middleware.LogEntry {
	c := &callLog{logger: l.logger, ctx: r.Context(), path: r.URL.Path}
	switch r.URL.Path {
	case "/customize", "/sync", "/finalize":
		c.hook = strings.TrimPrefix(r.URL.Path, "/")
	}
	return c
}

// callLog is what one request's log line says; the hook's handler fills in
// what the call was about.
type callLog struct {
	logger     *slog.Logger
	ctx        context.Context
	path, hook string
	namespace  string
	name       string
	generation int64
	children   int
	pods       int
	err        error
}

// logOf returns the request's log line, or one that goes nowhere.
func logOf(r *http.Request) *callLog {
	if c, ok := middleware.GetLogEntry(r).(*callLog); ok {
		return c
	}
	return &callLog{logger: slog.New(slog.DiscardHandler), ctx: r.Context()}
}

// parent notes the Memcached a call is about.
func (c *callLog) parent(p *metacontroller.Parent) {
	if p != nil {
		c.namespace, c.name, c.generation = p.Namespace, p.Name, p.Generation
	}
}

// Write logs the request once it is answered. Status 0 is a connection the
// handler aborted.
func (c *callLog) Write(status, _ int, _ http.Header, elapsed time.Duration, _ any) {
	if c.hook == "" {
		c.logger.LogAttrs(c.ctx, slog.LevelDebug, "request", slog.String("path", c.path), slog.Int("status", status),
			slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000))
		return
	}
	attrs := []slog.Attr{
		slog.String("hook", c.hook),
		slog.String("namespace", c.namespace),
		slog.String("name", c.name),
		slog.Int64("generation", c.generation),
		slog.Int("children", c.children),
		slog.Int("pods", c.pods),
		slog.Int("status", status),
		slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000),
	}
	level := slog.LevelInfo
	switch {
	case status >= 500, status == 0:
		level = slog.LevelError
	case status >= 400:
		level = slog.LevelWarn
	}
	if c.err != nil {
		attrs = append(attrs, slog.String("error", c.err.Error()))
	}
	c.logger.LogAttrs(c.ctx, level, "hook call", attrs...)
}

// Panic logs a panic that chi's recoverer caught, with its stack.
func (c *callLog) Panic(v any, stack []byte) {
	c.err = fmt.Errorf("panic: %v", v)
	c.logger.LogAttrs(c.ctx, slog.LevelError, "panic in hook call",
		slog.String("path", c.path), slog.String("panic", fmt.Sprint(v)), slog.String("stack", string(stack)))
}

// jsonErrors makes every error answer JSON: an error that middleware writes
// as plain text (http.Error, as chi's throttle does) or with no body at all
// (chi's recoverer) is answered {"error": "<its text>"} instead, so that a
// caller always gets one shape, whoever refused the call.
func jsonErrors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		jw := &jsonErrorWriter{ResponseWriter: w}
		next.ServeHTTP(jw, r)
		jw.finish()
	})
}

// jsonErrorWriter holds back an error answer that is not JSON until the
// handler is done, then writes it as JSON.
type jsonErrorWriter struct {
	http.ResponseWriter
	held   int // the held status, or 0
	text   bytes.Buffer
	passed bool // the answer went through as written
}

func (w *jsonErrorWriter) WriteHeader(code int) {
	if w.passed || w.held != 0 {
		return
	}
	if mt, _, _ := mime.ParseMediaType(w.Header().Get("Content-Type")); code >= 400 && mt != "application/json" {
		w.held = code
		return
	}
	w.passed = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *jsonErrorWriter) Write(b []byte) (int, error) {
	if w.held != 0 {
		return w.text.Write(b)
	}
	w.passed = true
	return w.ResponseWriter.Write(b)
}

func (w *jsonErrorWriter) finish() {
	if w.held == 0 {
		return
	}
	msg := strings.TrimSpace(w.text.String())
	if msg == "" {
		msg = http.StatusText(w.held)
	}
	writeError(w.ResponseWriter, w.held, msg)
}

// Unwrap lets http.ResponseController reach the real writer.
func (w *jsonErrorWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// readBeforeRefusing reads what is left of a call's body, up to limit
// bytes, before an error answer goes out. The hook refuses some calls from
// their headers alone (401 without credentials, 429 when the concurrency
// limit is reached), and Go's server then closes the connection after the
// answer without reading the rest: always when the caller sent
// Connection: close, and for a body over 256 KiB (a sync of about 50 Pods)
// otherwise. A caller still sending its body then meets a broken pipe or a
// reset, and Go's client returns that error rather than the answer when its
// write fails before it has read the answer (golang/go#11745): Metacontroller
// would log a failed call and back off where a 429 asks it to retry in a
// second, and a 401 would not say why. A body over limit is not read: it
// is refused 413 anyway.
func readBeforeRefusing(limit int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength > limit {
				next.ServeHTTP(w, r)
				return
			}
			next.ServeHTTP(&readingWriter{ResponseWriter: w, body: r.Body, limit: limit}, r)
		})
	}
}

// readingWriter reads the rest of body, once, when an error status is
// written.
type readingWriter struct {
	http.ResponseWriter
	body  io.Reader // the body as the server gave it, before any wrapping
	limit int64
	done  bool
}

func (w *readingWriter) WriteHeader(code int) {
	if !w.done && code >= 400 && code != http.StatusRequestEntityTooLarge {
		io.CopyN(io.Discard, w.body, w.limit)
	}
	w.done = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *readingWriter) Write(b []byte) (int, error) {
	w.done = true // a Write without WriteHeader is a 200
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the real writer.
func (w *readingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

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
