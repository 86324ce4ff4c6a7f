package testutil

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"

	"github.com/example/memcached-operator/test/pki"
)

// CA is a certificate authority made for one test: a pki.CA whose
// methods fail the test instead of returning errors.
type CA struct {
	*pki.CA
}

// NewCA makes a self-signed CA named name, valid from an hour ago for a
// day.
func NewCA(tb testing.TB, name string) *CA {
	tb.Helper()
	ca, err := pki.NewCA(name)
	if err != nil {
		tb.Fatal(err)
	}
	return &CA{ca}
}

// Issue makes a leaf certificate named name for hosts (DNS names or IP
// addresses; 127.0.0.1 and localhost when none), usable by a server or a
// client, and returns it and its key in PEM.
func (ca *CA) Issue(tb testing.TB, name string, hosts ...string) (certPEM, keyPEM []byte) {
	tb.Helper()
	certPEM, keyPEM, err := ca.CA.Issue(name, hosts...)
	if err != nil {
		tb.Fatal(err)
	}
	return certPEM, keyPEM
}

// ClientCert is Issue as a tls.Certificate, for a client to present.
func (ca *CA) ClientCert(tb testing.TB, name string) tls.Certificate {
	tb.Helper()
	c, k := ca.Issue(tb, name)
	cert, err := tls.X509KeyPair(c, k)
	if err != nil {
		tb.Fatal(err)
	}
	return cert
}

// WriteFileAtomic replaces path with data the way a file is swapped under a
// reader: a new file renamed over the old one, never a half-written file.
func WriteFileAtomic(tb testing.TB, path string, data []byte) {
	tb.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".new")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		tb.Fatal(err)
	}
}
