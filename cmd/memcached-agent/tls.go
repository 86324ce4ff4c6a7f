package main

import (
	"crypto/tls"
	"log/slog"

	"github.com/example/memcached-operator/cmd/internal/reload"
)

// endpointTLS is the endpoint's TLS configuration (nil without
// --tls-cert-file): see newTLSConfig.
func endpointTLS(cfg *config, logger *slog.Logger) (*tls.Config, error) {
	if cfg.TLS.Cert == "" {
		return nil, nil
	}
	minVersion := uint16(tls.VersionTLS12)
	if cfg.tlsMinVersion == "1.3" {
		minVersion = tls.VersionTLS13
	}
	return newTLSConfig(logger, cfg.TLS.Cert, cfg.TLS.Key, cfg.TLS.ClientCA, minVersion)
}

// newTLSConfig serves certFile and keyFile (memcached's own certificate,
// from the Secret of spec.tls) and, with clientCAFile, requires a client
// certificate signed by a CA in it: memcached with clientCertificates
// Required refuses a client without one, and the endpoint must not be the
// way around that. Each follows its files as they change (see
// reload.ServerTLS), so a rotated Secret takes effect at the next
// handshake without a restart; unlike memcached, which only adds a
// rotated CA to the ones it trusts until it restarts, a CA removed from
// the file is no longer trusted.
func newTLSConfig(logger *slog.Logger, certFile, keyFile, clientCAFile string, minVersion uint16) (*tls.Config, error) {
	return reload.ServerTLS(logger, certFile, keyFile, clientCAFile, minVersion, tls.RequireAndVerifyClientCert)
}
