package reload

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
)

// ServerTLS is a server's TLS configuration that follows its files: the
// certificate and key, and with clientCAFile the CAs whose client
// certificates it accepts, asked for as clientAuth says. A rotated Secret
// takes effect at the next handshake; a CA removed from the file is no
// longer trusted. The hook and the agent differ only in minVersion and
// clientAuth, which each explains where it calls this.
func ServerTLS(logger *slog.Logger, certFile, keyFile, clientCAFile string, minVersion uint16, clientAuth tls.ClientAuthType) (*tls.Config, error) {
	certs, err := New(logger, "TLS certificate", func(c [][]byte) (*tls.Certificate, error) {
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
	cas, err := New(logger, "client CA bundle", func(c [][]byte) (*x509.CertPool, error) {
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
		c.ClientAuth = clientAuth
		c.ClientCAs = cas.Get()
		return c, nil
	}
	return withCA, nil
}
