//go:build linux

package memcached_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/sync/metacontroller"
	"github.com/example/memcached-operator/test/pod"
	"github.com/example/memcached-operator/test/testutil"
)

// serverName is the name memcached's test certificates are for, as a
// client of the headless Service would ask for it.
const serverName = "cache.default.svc"

// tlsSecret is a kubernetes.io/tls Secret's files, as cert-manager writes
// them: a certificate for serverName signed by ca, its key, and ca.crt.
func tlsSecret(t *testing.T, ca *testutil.CA, name string) map[string][]byte {
	t.Helper()
	cert, key := ca.Issue(t, name, serverName)
	return map[string][]byte{"tls.crt": cert, "tls.key": key, "ca.crt": ca.PEM}
}

// usersSecret is an auth Secret's files.
func usersSecret(lines ...string) map[string][]byte {
	return map[string][]byte{"users": []byte(strings.Join(lines, "\n") + "\n")}
}

// runSecured runs the Pod the hook answers for spec with the given Secrets
// (by name) and waits for memcached to listen on its loopback port.
func runSecured(t *testing.T, name, spec string, secrets map[string]map[string][]byte) *pod.Pod {
	t.Helper()
	tmpl := template(t, answer(t, withSpec(name, spec)))
	p := pod.Run(t, tmpl, pod.Options{Secrets: secrets})
	waitListening(t, p, memcached.Port)
	return p
}

// waitListening waits for something to accept connections on port in the
// Pod.
func waitListening(t *testing.T, p *pod.Pod, port int) {
	t.Helper()
	if !testutil.Poll(20*time.Second, func() bool {
		conn, err := p.Dial(port)
		if err == nil {
			conn.Close()
		}
		return err == nil
	}) {
		t.Fatalf("nothing listens on 127.0.0.1:%d in the Pod:\n%s", port, p.State())
	}
}

// dialTLS opens a TLS connection to memcached's port and completes the
// handshake, with a first command answered so that a server's refusal of
// the client's certificate (sent after the handshake under TLS 1.3) shows.
func dialTLS(p *pod.Pod, cfg *tls.Config) (*tls.Conn, error) {
	raw, err := p.Dial(memcached.Port)
	if err != nil {
		return nil, err
	}
	raw.SetDeadline(time.Now().Add(10 * time.Second))
	conn := tls.Client(raw, cfg)
	if err := conn.Handshake(); err != nil {
		raw.Close()
		return nil, err
	}
	if err := version(conn); err != nil {
		raw.Close()
		return nil, err
	}
	return conn, nil
}

// tlsConfig trusts ca for serverName, presenting the client certificate
// if one is given, whatever CAs memcached says it accepts (Go's client
// would otherwise send none that those CAs did not sign).
func tlsConfig(ca *testutil.CA, certs ...tls.Certificate) *tls.Config {
	cfg := &tls.Config{RootCAs: ca.Pool(), ServerName: serverName}
	if len(certs) > 0 {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &certs[0], nil }
	}
	return cfg
}

// servedCert is the leaf certificate memcached presents on a new
// connection.
func servedCert(t *testing.T, p *pod.Pod, cfg *tls.Config) *x509.Certificate {
	t.Helper()
	conn, err := dialTLS(p, cfg)
	if err != nil {
		t.Fatalf("TLS connection: %v", err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

// textCommand sends one text-protocol command and returns the first line
// of the answer.
func textCommand(conn net.Conn, cmd string) (string, error) {
	if _, err := io.WriteString(conn, cmd); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimRight(line, "\r\n"), err
}

// TestTLS runs a TLS Memcached: a client that trusts the Secret's CA
// completes a handshake and is served; plain text on memcached's port is
// not; TLS 1.2 is refused where 1.3 is the minimum; the Pod's own
// plain-text listener is on loopback only; and the exporter, scraping
// that listener, reports memcached_up 1.
func TestTLS(t *testing.T) {
	ca := testutil.NewCA(t, "cache CA")
	secrets := map[string]map[string][]byte{"cache-tls": tlsSecret(t, ca, "cache")}

	t.Run("serves TLS, and metrics", func(t *testing.T) {
		t.Parallel()
		p := runSecured(t, "tls", `{"tls":{"secretName":"cache-tls"},"metrics":{"enabled":true}}`, secrets)
		conn, err := dialTLS(p, tlsConfig(ca))
		if err != nil {
			t.Fatalf("a client trusting the CA: %v", err)
		}
		if got, err := textCommand(conn, "set k 0 0 1\r\nv\r\n"); got != "STORED" {
			t.Errorf("set over TLS: %q, %v", got, err)
		}
		conn.Close()

		if _, err := dialTLS(p, &tls.Config{ServerName: serverName}); err == nil {
			t.Errorf("a client that does not trust the CA completed a TLS connection")
		}
		plain, err := p.Dial(memcached.Port)
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Close()
		plain.SetDeadline(time.Now().Add(5 * time.Second))
		if err := version(plain); err == nil {
			t.Errorf("memcached answered plain text on its TLS port")
		}

		local := dial(t, p, memcached.LocalPort)
		if s := local.stats(t, "stats settings"); s["ssl_enabled"] != "yes" || s["ssl_verify_mode"] != "0" || s["ssl_min_version"] != "tlsv1.2" {
			t.Errorf("stats settings: ssl_enabled %q ssl_verify_mode %q ssl_min_version %q, want yes 0 tlsv1.2", s["ssl_enabled"], s["ssl_verify_mode"], s["ssl_min_version"])
		}
		if out := listeners(t, p); !strings.Contains(out, fmt.Sprintf("127.0.0.1:%d", memcached.LocalPort)) || strings.Contains(out, fmt.Sprintf("0.0.0.0:%d", memcached.LocalPort)) {
			t.Errorf("the plain-text listener is not on loopback only:\n%s", out)
		}

		var metrics map[string]string
		if !testutil.Poll(20*time.Second, func() bool {
			metrics = scrape(t, p, memcached.ExporterPort)
			return metrics["memcached_up"] == "1"
		}) {
			t.Errorf("memcached_up = %q under TLS, want 1; exporter output:\n%s", metrics["memcached_up"], p.Container("exporter").Output())
		}

		// The Pod shares one process namespace (for the reload sidecar):
		// memcached's own user reads its key through /proc/PID/root, the
		// exporter must not.
		if code, out := p.Exec("reload", readThroughProc, 5*time.Second); code != 0 {
			t.Errorf("the reload sidecar cannot read memcached's key through /proc (exit %d: %s): this check proves nothing", code, out)
		}
		if code, out := p.Exec("exporter", readThroughProc, 5*time.Second); code != 1 || !strings.Contains(out, "Permission denied") {
			t.Errorf("the exporter reading memcached's key through /proc: exit %d, %.200q; want it refused", code, out)
		}
	})

	t.Run("TLS 1.3 at least", func(t *testing.T) {
		t.Parallel()
		p := runSecured(t, "tls13", `{"tls":{"secretName":"cache-tls","minVersion":"1.3"}}`, secrets)
		old := tlsConfig(ca)
		old.MaxVersion = tls.VersionTLS12
		if _, err := dialTLS(p, old); err == nil {
			t.Errorf("a TLS 1.2 client was served where 1.3 is the minimum")
		}
		if conn, err := dialTLS(p, tlsConfig(ca)); err != nil {
			t.Errorf("a TLS 1.3 client: %v", err)
		} else {
			conn.Close()
		}
	})
}

// readThroughProc reads memcached's TLS key through /proc/PID/root, as a
// process sharing its process namespace can; it exits 2 when it finds no
// memcached. It uses the machine's own shell and cat.
var readThroughProc = []string{"/bin/sh", "-c", `for p in /proc/[0-9]*; do
  if [ "$(cat $p/comm 2>/dev/null)" = memcached ]; then exec cat $p/root/run/memcached/tls/tls.key; fi
done
exit 2`}

// listeners lists the Pod's listening TCP sockets (ss -ltn in its network
// namespace).
func listeners(t *testing.T, p *pod.Pod) string {
	t.Helper()
	code, out := p.Exec("memcached", []string{"netstat", "-ltn"}, 5*time.Second)
	if code != 0 {
		t.Fatalf("netstat -ltn: exit %d\n%s", code, out)
	}
	return out
}

// TestClientCertificates runs a Memcached that requires client
// certificates: a client without one, or with one another CA signed, is
// refused; one signed by the Secret's ca.crt is served.
func TestClientCertificates(t *testing.T) {
	ca := testutil.NewCA(t, "cache CA")
	other := testutil.NewCA(t, "another CA")
	p := runSecured(t, "mtls", `{"tls":{"secretName":"cache-tls","clientCertificates":"Required"}}`,
		map[string]map[string][]byte{"cache-tls": tlsSecret(t, ca, "cache")})
	tests := []struct {
		name   string
		certs  []tls.Certificate
		served bool
	}{
		{"no certificate", nil, false},
		{"signed by another CA", []tls.Certificate{other.ClientCert(t, "app")}, false},
		{"signed by the Secret's CA", []tls.Certificate{ca.ClientCert(t, "app")}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := dialTLS(p, tlsConfig(ca, tt.certs...))
			if conn != nil {
				conn.Close()
			}
			if served := err == nil; served != tt.served {
				t.Errorf("served = %v (%v), want %v", served, err, tt.served)
			}
		})
	}
}

// TestTLSRotation swaps the Secret's files the way kubelet does (a new
// ..data directory, one symlink flipped) and checks that new connections
// get the new certificate within the reload sidecar's period, with the item
// stored before still there, a connection opened before still served, and
// memcached's process the same: nothing restarted, nothing lost. A new
// client CA is trusted the same way; the old one stays trusted until
// memcached restarts (memcached adds CAs, it never drops one), which is why
// the README says to restart to retire a CA.
func TestTLSRotation(t *testing.T) {
	ca := testutil.NewCA(t, "cache CA")
	p := runSecured(t, "rotate", `{"tls":{"secretName":"cache-tls","clientCertificates":"Required"}}`,
		map[string]map[string][]byte{"cache-tls": tlsSecret(t, ca, "cache")})
	client := tlsConfig(ca, ca.ClientCert(t, "app"))
	pid := p.Container("memcached").PID(t)
	first := servedCert(t, p, client)
	before, err := dialTLS(p, client)
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	if got, err := textCommand(before, "set kept 0 0 4\r\ndata\r\n"); got != "STORED" {
		t.Fatalf("set: %q, %v", got, err)
	}

	t.Run("a renewed certificate", func(t *testing.T) {
		p.UpdateSecret("cache-tls", tlsSecret(t, ca, "cache renewed"))
		var now *x509.Certificate
		if !testutil.Poll(30*time.Second, func() bool {
			now = servedCert(t, p, client)
			return now.SerialNumber.Cmp(first.SerialNumber) != 0
		}) {
			t.Fatalf("new connections still get the first certificate (serial %v); reload sidecar:\n%s", first.SerialNumber, p.Container("reload").Output())
		}
		if now.Subject.CommonName != "cache renewed" {
			t.Errorf("served certificate %q, want the renewed one", now.Subject.CommonName)
		}
		before.SetDeadline(time.Now().Add(10 * time.Second))
		if got, err := textCommand(before, "get kept\r\n"); got != "VALUE kept 0 4" {
			t.Errorf("a connection opened before the rotation: get kept = %q, %v", got, err)
		}
		conn, err := dialTLS(p, client)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if got, err := textCommand(conn, "get kept\r\n"); got != "VALUE kept 0 4" {
			t.Errorf("the item stored before the rotation: get kept = %q, %v", got, err)
		}
		if now := p.Container("memcached").PID(t); now != pid {
			t.Errorf("memcached's PID went from %d to %d: it restarted", pid, now)
		}
	})

	t.Run("a key that does not match is not loaded", func(t *testing.T) {
		served := servedCert(t, p, client)
		mismatched := tlsSecret(t, ca, "cache mismatched")
		mismatched["tls.key"] = tlsSecret(t, ca, "another")["tls.key"]
		p.UpdateSecret("cache-tls", mismatched)
		if !testutil.Poll(30*time.Second, func() bool {
			return strings.Contains(p.Container("reload").Output(), "not usable")
		}) {
			t.Fatalf("the reload sidecar did not refuse the update; its output:\n%s", p.Container("reload").Output())
		}
		// memcached, told to reload a mismatched pair, would keep the new
		// certificate without a key and fail every handshake.
		now := servedCert(t, p, client)
		if now.SerialNumber.Cmp(served.SerialNumber) != 0 {
			t.Errorf("new connections get certificate %q, want the one served before the unusable update", now.Subject.CommonName)
		}
		if got := p.Container("reload").Output(); !strings.Contains(got, "key values mismatch") {
			t.Errorf("the reload sidecar does not say why:\n%s", got)
		}
	})

	t.Run("a new CA", func(t *testing.T) {
		newCA := testutil.NewCA(t, "cache CA 2")
		p.UpdateSecret("cache-tls", tlsSecret(t, newCA, "cache under CA 2"))
		newClient := tlsConfig(newCA, newCA.ClientCert(t, "app"))
		if !testutil.Poll(30*time.Second, func() bool {
			conn, err := dialTLS(p, newClient)
			if conn != nil {
				conn.Close()
			}
			return err == nil
		}) {
			t.Fatalf("a client of the new CA is not served; reload sidecar:\n%s", p.Container("reload").Output())
		}
		// The old CA's clients, trusting the new server certificate.
		oldClient := tlsConfig(newCA, ca.ClientCert(t, "old app"))
		conn, err := dialTLS(p, oldClient)
		if conn != nil {
			conn.Close()
		}
		if err != nil {
			t.Errorf("memcached 1.6.45 no longer trusts the old CA after a rotation (%v): the README's advice to restart to retire a CA can go", err)
		}
		if now := p.Container("memcached").PID(t); now != pid {
			t.Errorf("memcached's PID went from %d to %d: it restarted", pid, now)
		}
	})
}

// binConn is a binary-protocol connection to memcached, the protocol SASL
// authentication needs.
type binConn struct {
	conn net.Conn
	r    *bufio.Reader
}

// Binary protocol opcodes and statuses (memcached's protocol_binary.h).
const (
	opGet      = 0x00
	opSet      = 0x01
	opVersion  = 0x0b
	opStat     = 0x10
	opSASLAuth = 0x21

	statusOK        = 0x00
	statusNotFound  = 0x01
	statusAuthError = 0x20
)

// binResponse is one binary-protocol response.
type binResponse struct {
	status     uint16
	key, value []byte
}

func (c *binConn) do(opcode byte, extras, key, value []byte) (binResponse, error) {
	hdr := make([]byte, 24)
	hdr[0] = 0x80
	hdr[1] = opcode
	binary.BigEndian.PutUint16(hdr[2:], uint16(len(key)))
	hdr[4] = byte(len(extras))
	binary.BigEndian.PutUint32(hdr[8:], uint32(len(extras)+len(key)+len(value)))
	msg := append(append(append(hdr, extras...), key...), value...)
	if _, err := c.conn.Write(msg); err != nil {
		return binResponse{}, err
	}
	return c.read()
}

func (c *binConn) read() (binResponse, error) {
	hdr := make([]byte, 24)
	if _, err := io.ReadFull(c.r, hdr); err != nil {
		return binResponse{}, err
	}
	if hdr[0] != 0x81 {
		return binResponse{}, fmt.Errorf("not a binary response: magic %#x", hdr[0])
	}
	keyLen, extLen := int(binary.BigEndian.Uint16(hdr[2:])), int(hdr[4])
	body := make([]byte, binary.BigEndian.Uint32(hdr[8:]))
	if _, err := io.ReadFull(c.r, body); err != nil {
		return binResponse{}, err
	}
	return binResponse{status: binary.BigEndian.Uint16(hdr[6:]), key: body[extLen : extLen+keyLen], value: body[extLen+keyLen:]}, nil
}

// dialBinary opens a binary-protocol connection to port in the Pod.
func dialBinary(t *testing.T, p *pod.Pod, port int) *binConn {
	t.Helper()
	conn, err := p.Dial(port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	return &binConn{conn: conn, r: bufio.NewReader(conn)}
}

// login authenticates with SASL PLAIN and returns the status.
func (c *binConn) login(user, password string) (uint16, error) {
	r, err := c.do(opSASLAuth, nil, []byte("PLAIN"), []byte("\x00"+user+"\x00"+password))
	return r.status, err
}

func (c *binConn) set(key, value string) (uint16, error) {
	r, err := c.do(opSet, make([]byte, 8), []byte(key), []byte(value))
	return r.status, err
}

func (c *binConn) get(key string) (binResponse, error) {
	r, err := c.do(opGet, nil, []byte(key), nil)
	return r, err
}

// stats asks for a stats group ("settings") and returns it.
func (c *binConn) stats(group string) (map[string]string, error) {
	r, err := c.do(opStat, nil, []byte(group), nil)
	out := map[string]string{}
	for ; err == nil && r.status == statusOK && len(r.key) > 0; r, err = c.read() {
		out[string(r.key)] = string(r.value)
	}
	if err == nil && r.status != statusOK {
		err = fmt.Errorf("stats %s: status %#x", group, r.status)
	}
	return out, err
}

// TestSASL runs a SASL Memcached: the right password is served, a wrong
// one and no login get no data (an item stored by a logged-in client stays
// hidden), the text protocol is refused, and a changed Secret changes the
// passwords without a restart, keeping the items.
func TestSASL(t *testing.T) {
	p := runSecured(t, "sasl", `{"auth":{"secretName":"cache-users"}}`,
		map[string]map[string][]byte{"cache-users": usersSecret("app:first-password", "admin:second-password")})
	pid := p.Container("memcached").PID(t)

	c := dialBinary(t, p, memcached.Port)
	if st, err := c.login("app", "first-password"); err != nil || st != statusOK {
		t.Fatalf("login with the right password: status %#x, %v", st, err)
	}
	if st, err := c.set("secret-item", "value"); err != nil || st != statusOK {
		t.Fatalf("set after login: status %#x, %v", st, err)
	}
	if r, err := c.get("secret-item"); err != nil || string(r.value) != "value" {
		t.Fatalf("get after login: %q, %v", r.value, err)
	}
	if s, err := c.stats("settings"); err != nil || s["auth_enabled_sasl"] != "yes" {
		t.Errorf("stats settings: auth_enabled_sasl = %q, %v; want yes", s["auth_enabled_sasl"], err)
	}

	t.Run("a wrong password", func(t *testing.T) {
		c := dialBinary(t, p, memcached.Port)
		if st, err := c.login("app", "second-password"); err != nil || st != statusAuthError {
			t.Errorf("login with another user's password: status %#x, %v; want %#x", st, err, statusAuthError)
		}
		if r, err := c.get("secret-item"); err != nil || r.status != statusAuthError || string(r.value) == "value" {
			t.Errorf("get after a failed login: status %#x value %q, %v; want %#x and no item", r.status, r.value, err, statusAuthError)
		}
	})
	t.Run("no login", func(t *testing.T) {
		c := dialBinary(t, p, memcached.Port)
		if r, err := c.get("secret-item"); err != nil || r.status != statusAuthError || string(r.value) == "value" {
			t.Errorf("get without login: status %#x value %q, %v; want %#x and no item", r.status, r.value, err, statusAuthError)
		}
		// memcached answers an error, or closes the connection; the item
		// is checked unchanged below.
		if st, err := c.set("secret-item", "overwritten"); err == nil && st != statusAuthError {
			t.Errorf("set without login: status %#x; want %#x", st, statusAuthError)
		}
	})
	t.Run("the text protocol", func(t *testing.T) {
		conn, err := p.Dial(memcached.Port)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		// Longer than a binary header, so that memcached reads one.
		if got, err := textCommand(conn, "get secret-item secret-item secret-item\r\n"); err == nil {
			t.Errorf("a text-protocol get was answered %q", got)
		}
	})
	t.Run("passwords rotated", func(t *testing.T) {
		// Two lines for one user: both passwords work while clients move.
		p.UpdateSecret("cache-users", usersSecret("app:third-password", "app:fourth-password"))
		if !testutil.Poll(30*time.Second, func() bool {
			st, err := dialBinary(t, p, memcached.Port).login("app", "third-password")
			return err == nil && st == statusOK
		}) {
			t.Fatalf("the new password is not accepted; reload sidecar:\n%s", p.Container("reload").Output())
		}
		if st, err := dialBinary(t, p, memcached.Port).login("app", "fourth-password"); err != nil || st != statusOK {
			t.Errorf("the user's second password: status %#x, %v; want it accepted", st, err)
		}
		if st, err := dialBinary(t, p, memcached.Port).login("admin", "second-password"); err != nil || st != statusAuthError {
			t.Errorf("a user removed from the Secret: status %#x, %v; want %#x", st, err, statusAuthError)
		}
		if st, err := dialBinary(t, p, memcached.Port).login("app", "first-password"); err != nil || st != statusAuthError {
			t.Errorf("the old password after the rotation: status %#x, %v; want %#x", st, err, statusAuthError)
		}
		c := dialBinary(t, p, memcached.Port)
		c.login("app", "third-password")
		if r, err := c.get("secret-item"); err != nil || string(r.value) != "value" {
			t.Errorf("the item stored before the rotation: %q, %v", r.value, err)
		}
		if now := p.Container("memcached").PID(t); now != pid {
			t.Errorf("memcached's PID went from %d to %d: it restarted", pid, now)
		}
	})
	t.Run("an unusable update is not loaded", func(t *testing.T) {
		p.UpdateSecret("cache-users", map[string][]byte{"users": []byte("app third-password\n")})
		if !testutil.Poll(30*time.Second, func() bool {
			return strings.Contains(p.Container("reload").Output(), "not usable")
		}) {
			t.Fatalf("the reload sidecar did not refuse the update:\n%s", p.Container("reload").Output())
		}
		if strings.Contains(p.Container("reload").Output(), "third-password") {
			t.Errorf("the reload sidecar wrote a password:\n%s", p.Container("reload").Output())
		}
		if st, err := dialBinary(t, p, memcached.Port).login("app", "third-password"); err != nil || st != statusOK {
			t.Errorf("the password before the unusable update: status %#x, %v; want it still accepted", st, err)
		}
	})
}

// TestASCIIAuth runs a Memcached with memcached's text-protocol
// authentication: every command before logging in is refused, a wrong
// password too; the right one is served; and a changed Secret changes the
// passwords without a restart, keeping the items.
func TestASCIIAuth(t *testing.T) {
	p := runSecured(t, "ascii", `{"auth":{"secretName":"cache-users","mode":"ASCII"}}`,
		map[string]map[string][]byte{"cache-users": usersSecret("app:first-password")})
	pid := p.Container("memcached").PID(t)
	login := func(user, password string) (net.Conn, string) {
		t.Helper()
		conn, err := p.Dial(memcached.Port)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		cred := user + " " + password
		got, _ := textCommand(conn, fmt.Sprintf("set auth 0 0 %d\r\n%s\r\n", len(cred), cred))
		return conn, got
	}

	conn, got := login("app", "first-password")
	if got != "STORED" {
		t.Fatalf("login with the right password: %q", got)
	}
	if got, err := textCommand(conn, "set secret-item 0 0 5\r\nvalue\r\n"); got != "STORED" {
		t.Fatalf("set after login: %q, %v", got, err)
	}

	unauthenticated := func(t *testing.T, conn net.Conn) {
		t.Helper()
		if got, err := textCommand(conn, "get secret-item\r\n"); got != "CLIENT_ERROR unauthenticated" {
			t.Errorf("get without login: %q, %v; want CLIENT_ERROR unauthenticated", got, err)
		}
	}
	t.Run("no login", func(t *testing.T) {
		conn, err := p.Dial(memcached.Port)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		unauthenticated(t, conn)
	})
	t.Run("a wrong password", func(t *testing.T) {
		conn, got := login("app", "wrong")
		if got != "CLIENT_ERROR authentication failure" {
			t.Errorf("login with a wrong password: %q", got)
		}
		unauthenticated(t, conn)
	})
	t.Run("passwords rotated", func(t *testing.T) {
		// Two lines for one user: both passwords work while clients move.
		p.UpdateSecret("cache-users", usersSecret("app:second-password", "app:third-password"))
		if !testutil.Poll(30*time.Second, func() bool {
			_, got := login("app", "second-password")
			return got == "STORED"
		}) {
			t.Fatalf("the new password is not accepted; reload sidecar:\n%s", p.Container("reload").Output())
		}
		if _, got := login("app", "third-password"); got != "STORED" {
			t.Errorf("the user's second password: %q", got)
		}
		if _, got := login("app", "first-password"); got != "CLIENT_ERROR authentication failure" {
			t.Errorf("the old password after the rotation: %q", got)
		}
		conn, _ := login("app", "second-password")
		if got, err := textCommand(conn, "get secret-item\r\n"); got != "VALUE secret-item 0 5" {
			t.Errorf("the item stored before the rotation: %q, %v", got, err)
		}
		if now := p.Container("memcached").PID(t); now != pid {
			t.Errorf("memcached's PID went from %d to %d: it restarted", pid, now)
		}
	})
}

// TestLivenessCheckSecured runs the liveness check in each mode: the
// version request it sends is one memcached answers before any login, on
// the plain-text loopback listener under TLS. It passes while memcached
// serves and fails once memcached is stopped.
func TestLivenessCheckSecured(t *testing.T) {
	ca := testutil.NewCA(t, "cache CA")
	secrets := map[string]map[string][]byte{"cache-tls": tlsSecret(t, ca, "cache"), "cache-users": usersSecret("app:password")}
	tests := []struct{ name, spec string }{
		{"TLS", `{"tls":{"secretName":"cache-tls","clientCertificates":"Required"}}`},
		{"SASL", `{"auth":{"secretName":"cache-users"}}`},
		{"ASCII", `{"auth":{"secretName":"cache-users","mode":"ASCII"}}`},
		{"TLS and SASL", `{"tls":{"secretName":"cache-tls"},"auth":{"secretName":"cache-users"}}`},
		{"TLS and ASCII", `{"tls":{"secretName":"cache-tls"},"auth":{"secretName":"cache-users","mode":"ASCII"}}`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tmpl := template(t, answer(t, withSpec(fmt.Sprintf("secured-live-%d", i), tt.spec)))
			probe := tmpl.Spec.Containers[0].LivenessProbe
			p := pod.Run(t, tmpl, pod.Options{Secrets: secrets})
			waitListening(t, p, memcached.Port)
			if !testutil.Poll(10*time.Second, func() bool { return p.Probe("memcached", probe) }) {
				t.Fatalf("the liveness probe fails on a serving memcached")
			}
			ctr := p.Container("memcached")
			if err := ctr.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			if p.Probe("memcached", probe) {
				t.Errorf("the liveness probe passes on a stopped memcached")
			}
			if err := ctr.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCheckRefusesUnusableSecrets runs the check init container on
// Secrets memcached could not use: it exits non-zero, so memcached never
// starts (the Deployment's rollout stalls there, the old Pods keep
// serving), its last line names the field and the Secret and never a
// value, and the hook's status, given the Pod as kubelet reports it,
// repeats that line under Degraded SecretNotUsable.
func TestCheckRefusesUnusableSecrets(t *testing.T) {
	ca := testutil.NewCA(t, "cache CA")
	withoutCA := tlsSecret(t, ca, "cache")
	delete(withoutCA, "ca.crt")
	withoutKey := tlsSecret(t, ca, "cache")
	delete(withoutKey, "tls.key")
	notPEM := tlsSecret(t, ca, "cache")
	notPEM["tls.key"] = []byte("not a key at all")
	mismatched := tlsSecret(t, ca, "cache")
	mismatched["tls.key"] = tlsSecret(t, ca, "another")["tls.key"]
	caNotCert := tlsSecret(t, ca, "cache")
	caNotCert["ca.crt"] = caNotCert["tls.key"]
	var nineUsers []string
	for i := range 9 {
		nineUsers = append(nineUsers, fmt.Sprintf("user%d:password-%d", i, i))
	}
	tests := []struct {
		name    string
		spec    string
		secrets map[string]map[string][]byte
		want    string // in the last line
	}{
		{"TLS Secret missing", `{"tls":{"secretName":"cache-tls"}}`, nil, `spec.tls.secretName: Secret "cache-tls" has no tls.crt, or does not exist`},
		{"no tls.key", `{"tls":{"secretName":"cache-tls"}}`, map[string]map[string][]byte{"cache-tls": withoutKey}, `spec.tls.secretName: Secret "cache-tls" has no tls.key`},
		{"tls.key not PEM", `{"tls":{"secretName":"cache-tls"}}`, map[string]map[string][]byte{"cache-tls": notPEM}, `spec.tls.secretName: Secret "cache-tls": tls.key is not PEM`},
		{"tls.key does not match tls.crt", `{"tls":{"secretName":"cache-tls"}}`, map[string]map[string][]byte{"cache-tls": mismatched}, `spec.tls.secretName: Secret "cache-tls": memcached cannot load it: Error loading the key: /run/memcached/tls/tls.key : error:05800074:x509 certificate routines::key values mismatch`},
		{"ca.crt holds no certificate", `{"tls":{"secretName":"cache-tls","clientCertificates":"Required"}}`, map[string]map[string][]byte{"cache-tls": caNotCert}, `spec.tls.secretName: Secret "cache-tls": memcached cannot load it: Error loading the CA certificate`},
		{"client certificates without ca.crt", `{"tls":{"secretName":"cache-tls","clientCertificates":"Required"}}`, map[string]map[string][]byte{"cache-tls": withoutCA}, `spec.tls.secretName: Secret "cache-tls" has no ca.crt`},
		{"users Secret missing", `{"auth":{"secretName":"cache-users"}}`, nil, `spec.auth.secretName: Secret "cache-users" has no users, or does not exist`},
		{"a line without a colon", `{"auth":{"secretName":"cache-users"}}`, map[string]map[string][]byte{"cache-users": usersSecret("app:fine", "admin very-secret-value")}, `spec.auth.secretName: Secret "cache-users": users must hold one user:password a line`},
		{"an empty password", `{"auth":{"secretName":"cache-users"}}`, map[string]map[string][]byte{"cache-users": usersSecret("app:")}, `users must hold one user:password a line`},
		{"an empty line", `{"auth":{"secretName":"cache-users","mode":"ASCII"}}`, map[string]map[string][]byte{"cache-users": usersSecret("app:one", "", "admin:two")}, `and no empty line`},
		{"a line too long", `{"auth":{"secretName":"cache-users"}}`, map[string]map[string][]byte{"cache-users": usersSecret("app:" + strings.Repeat("p", 177))}, `a line of users is at most 180 characters`},
		{"a SASL password with a colon", `{"auth":{"secretName":"cache-users"}}`, map[string]map[string][]byte{"cache-users": usersSecret("app:very-secret:with-colon")}, `spec.auth.secretName: Secret "cache-users": under SASL a password cannot hold a colon`},
		{"nine ASCII users", `{"auth":{"secretName":"cache-users","mode":"ASCII"}}`, map[string]map[string][]byte{"cache-users": usersSecret(nineUsers...)}, `ASCII authentication takes at most 8 users`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			name := fmt.Sprintf("refused-%d", i)
			tmpl := template(t, answer(t, withSpec(name, tt.spec)))
			p := pod.Run(t, tmpl, pod.Options{Secrets: tt.secrets, InitMayFail: true})
			f, failed := p.InitFailure()
			if !failed {
				t.Fatalf("the check passed; memcached started")
			}
			if f.Container != "check" || f.ExitCode == 0 {
				t.Fatalf("init container %s exited %d, want check non-zero", f.Container, f.ExitCode)
			}
			lines := strings.Split(strings.TrimSpace(f.Output), "\n")
			if last := lines[len(lines)-1]; !strings.Contains(last, tt.want) {
				t.Errorf("the check's last line %q does not say %q", last, tt.want)
			}
			for _, files := range tt.secrets {
				for _, v := range files {
					for _, word := range strings.FieldsFunc(string(v), func(r rune) bool { return r == '\n' || r == ':' || r == ' ' }) {
						if strings.HasPrefix(word, "password") || strings.HasPrefix(word, "very-secret") {
							if strings.Contains(f.Output, word) {
								t.Errorf("the check's output holds a password (%q):\n%s", word, f.Output)
							}
						}
					}
				}
			}
			if got := degradedFromCheck(t, name, tt.spec, f); !strings.Contains(got, "SecretNotUsable: ") || !strings.Contains(got, tt.want) {
				t.Errorf("Degraded = %q, want SecretNotUsable saying %q", got, tt.want)
			}
		})
	}
}

// degradedFromCheck asks the hook for the status of a Memcached whose one
// Pod's check container failed as f did, as kubelet reports it (the
// termination message from the logs, FallbackToLogsOnError), and returns
// the Degraded condition's reason and message.
func degradedFromCheck(t *testing.T, name, spec string, f pod.InitFailure) string {
	t.Helper()
	var parent map[string]any
	testutil.StrictDecode(t, withSpec(name, spec), &parent)
	parent["metadata"].(map[string]any)["namespace"] = "default"
	parent["metadata"].(map[string]any)["generation"] = 1
	req := testutil.FirstSync(parent)
	podObj := corev1.Pod{}
	podObj.APIVersion, podObj.Kind = "v1", "Pod"
	podObj.Name, podObj.Namespace = name+"-7d9f8b6c5-abcde", "default"
	podObj.Labels = memcached.SelectorLabels(name)
	podObj.Status.Phase = corev1.PodPending
	podObj.Status.InitContainerStatuses = []corev1.ContainerStatus{{
		Name:  "check",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: int32(f.ExitCode), Reason: "Error", Message: kubeletTail(f.Output),
		}},
	}}
	req["related"] = map[string]any{"Pod.v1": map[string]any{"default/" + podObj.Name: podObj}}
	body := testutil.MustMarshal(t, req)
	decoded, err := metacontroller.DecodeSyncRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	a, err := memcached.Sync(decoded, fixedNow, hookOptions)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range a.Response.Status.Conditions {
		if c.Type == memcached.ConditionDegraded {
			return c.Reason + ": " + c.Message
		}
	}
	return ""
}

// kubeletTail is what kubelet keeps of a container's logs as its
// termination message: the last 80 lines, at most 2048 bytes.
func kubeletTail(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) > 80 {
		lines = lines[len(lines)-80:]
	}
	s := strings.Join(lines, "\n")
	if len(s) > 2048 {
		s = s[len(s)-2048:]
	}
	return s
}

// exampleUser is the user secretsFor writes into every auth Secret.
const exampleUser, examplePassword = "app", "example-password"

// secretsFor makes a Secret for each Secret volume of a Pod template, as
// a user following the README would: a certificate with ca.crt for a tls
// volume, one user for an auth volume.
func secretsFor(t *testing.T, tmpl corev1.PodTemplateSpec) map[string]map[string][]byte {
	t.Helper()
	out := map[string]map[string][]byte{}
	for _, v := range tmpl.Spec.Volumes {
		switch {
		case v.Secret == nil:
		case v.Name == "tls":
			out[v.Secret.SecretName] = tlsSecret(t, testutil.NewCA(t, "example CA"), "example")
		case v.Name == "auth":
			out[v.Secret.SecretName] = usersSecret(exampleUser + ":" + examplePassword)
		default:
			t.Fatalf("volume %s of Secret %s: no test Secret for it", v.Name, v.Secret.SecretName)
		}
	}
	return out
}

// statsSettings asks the Pod's memcached for its settings the way its
// mode allows: in plain text on loopback under TLS, logged in with
// secretsFor's user under authentication (over the binary protocol under
// SASL, where memcached speaks nothing else).
func statsSettings(t *testing.T, p *pod.Pod, tmpl corev1.PodTemplateSpec) map[string]string {
	t.Helper()
	args := strings.Join(tmpl.Spec.Containers[0].Args, " ")
	port := memcached.Port
	if strings.Contains(args, "notls:") {
		port = memcached.LocalPort
	}
	waitListening(t, p, port)
	switch {
	case strings.Contains(args, " -S"):
		c := dialBinary(t, p, port)
		if st, err := c.login(exampleUser, examplePassword); err != nil || st != statusOK {
			t.Fatalf("SASL login: status %#x, %v", st, err)
		}
		s, err := c.stats("settings")
		if err != nil {
			t.Fatal(err)
		}
		return s
	case strings.Contains(args, " -Y "):
		c := dial(t, p, port)
		cred := exampleUser + " " + examplePassword
		if got, err := textCommand(c.conn, fmt.Sprintf("set auth 0 0 %d\r\n%s\r\n", len(cred), cred)); got != "STORED" {
			t.Fatalf("ASCII login: %q, %v", got, err)
		}
		return c.stats(t, "stats settings")
	}
	return dial(t, p, port).stats(t, "stats settings")
}
