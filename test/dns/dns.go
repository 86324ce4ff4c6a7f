// Package dns runs a real CoreDNS for tests, its kubernetes plugin
// watching a test API server (test/kube), and asks it questions the way a
// client in the cluster does: so that the names the operator's children
// give (a slot's NAME-<slot>.NAME-slots.<namespace>.svc.cluster.local, its
// SRV records) are proved against the DNS server clusters run, not against
// a reading of its documentation.
//
//	c := kube.Start(t, kube.Options{})
//	srv := dns.Start(t, dns.Options{Kubeconfig: c.Kubeconfig()})
//	addrs, err := srv.LookupA(srv.FQDN("cache-0.cache-slots.default.svc"))
//
// The binary is built by `make test` (test/tools/coredns.mk: CoreDNS with
// only the plugins the Corefile below uses) and found through COREDNS_BIN;
// without it the test skips, or fails when CI is set (testutil.Program).
//
// The server answers for the cluster domain only, from the API server's
// Services and EndpointSlices: no cache plugin, so a change reaches the
// answers as soon as CoreDNS's watch delivers it (a cluster's default
// Corefile adds `cache 30`, bounded by the records' TTL). The lookups use
// Go's own resolver, dialing this server whatever /etc/resolv.conf says.
package dns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/example/memcached-operator/test/testutil"
)

// EnvCoreDNS names the variable holding the CoreDNS binary.
const EnvCoreDNS = "COREDNS_BIN"

const (
	// DefaultTTL is the TTL of the answers, in seconds, when Options gives
	// none: the kubernetes plugin's own default.
	DefaultTTL = 5
	// DefaultDomain is the cluster domain when Options gives none.
	DefaultDomain = "cluster.local"

	// startTimeout bounds the wait for the first synced answer. The
	// kubernetes plugin waits up to 5 s for its watches when it starts
	// (startup_timeout), and answers SERVFAIL for a name it does not know
	// until they have synced.
	startTimeout = 30 * time.Second
	// stopTimeout is how long CoreDNS has to exit on SIGTERM before it is
	// killed.
	stopTimeout = 5 * time.Second
	// lookupTimeout bounds one lookup, so that a poll of lookups keeps to
	// its own deadline.
	lookupTimeout = 2 * time.Second
	// startAttempts is how often Start tries another free port when the one
	// it picked was taken between picking and binding it.
	startAttempts = 3
	// maxLogOutput bounds how much of CoreDNS's output a failed test prints.
	maxLogOutput = 64 << 10
	// probeLabel names the Service in a namespace of the same name that
	// Start asks for while it waits: it does not exist, so the synced
	// kubernetes plugin answers NXDOMAIN, and SERVFAIL before it has synced.
	probeLabel = "coredns-start-probe"
)

// Options say where CoreDNS listens and what it serves.
type Options struct {
	// Kubeconfig is the path of a kubeconfig for the API server whose
	// Services and EndpointSlices CoreDNS answers from
	// (kube.Cluster.Kubeconfig). Required.
	Kubeconfig string
	// IP is the address CoreDNS listens on, UDP and TCP; 127.0.0.1 when
	// unset.
	IP netip.Addr
	// Port is the port CoreDNS listens on; 0 picks a free one. 53 needs
	// root (or CAP_NET_BIND_SERVICE).
	Port int
	// TTL is the TTL of the answers in seconds; DefaultTTL when 0.
	TTL int
	// Domain is the cluster domain, the zone CoreDNS answers for;
	// DefaultDomain when empty.
	Domain string
}

// Server is a running CoreDNS. Its methods are safe for concurrent use.
type Server struct {
	addr     netip.AddrPort
	domain   string
	ttl      int
	resolver *net.Resolver
}

// Start starts CoreDNS as opts say and returns once it answers from a
// synced view of the API server. It stops CoreDNS when t ends, and prints
// its output (every query, through the log plugin) if t failed. It skips
// t when COREDNS_BIN names no file, or fails it when CI is set.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	bin := testutil.Program(t, EnvCoreDNS, "CoreDNS (make coredns)")
	if opts.Kubeconfig == "" {
		t.Fatal("dns.Start: Options.Kubeconfig is required")
	}
	if !opts.IP.IsValid() {
		opts.IP = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	if opts.TTL == 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Domain == "" {
		opts.Domain = DefaultDomain
	}
	opts.Domain = strings.Trim(opts.Domain, ".")
	dir := t.TempDir()

	var lastErr error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		port := opts.Port
		if port == 0 {
			var err error
			if port, err = freePort(opts.IP); err != nil {
				t.Fatalf("dns.Start: %v", err)
			}
		}
		s := &Server{addr: netip.AddrPortFrom(opts.IP, uint16(port)), domain: opts.Domain, ttl: opts.TTL}
		s.resolver = s.newResolver()
		p, err := s.launch(bin, dir, attempt, opts.Kubeconfig)
		if err != nil {
			t.Fatalf("dns.Start: %v", err)
		}
		t.Cleanup(func() {
			p.stop()
			if t.Failed() {
				t.Logf("CoreDNS at %s (%s):\n%s", s.addr, p.logPath, tail(p.logPath))
			}
		})
		began := time.Now()
		if lastErr = s.waitSynced(p); lastErr == nil {
			t.Logf("CoreDNS at %s answering for %s after %s", s.addr, s.domain, time.Since(began).Round(time.Millisecond))
			return s
		}
		p.stop()
		if opts.Port != 0 || !p.portTaken() {
			break
		}
		t.Logf("CoreDNS: port %d was taken before it bound it; trying another", port)
	}
	t.Fatalf("dns.Start: %v", lastErr)
	return nil
}

// Addr is the address and port CoreDNS listens on, UDP and TCP.
func (s *Server) Addr() netip.AddrPort { return s.addr }

// Domain is the cluster domain it answers for, without dots at either end.
func (s *Server) Domain() string { return s.domain }

// TTL is the TTL of its answers.
func (s *Server) TTL() time.Duration { return time.Duration(s.ttl) * time.Second }

// FQDN is name under the cluster domain, absolute (ending in a dot):
// FQDN("cache-0.cache-slots.default.svc") is
// "cache-0.cache-slots.default.svc.cluster.local.".
func (s *Server) FQDN(name string) string {
	return strings.TrimSuffix(name, ".") + "." + s.domain + "."
}

// Resolver is Go's resolver asking this server only, whatever
// /etc/resolv.conf names, over UDP and, for a truncated answer, TCP. It
// still applies resolv.conf's search list and ndots to a relative name,
// and reads /etc/hosts first for address lookups: give it absolute names.
func (s *Server) Resolver() *net.Resolver { return s.resolver }

// LookupA asks for name's A records (name is made absolute if it is not)
// and returns the addresses sorted. A name CoreDNS does not know, or one
// without A records, gives an error IsNotFound reports; a failure to
// answer (a timeout, the SERVFAIL of a plugin not synced yet) gives
// another. One lookup takes at most a few seconds, so that a poll of them
// keeps to its deadline.
func (s *Server) LookupA(name string) ([]netip.Addr, error) {
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	addrs, err := s.resolver.LookupNetIP(ctx, "ip4", absolute(name))
	if err != nil {
		return nil, err
	}
	for i, a := range addrs {
		addrs[i] = a.Unmap()
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	return addrs, nil
}

// LookupSRV asks for name's SRV records, name whole
// ("_memcached._tcp.cache-slots.default.svc.cluster.local.", made
// absolute if it is not), and returns them sorted by target and port
// rather than in the weighted random order of net.LookupSRV. Errors as
// for LookupA.
func (s *Server) LookupSRV(name string) ([]*net.SRV, error) {
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	_, srvs, err := s.resolver.LookupSRV(ctx, "", "", absolute(name))
	if err != nil {
		return nil, err
	}
	slices.SortFunc(srvs, func(a, b *net.SRV) int {
		if c := strings.Compare(a.Target, b.Target); c != 0 {
			return c
		}
		return int(a.Port) - int(b.Port)
	})
	return srvs, nil
}

// IsNotFound says whether err is a DNS answer that the name does not exist
// or has no record of the type asked (NXDOMAIN or NODATA), as opposed to a
// failure to answer.
func IsNotFound(err error) bool {
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr) && dnsErr.IsNotFound
}

// absolute is name with a trailing dot, so that no search list applies.
func absolute(name string) string {
	if strings.HasSuffix(name, ".") {
		return name
	}
	return name + "."
}

// newResolver is a pure-Go resolver whose every connection goes to s,
// over the network (udp or tcp) the resolver asks for.
func (s *Server) newResolver() *net.Resolver {
	addr := s.addr.String()
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
}

// corefile is the configuration Start runs CoreDNS with: one server block
// for the cluster domain, the log plugin writing every query to the
// output a failed test prints, the kubernetes plugin with the API server
// of kubeconfig and the TTL asked. Not `pods insecure` or `fallthrough`: a
// cluster's default Corefile has them for Pod A records and for the
// reverse zones, which the slots' names do not use.
func (s *Server) corefile(kubeconfig string) string {
	return fmt.Sprintf(`%s:%d {
	bind %s
	errors
	log
	kubernetes %s {
		kubeconfig %s
		ttl %d
	}
}
`, s.domain, s.addr.Port(), s.addr.Addr(), s.domain, strconv.Quote(kubeconfig), s.ttl)
}

// launch writes the Corefile into dir and starts CoreDNS with it, its
// output in dir/coredns-<attempt>.log.
func (s *Server) launch(bin, dir string, attempt int, kubeconfig string) (*process, error) {
	conf := filepath.Join(dir, fmt.Sprintf("Corefile-%d", attempt))
	if err := os.WriteFile(conf, []byte(s.corefile(kubeconfig)), 0o644); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, fmt.Sprintf("coredns-%d.log", attempt))
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child keeps its own descriptor
	cmd := exec.Command(bin, "-conf", conf)
	cmd.Dir = dir
	// Without KUBECONFIG, a developer's own never reaches the plugin.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "KUBECONFIG=") })
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting CoreDNS: %w", err)
	}
	p := &process{logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// waitSynced asks for a Service that does not exist until the answer is
// NXDOMAIN: CoreDNS listens, and its kubernetes plugin has synced its
// watches (before, it answers SERVFAIL for a name it does not know).
func (s *Server) waitSynced(p *process) error {
	probe := s.FQDN(probeLabel + "." + probeLabel + ".svc")
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-p.done:
			return fmt.Errorf("CoreDNS exited before it answered: %v; its output (%s):\n%s", p.err, p.logPath, tail(p.logPath))
		default:
		}
		_, err := s.LookupA(probe)
		if IsNotFound(err) {
			return nil
		}
		if err == nil {
			return fmt.Errorf("CoreDNS answered an address for %s, which names no Service", probe)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CoreDNS at %s gave no synced answer within %s; last: %v; its output (%s):\n%s", s.addr, startTimeout, err, p.logPath, tail(p.logPath))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// process is CoreDNS running.
type process struct {
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited
	err     error         // Wait's result, valid after done is closed
}

// stop sends SIGTERM, waits up to stopTimeout, then kills the process.
func (p *process) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// portTaken says whether CoreDNS exited because its port was in use.
func (p *process) portTaken() bool {
	select {
	case <-p.done:
	default:
		return false
	}
	out, _ := os.ReadFile(p.logPath)
	return strings.Contains(string(out), "address already in use")
}

// freePort is a port free on ip for both TCP and UDP. It is only reserved
// until freePort returns, so Start retries on a conflict.
func freePort(ip netip.Addr) (int, error) {
	for range 20 {
		l, err := net.Listen("tcp", netip.AddrPortFrom(ip, 0).String())
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", netip.AddrPortFrom(ip, uint16(port)).String())
		l.Close()
		if err == nil {
			u.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("no port free for both TCP and UDP on %s", ip)
}

// tail is the end of a log file, at most maxLogOutput bytes of it.
func tail(path string) string {
	out, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(out) > maxLogOutput {
		out = append([]byte("...\n"), out[len(out)-maxLogOutput:]...)
	}
	return string(out)
}
