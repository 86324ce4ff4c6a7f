package main

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/test/testutil"
)

// serveTLS serves handler over HTTPS on a loopback port with tlsConfig
// until the test ends, and returns its base URL.
func serveTLS(t *testing.T, handler http.Handler, tlsConfig *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler, TLSConfig: tlsConfig, ErrorLog: slog.NewLogLogger(slog.DiscardHandler, slog.LevelError)}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return "https://" + ln.Addr().String()
}

// tlsClient trusts roots and, if given one, presents cert whatever CAs the
// server asks for (Go's client would otherwise send none the server does
// not name). It opens a new connection for every call, so that each call
// sees the server's current certificate and CA.
func tlsClient(roots *x509.CertPool, cert ...tls.Certificate) *http.Client {
	cfg := &tls.Config{RootCAs: roots}
	if len(cert) > 0 {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert[0], nil }
	}
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: cfg}}
}

// writeCertFiles writes a certificate and key for the server into dir and
// returns their paths.
func writeCertFiles(t *testing.T, dir string, certPEM, keyPEM []byte) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	testutil.WriteFileAtomic(t, certFile, certPEM)
	testutil.WriteFileAtomic(t, keyFile, keyPEM)
	return certFile, keyFile
}

// servedSerial connects and returns the serial number of the certificate
// the server presents.
func servedSerial(t *testing.T, client *http.Client, base string) int64 {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/healthz", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET /healthz over TLS: %v", err)
	}
	resp.Body.Close()
	return resp.TLS.PeerCertificates[0].SerialNumber.Int64()
}

// TestTLSServesAndReloadsCertificate checks that the hook serves its
// certificate with TLS 1.2 at least, and serves a rotated one from the next
// handshake on without a restart; and that files that do not parse keep
// the last good certificate.
func TestTLSServesAndReloadsCertificate(t *testing.T) {
	ca := testutil.NewCA(t, "hook CA")
	dir := t.TempDir()
	certPEM, keyPEM := ca.Issue(t, "hook one")
	certFile, keyFile := writeCertFiles(t, dir, certPEM, keyPEM)
	sink := testutil.NewLogSink()
	logger := slog.New(slog.NewJSONHandler(sink, nil))
	cfg, err := newTLSConfig(logger, certFile, keyFile, "")
	if err != nil {
		t.Fatal(err)
	}
	base := serveTLS(t, newServer(logger, serverOptions{maxRequestBytes: 1 << 20, now: time.Now, ready: func() bool { return true }}), cfg)
	client := tlsClient(ca.Pool())

	first := servedSerial(t, client, base)
	certPEM, keyPEM = ca.Issue(t, "hook two")
	writeCertFiles(t, dir, certPEM, keyPEM)
	second := servedSerial(t, client, base)
	if second == first {
		t.Errorf("after rotation the hook still serves certificate %d", first)
	}

	testutil.WriteFileAtomic(t, keyFile, []byte("not a key"))
	if got := servedSerial(t, client, base); got != second {
		t.Errorf("with a broken key file the hook serves certificate %d, want the last good one, %d", got, second)
	}
	if !strings.Contains(sink.String(), "keeping the previous one") {
		t.Errorf("a failed reload was not logged:\n%s", sink.String())
	}

	old := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), MaxVersion: tls.VersionTLS11}}}
	if resp, err := old.Get(base + "/healthz"); err == nil {
		resp.Body.Close()
		t.Errorf("a TLS 1.1 client was served, want the handshake refused")
	}
}

// TestClientCertificates checks --client-ca-file: a hook call needs a
// certificate signed by the CA (401 and counted without one), a
// certificate of another CA fails the handshake, health checks and metrics
// need none, and a rotated CA file takes effect without a restart.
func TestClientCertificates(t *testing.T) {
	body := testutil.LoadCapture(t, "v2/0005-sync.json").Request
	serverCA, clientCA, otherCA := testutil.NewCA(t, "server CA"), testutil.NewCA(t, "client CA"), testutil.NewCA(t, "other CA")
	dir := t.TempDir()
	certPEM, keyPEM := serverCA.Issue(t, "hook")
	certFile, keyFile := writeCertFiles(t, dir, certPEM, keyPEM)
	caFile := filepath.Join(dir, "ca.crt")
	testutil.WriteFileAtomic(t, caFile, clientCA.PEM)

	logger := slog.New(slog.DiscardHandler)
	cfg, err := newTLSConfig(logger, certFile, keyFile, caFile)
	if err != nil {
		t.Fatal(err)
	}
	m := newMetrics()
	auth, err := newAuthenticator(authConfig{clientCertNeeded: true}, logger, m)
	if err != nil {
		t.Fatal(err)
	}
	base := serveTLS(t, newServer(logger, serverOptions{maxRequestBytes: 32 << 20, now: func() time.Time { return fixedNow }, ready: func() bool { return true }, metrics: m, auth: auth}), cfg)

	noCert := tlsClient(serverCA.Pool())
	good := tlsClient(serverCA.Pool(), clientCA.ClientCert(t, "metacontroller"))
	other := tlsClient(serverCA.Pool(), otherCA.ClientCert(t, "intruder"))

	res := post(t, noCert, base+"/sync", body)
	if res.status != http.StatusUnauthorized {
		t.Errorf("/sync without a client certificate: %d, want 401", res.status)
	}
	if got := decodeErrorAnswer(t, res); !strings.Contains(got, "client certificate") {
		t.Errorf("error = %q, want it to name the client certificate", got)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if res := do(t, noCert, http.MethodGet, base+path, "", nil); res.status != http.StatusOK {
			t.Errorf("GET %s without a client certificate: %d, want 200", path, res.status)
		}
	}
	decodeSyncAnswer(t, post(t, good, base+"/sync", body))
	if _, err := other.Post(base+"/sync", "application/json", strings.NewReader(string(body))); err == nil {
		t.Errorf("a client certificate of another CA was accepted, want the handshake refused")
	}

	testutil.WriteFileAtomic(t, caFile, otherCA.PEM)
	decodeSyncAnswer(t, post(t, other, base+"/sync", body))
	if _, err := good.Post(base+"/sync", "application/json", strings.NewReader(string(body))); err == nil {
		t.Errorf("after the CA file changed, a certificate of the old CA was still accepted")
	}

	samples := scrape(t, noCert, base)
	if got := samples[`memcached_hook_auth_failures_total{reason="no_client_certificate"}`]; got != 1 {
		t.Errorf("auth failures without a client certificate = %v, want 1", got)
	}
	if got := samples[`memcached_hook_calls_total{code="401",hook="sync"}`]; got != 1 {
		t.Errorf("sync calls answered 401 = %v, want 1", got)
	}
}

// TestHeaderAuth checks --auth-token-file and the --basic-auth-* files:
// a hook call without the right credentials gets 401, a JSON error and
// WWW-Authenticate, and is counted by reason; health checks and metrics
// stay open; and credentials rotated in their files take effect without a
// restart.
func TestHeaderAuth(t *testing.T) {
	body := testutil.LoadCapture(t, "v2/0005-sync.json").Request
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	userFile, passFile := filepath.Join(dir, "username"), filepath.Join(dir, "password")
	// As a Secret written by hand often is: with a final newline.
	testutil.WriteFileAtomic(t, tokenFile, []byte("s3cret-token\n"))
	testutil.WriteFileAtomic(t, userFile, []byte("metacontroller"))
	testutil.WriteFileAtomic(t, passFile, []byte("pa:ss word\n"))

	bearer := func(tok string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
	}
	basic := func(u, p string) func(*http.Request) { return func(r *http.Request) { r.SetBasicAuth(u, p) } }

	tests := []struct {
		name       string
		cfg        authConfig
		setAuth    func(*http.Request)
		wantStatus int
		wantReason string // the auth failures label counted, if refused
		wantWWW    string
		rotate     func(t *testing.T) // changes the files before the call
	}{
		{name: "bearer: right token", cfg: authConfig{tokenFile: tokenFile}, setAuth: bearer("s3cret-token"), wantStatus: 200},
		{name: "bearer: scheme in lower case", cfg: authConfig{tokenFile: tokenFile}, setAuth: func(r *http.Request) { r.Header.Set("Authorization", "bearer s3cret-token") }, wantStatus: 200},
		{name: "bearer: no Authorization", cfg: authConfig{tokenFile: tokenFile}, wantStatus: 401, wantReason: authMissing, wantWWW: `Bearer realm="memcached-hook"`},
		{name: "bearer: wrong token", cfg: authConfig{tokenFile: tokenFile}, setAuth: bearer("s3cret-tokeN"), wantStatus: 401, wantReason: authWrong, wantWWW: `Bearer realm="memcached-hook"`},
		{name: "bearer: token prefix", cfg: authConfig{tokenFile: tokenFile}, setAuth: bearer("s3cret"), wantStatus: 401, wantReason: authWrong, wantWWW: `Bearer realm="memcached-hook"`},
		{name: "bearer: empty token", cfg: authConfig{tokenFile: tokenFile}, setAuth: bearer(""), wantStatus: 401, wantReason: authWrong, wantWWW: `Bearer realm="memcached-hook"`},
		{name: "bearer: Basic sent instead", cfg: authConfig{tokenFile: tokenFile}, setAuth: basic("metacontroller", "s3cret-token"), wantStatus: 401, wantReason: authWrongScheme, wantWWW: `Bearer realm="memcached-hook"`},
		{
			name: "bearer: rotated token accepted", cfg: authConfig{tokenFile: tokenFile}, setAuth: bearer("new-token"), wantStatus: 200,
			rotate: func(t *testing.T) { testutil.WriteFileAtomic(t, tokenFile, []byte("new-token\n")) },
		},
		{
			name: "bearer: old token refused after rotation", cfg: authConfig{tokenFile: tokenFile}, setAuth: bearer("s3cret-token"), wantStatus: 401, wantReason: authWrong, wantWWW: `Bearer realm="memcached-hook"`,
			rotate: func(t *testing.T) { testutil.WriteFileAtomic(t, tokenFile, []byte("new-token\n")) },
		},
		{name: "basic: right credentials", cfg: authConfig{basicUserFile: userFile, basicPassFile: passFile}, setAuth: basic("metacontroller", "pa:ss word"), wantStatus: 200},
		{name: "basic: no Authorization", cfg: authConfig{basicUserFile: userFile, basicPassFile: passFile}, wantStatus: 401, wantReason: authMissing, wantWWW: `Basic realm="memcached-hook", charset="UTF-8"`},
		{name: "basic: wrong password", cfg: authConfig{basicUserFile: userFile, basicPassFile: passFile}, setAuth: basic("metacontroller", "pa:ss"), wantStatus: 401, wantReason: authWrong, wantWWW: `Basic realm="memcached-hook", charset="UTF-8"`},
		{name: "basic: wrong username", cfg: authConfig{basicUserFile: userFile, basicPassFile: passFile}, setAuth: basic("admin", "pa:ss word"), wantStatus: 401, wantReason: authWrong, wantWWW: `Basic realm="memcached-hook", charset="UTF-8"`},
		{name: "basic: bearer sent instead", cfg: authConfig{basicUserFile: userFile, basicPassFile: passFile}, setAuth: bearer("pa:ss word"), wantStatus: 401, wantReason: authWrongScheme, wantWWW: `Basic realm="memcached-hook", charset="UTF-8"`},
		{
			name: "basic: rotated password accepted", cfg: authConfig{basicUserFile: userFile, basicPassFile: passFile}, setAuth: basic("metacontroller", "rotated"), wantStatus: 200,
			rotate: func(t *testing.T) { testutil.WriteFileAtomic(t, passFile, []byte("rotated")) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Each case starts from the original files.
			testutil.WriteFileAtomic(t, tokenFile, []byte("s3cret-token\n"))
			testutil.WriteFileAtomic(t, passFile, []byte("pa:ss word\n"))
			m := newMetrics()
			auth, err := newAuthenticator(tt.cfg, slog.New(slog.DiscardHandler), m)
			if err != nil {
				t.Fatal(err)
			}
			srv, _ := newTestServer(t, serverOptions{metrics: m, auth: auth})
			if tt.rotate != nil {
				tt.rotate(t)
			}
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/sync", strings.NewReader(string(body)))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			if tt.setAuth != nil {
				tt.setAuth(req)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res := readResult(t, resp)
			if res.status != tt.wantStatus {
				t.Fatalf("status = %d, want %d; body: %.300s", res.status, tt.wantStatus, res.body)
			}
			if tt.wantStatus == 200 {
				decodeSyncAnswer(t, res)
				return
			}
			decodeErrorAnswer(t, res)
			if got := res.header.Get("WWW-Authenticate"); got != tt.wantWWW {
				t.Errorf("WWW-Authenticate = %q, want %q", got, tt.wantWWW)
			}
			for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
				if res := do(t, srv.Client(), http.MethodGet, srv.URL+path, "", nil); res.status != http.StatusOK {
					t.Errorf("GET %s without credentials: %d, want 200", path, res.status)
				}
			}
			samples := scrape(t, srv.Client(), srv.URL)
			for _, reason := range authFailureReasons {
				want := 0.0
				if reason == tt.wantReason {
					want = 1
				}
				if got := samples[`memcached_hook_auth_failures_total{reason="`+reason+`"}`]; got != want {
					t.Errorf("auth failures %q = %v, want %v", reason, got, want)
				}
			}
		})
	}
}

// readResult reads a whole answer.
func readResult(t *testing.T, resp *http.Response) result {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return result{status: resp.StatusCode, header: resp.Header, body: b}
}

// TestAuthFilesRefused checks that credential files the hook cannot use
// stop it from starting, with an error that names the flag.
func TestAuthFilesRefused(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name    string
		cfg     authConfig
		wantErr string
	}{
		{name: "token file missing", cfg: authConfig{tokenFile: filepath.Join(dir, "nope")}, wantErr: "--auth-token-file"},
		{name: "token file blank", cfg: authConfig{tokenFile: file("blank", " \n")}, wantErr: "is empty"},
		{name: "username blank", cfg: authConfig{basicUserFile: file("u1", "\n"), basicPassFile: file("p1", "pw")}, wantErr: "username is empty"},
		{name: "password blank", cfg: authConfig{basicUserFile: file("u2", "me"), basicPassFile: file("p2", "")}, wantErr: "password is empty"},
		{name: "username with a colon", cfg: authConfig{basicUserFile: file("u3", "a:b"), basicPassFile: file("p3", "pw")}, wantErr: "colon"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newAuthenticator(tt.cfg, slog.New(slog.DiscardHandler), newMetrics())
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("newAuthenticator = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestRunWithTLSAndAuth runs the whole program with every protection on,
// as the manifests' components set it up: HTTPS, client certificates and a
// bearer token. A call with both credentials is answered; one missing
// either gets 401; probes need neither.
func TestRunWithTLSAndAuth(t *testing.T) {
	body := testutil.LoadCapture(t, "v2/0005-sync.json").Request
	serverCA, clientCA := testutil.NewCA(t, "server CA"), testutil.NewCA(t, "client CA")
	dir := t.TempDir()
	certPEM, keyPEM := serverCA.Issue(t, "hook")
	certFile, keyFile := writeCertFiles(t, dir, certPEM, keyPEM)
	caFile, tokenFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "token")
	testutil.WriteFileAtomic(t, caFile, clientCA.PEM)
	testutil.WriteFileAtomic(t, tokenFile, []byte("tok\n"))

	h := startRun(t, []string{"--listen-address=127.0.0.1:0", "--shutdown-delay=0s",
		"--tls-cert-file=" + certFile, "--tls-key-file=" + keyFile, "--client-ca-file=" + caFile, "--auth-token-file=" + tokenFile}, nil)
	base := "https://" + h.addr
	withCert := tlsClient(serverCA.Pool(), clientCA.ClientCert(t, "metacontroller"))
	noCert := tlsClient(serverCA.Pool())

	call := func(client *http.Client, token string, body []byte) result {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/sync", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return readResult(t, resp)
	}
	decodeSyncAnswer(t, call(withCert, "tok", body))
	// The refused calls send a body that goes out in one write with the
	// headers: the hook answers 401 without reading a body and closes the
	// connection, and a client still writing a large one then gets a
	// broken pipe instead of the answer (1 run in 10 under load).
	if res := call(withCert, "", []byte("{}")); res.status != http.StatusUnauthorized {
		t.Errorf("client certificate, no token: %d, want 401", res.status)
	}
	if res := call(noCert, "tok", []byte("{}")); res.status != http.StatusUnauthorized {
		t.Errorf("token, no client certificate: %d, want 401", res.status)
	}
	if res := do(t, noCert, http.MethodGet, base+"/readyz", "", nil); res.status != http.StatusOK {
		t.Errorf("GET /readyz with no credentials: %d, want 200", res.status)
	}
	if got := h.listening["tls"]; got != true {
		t.Errorf("listening log line says tls = %v, want true", got)
	}
	if err := h.stop(t); err != nil {
		t.Errorf("run = %v, want nil", err)
	}
}
