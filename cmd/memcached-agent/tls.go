package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"

	"github.com/example/memcached-operator/cmd/internal/reload"
)

// newTLSConfig serves certFile and keyFile (memcached's own certificate,
// from the Secret of spec.tls) and, with clientCAFile, requires a client
// certificate signed by a CA in it: memcached with clientCertificates
// Required refuses a client without one, and the endpoint must not be the
// way around that. Each follows its files as they change (see
// reload.Reloading), so a rotated Secret takes effect at the next
// handshake without a restart; unlike memcached, which only adds a
// rotated CA to the ones it trusts until it restarts, a CA removed from
// the file is no longer trusted.
func newTLSConfig(logger *slog.Logger, certFile, keyFile, clientCAFile string, minVersion uint16) (*tls.Config, error) {
	certs, err := reload.New(logger, "TLS certificate", func(c [][]byte) (*tls.Certificate, error) {
		cert, err := tls.X509KeyPair(c[0], c[1])
		if err != nil {
			return nil, err
		}
		return &cert, nil
	}, certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert-file, --tls-key-file: %w", err)
	}
	base := &tls.Config{
		MinVersion: minVersion,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return certs.Get(), nil
		},
	}
	if clientCAFile == "" {
		return base, nil
	}
	cas, err := reload.New(logger, "client CA bundle", func(c [][]byte) (*x509.CertPool, error) {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(c[0]) {
			return nil, errors.New("no PEM certificate in it")
		}
		return pool, nil
	}, clientCAFile)
	if err != nil {
		return nil, fmt.Errorf("--client-ca-file: %w", err)
	}
	withCA := base.Clone()
	withCA.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		c := base.Clone()
		c.ClientAuth = tls.RequireAndVerifyClientCert
		c.ClientCAs = cas.Get()
		return c, nil
	}
	return withCA, nil
}
