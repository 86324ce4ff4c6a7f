package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"

	"github.com/example/memcached-operator/cmd/internal/reload"
)

// newTLSConfig serves certFile and keyFile, and with clientCAFile also
// verifies the client certificates signed by it. Each follows its files as
// they change (see reload.Reloading): cert-manager or a rotated Secret takes
// effect at the next handshake, with no restart.
//
// A client certificate is asked for but not required at the TLS layer,
// because kubelet's HTTPS probes present none: the hooks require it (401
// without one, see authenticator), /healthz, /readyz and /metrics do not. A
// certificate that is presented but not signed by the CA fails the
// handshake.
func newTLSConfig(logger *slog.Logger, certFile, keyFile, clientCAFile string) (*tls.Config, error) {
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
		// Metacontroller's Go client speaks TLS 1.3; 1.2 is the floor.
		MinVersion: tls.VersionTLS12,
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
		c.ClientAuth = tls.VerifyClientCertIfGiven
		c.ClientCAs = cas.Get()
		return c, nil
	}
	return withCA, nil
}
