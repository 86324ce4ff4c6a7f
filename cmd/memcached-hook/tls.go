package main

import (
	"crypto/tls"
	"log/slog"

	"github.com/example/memcached-operator/cmd/internal/reload"
)

// newTLSConfig serves certFile and keyFile, and with clientCAFile also
// verifies the client certificates signed by it. Each follows its files as
// they change (see reload.ServerTLS): cert-manager or a rotated Secret takes
// effect at the next handshake, with no restart.
//
// A client certificate is asked for but not required at the TLS layer,
// because kubelet's HTTPS probes present none: the hooks require it (401
// without one, see authenticator), /healthz, /readyz and /metrics do not. A
// certificate that is presented but not signed by the CA fails the
// handshake.
func newTLSConfig(logger *slog.Logger, certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	// Metacontroller's Go client speaks TLS 1.3; 1.2 is the floor.
	return reload.ServerTLS(logger, certFile, keyFile, clientCAFile, tls.VersionTLS12, tls.VerifyClientCertIfGiven)
}
