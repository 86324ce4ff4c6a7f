package main

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"

	"github.com/example/memcached-operator/cmd/memcached-agent/internal/protocol"
	"github.com/example/memcached-operator/cmd/memcached-agent/internal/serverlist"
)

// endpoint is the configuration endpoint: memcached's text protocol on
// --listen, answering the list pub publishes, over TLS when tlsConfig is
// set.
type endpoint struct {
	ln     net.Listener
	server *protocol.Server
}

// listenEndpoint listens on --listen; Serve then answers there.
func listenEndpoint(cfg *config, pub *serverlist.Publisher, tlsConfig *tls.Config, logger *slog.Logger, m *metrics) (*endpoint, error) {
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return nil, err
	}
	return &endpoint{ln: ln, server: &protocol.Server{
		List: func() *protocol.Answers {
			if s := pub.Current(); s != nil {
				return s.Answers
			}
			return nil
		},
		MaxConnections: cfg.maxConnections,
		IdleTimeout:    cfg.idleTimeout,
		TLS:            tlsConfig,
		Logger:         logger,
		Observer:       m,
	}}, nil
}

// Addr is the address it listens on.
func (e *endpoint) Addr() string { return e.ln.Addr().String() }

// Serve answers clients until Shutdown, or returns why it cannot.
func (e *endpoint) Serve() error { return e.server.Serve(e.ln) }

// Shutdown stops accepting, closes idle connections and waits for the
// answers in flight until ctx ends.
func (e *endpoint) Shutdown(ctx context.Context) error { return e.server.Shutdown(ctx) }

// Close closes the listener, for a run that ends before Shutdown.
func (e *endpoint) Close() error { return e.ln.Close() }
