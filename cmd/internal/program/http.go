package program

import (
	"log/slog"
	"net/http"
	"time"
)

// HTTPServer is an http.Server for handler with the limits both programs'
// HTTP servers keep, its own errors logged at warn. Every limit is far
// above what a call needs (a 1,000-Pod sync, 4 to 5 MB, is answered in
// tens of milliseconds) and above Metacontroller's 10 s call timeout, so
// only a stuck or hostile client meets it. The idle timeout is longer than
// Go's HTTP client keeps an idle connection (90 s), so that the client,
// not the server, closes it: a server closing an idle connection races
// with a call being sent on it.
func HTTPServer(handler http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}
