// Command memclient is the Go memcached clients a user of the operator
// meets, for the tests to drive: Grafana dskit's cache.MemcachedClient
// (what Mimir, Loki and Tempo cache with) and bradfitz/gomemcache, each set
// up the way its users set it up. It speaks test/clients/node/client.mjs's
// protocol, so that a test drives every client alike:
//
//	memclient dskit ADDRESS[,ADDRESS...] [REFRESH_MS]
//	memclient gomemcache HOST:PORT[,HOST:PORT...]
//
// dskit takes its addresses as Mimir's -*.memcached.addresses does: a
// name or IP with its port, or DNS service discovery
// (dnssrvnoa+_memcached._tcp.cache-slots.default.svc.cluster.local, the SRV
// record's targets kept as names). Its client resolves them again every
// 30 s, a constant; REFRESH_MS makes it also do so every REFRESH_MS (see
// refreshLoop). gomemcache is given a fixed list, resolved once when it
// starts, as memcache.New does.
//
// It reads one JSON command a line on stdin and writes one JSON line on
// stdout per answer and per event:
//
//	{"op":"set","prefix":"k","n":300,"size":100}   -> {"op":"set","ok":300,"errors":0}
//	{"op":"set","prefix":"k","n":300,"value":"v2"} -> the same, every value "v2"
//	{"op":"get","prefix":"k","n":300}              -> {"op":"get","hits":290,"misses":10,"errors":0}
//	{"op":"nodes"}                                 -> {"op":"nodes","nodes":["127.0.27.1:11211",...]}
//	{"op":"quit"}                                  -> exits
//
// nodes are the addresses the client hashes keys over now, in its order,
// resolved to IP:port (what it connects to). dskit emits
// {"event":"servers","nodes":[...]} whenever that list changes, the first
// time once it has one.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/grafana/dskit/cache"
	"github.com/prometheus/client_golang/prometheus"
)

// timeout is every client's socket timeout: client.mjs's, so that a
// loaded test machine does not turn a slow answer into a miss (dskit's
// default is 200 ms, gomemcache's 100 ms). It changes no key's server.
const timeout = 2 * time.Second

// client is one library, set up.
type client interface {
	// set stores value under key.
	set(key string, value []byte) error
	// get fetches key: hit or not, or an error.
	get(key string) (value []byte, hit bool, err error)
	// nodes are the servers keys are hashed over now, IP:port, in order.
	nodes() []string
	close()
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "memclient:", err)
		os.Exit(2)
	}
}

func run(args []string) error {
	if len(args) < 2 {
		return errors.New("usage: memclient dskit ADDRESS[,ADDRESS...] [REFRESH_MS] | gomemcache HOST:PORT[,HOST:PORT...]")
	}
	out := &emitter{w: bufio.NewWriter(os.Stdout)}
	var c client
	var err error
	switch mode, list := args[0], strings.Split(args[1], ","); mode {
	case "dskit":
		var refresh time.Duration
		if len(args) > 2 {
			ms, err := strconv.Atoi(args[2])
			if err != nil || ms <= 0 {
				return fmt.Errorf("REFRESH_MS %q: a positive number of milliseconds", args[2])
			}
			refresh = time.Duration(ms) * time.Millisecond
		}
		c, err = newDskit(list, refresh, out)
	case "gomemcache":
		c, err = newGomemcache(list)
	default:
		return fmt.Errorf("unknown mode %q (dskit or gomemcache)", mode)
	}
	if err != nil {
		return err
	}
	defer c.close()
	return serve(c, os.Stdin, out)
}

// command is one line of input.
type command struct {
	Op     string  `json:"op"`
	Prefix string  `json:"prefix"`
	N      int     `json:"n"`
	Size   int     `json:"size"`
	Value  *string `json:"value"`
	// Expect, on a get, is the value every hit should have: a hit with
	// another is counted stale.
	Expect *string `json:"expect"`
	// Previous, with Expect, is the value written before it: the stale
	// hits that have it are counted previous too.
	Previous *string `json:"previous"`
}

// serve answers the commands on in until quit or the end of input.
func serve(c client, in *os.File, out *emitter) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var cmd command
		if err := json.Unmarshal(sc.Bytes(), &cmd); err != nil {
			return fmt.Errorf("command %q: %v", sc.Text(), err)
		}
		switch cmd.Op {
		case "set":
			value := []byte(strings.Repeat("v", orDefault(cmd.Size, 100)))
			if cmd.Value != nil {
				value = []byte(*cmd.Value)
			}
			ok, errs := 0, 0
			for i := range cmd.N {
				if err := c.set(cmd.Prefix+strconv.Itoa(i), value); err != nil {
					errs++
				} else {
					ok++
				}
			}
			out.emit(map[string]any{"op": "set", "ok": ok, "errors": errs})
		case "get":
			hits, misses, errs, stale, previous := 0, 0, 0, 0, 0
			for i := range cmd.N {
				switch v, hit, err := c.get(cmd.Prefix + strconv.Itoa(i)); {
				case err != nil:
					errs++
				case hit:
					hits++
					if cmd.Expect != nil && string(v) != *cmd.Expect {
						stale++
						if cmd.Previous != nil && string(v) == *cmd.Previous {
							previous++
						}
					}
				default:
					misses++
				}
			}
			out.emit(map[string]any{"op": "get", "hits": hits, "misses": misses, "errors": errs, "stale": stale, "previous": previous})
		case "nodes":
			out.emit(map[string]any{"op": "nodes", "nodes": c.nodes()})
		case "quit":
			return nil
		default:
			return fmt.Errorf("unknown op %q", cmd.Op)
		}
	}
	return sc.Err()
}

// orDefault is n, or def when n is not set.
func orDefault(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

// emitter writes JSON lines; the command loop and dskit's watcher share it.
type emitter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (e *emitter) emit(v any) {
	b, _ := json.Marshal(v)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.w.Write(append(b, '\n'))
	e.w.Flush()
}

// ---- dskit -------------------------------------------------------------------

// dskitClient is cache.MemcachedClient made by NewMemcachedClientWithConfig
// with the defaults Mimir's flags give it: jump hash over the naturally
// sorted server list, addresses resolved by dskit's DNS provider (miekg/dns,
// /etc/resolv.conf) and the names then by Go's resolver (/etc/hosts, DNS).
type dskitClient struct {
	c        *cache.MemcachedClient
	reg      *prometheus.Registry
	selector *cache.MemcachedJumpHashSelector
	// failed is failures() when a get last read it.
	failed float64
	stop   chan struct{}
	done   sync.WaitGroup
}

func newDskit(addresses []string, refresh time.Duration, out *emitter) (*dskitClient, error) {
	var cfg cache.MemcachedClientConfig
	cfg.RegisterFlagsWithPrefix("memcached.", flag.NewFlagSet("memclient", flag.ContinueOnError)) // the defaults users get
	cfg.Addresses = addresses
	cfg.Timeout, cfg.ConnectTimeout = timeout, timeout
	logger := level.NewFilter(log.NewLogfmtLogger(log.NewSyncWriter(os.Stderr)), level.AllowInfo())
	reg := prometheus.NewRegistry()
	c, err := cache.NewMemcachedClientWithConfig(logger, "memclient", cfg, reg)
	if err != nil {
		return nil, fmt.Errorf("dskit: %v", err)
	}
	selector, err := dskitSelector(c)
	if err != nil {
		c.Stop()
		return nil, err
	}
	d := &dskitClient{c: c, reg: reg, selector: selector, stop: make(chan struct{})}
	d.done.Add(1)
	go d.watch(out)
	if refresh > 0 {
		d.done.Add(1)
		go d.refreshLoop(refresh, logger)
	}
	return d, nil
}

// dskitResolveAddrs is dskit's own (*MemcachedClient).resolveAddrs: its
// DNS provider resolves the configured addresses and the selector takes
// the result. dskit's resolveAddrsLoop calls it every
// dnsProviderUpdateInterval, a constant 30 s in package cache that no
// configuration changes (Thanos made it a setting,
// dns_provider_update_interval, default 10 s). A test cannot wait 30 s a
// step, so refreshLoop calls the very same function more often: what
// dskit does on each refresh is unchanged, only its period is shorter.
//
//go:linkname dskitResolveAddrs github.com/grafana/dskit/cache.(*MemcachedClient).resolveAddrs
func dskitResolveAddrs(c *cache.MemcachedClient) error

// refreshLoop runs dskit's refresh every period, beside its own 30 s one,
// logging a failure as dskit's loop does.
func (d *dskitClient) refreshLoop(period time.Duration, logger log.Logger) {
	defer d.done.Done()
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
			if err := dskitResolveAddrs(d.c); err != nil {
				level.Warn(logger).Log("msg", "failed update memcached servers list", "err", err)
			}
		}
	}
}

// dskitSelector is the client's jump-hash selector, which it keeps in an
// unexported field: memclient reads it only to report the servers keys are
// hashed over (nodes and the servers event), never to change it. It fails
// when a dskit version lays the client out otherwise.
func dskitSelector(c *cache.MemcachedClient) (*cache.MemcachedJumpHashSelector, error) {
	f := reflect.ValueOf(c).Elem().FieldByName("selector")
	if !f.IsValid() {
		return nil, errors.New("dskit: cache.MemcachedClient has no selector field (another dskit version?)")
	}
	v := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface()
	s, ok := v.(*cache.MemcachedJumpHashSelector)
	if !ok {
		return nil, fmt.Errorf("dskit: the client's selector is a %T, not a *cache.MemcachedJumpHashSelector", v)
	}
	return s, nil
}

// watch emits a servers event whenever the list keys are hashed over
// changes, checking every 50 ms, so that a test sees when the client took
// a DNS change.
func (d *dskitClient) watch(out *emitter) {
	defer d.done.Done()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	var last []string
	for {
		if now := d.nodes(); len(now) > 0 && !slices.Equal(now, last) {
			out.emit(map[string]any{"event": "servers", "nodes": now})
			last = now
		}
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
	}
}

func (d *dskitClient) set(key string, value []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*timeout)
	defer cancel()
	err := d.c.Set(ctx, key, value, 0)
	if err != nil {
		d.failed = d.failures() // counted there too: not a get's
	}
	return err
}

// get is GetMulti of one key (dskit's Cache has no single get). GetMulti
// answers the items it got and counts a failed request in
// cache_operation_failures_total rather than returning it: a miss with a
// rise of that counter is the error. Commands run one at a time, so the
// count is read only after a miss (a Gather costs about a millisecond).
func (d *dskitClient) get(key string) ([]byte, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*timeout)
	defer cancel()
	got := d.c.GetMulti(ctx, []string{key})
	if v, ok := got[key]; ok {
		return v, true, nil
	}
	before := d.failed
	d.failed = d.failures()
	if d.failed > before {
		return nil, false, errors.New("getmulti failed")
	}
	return nil, false, nil
}

// failures is dskit's count of failed requests, all operations and reasons.
func (d *dskitClient) failures() float64 {
	families, err := d.reg.Gather()
	if err != nil {
		return 0
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() != "cache_operation_failures_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

func (d *dskitClient) nodes() []string { return addrs(d.selector.Each) }

// addrs lists the servers a selector's Each walks.
func addrs(each func(func(net.Addr) error) error) []string {
	var list []string
	_ = each(func(a net.Addr) error {
		list = append(list, a.String())
		return nil
	})
	return list
}

func (d *dskitClient) close() {
	close(d.stop)
	d.done.Wait()
	d.c.Stop()
}

// ---- gomemcache --------------------------------------------------------------

// gomemcacheClient is memcache.New(servers...): a ServerList, each name
// resolved once, keys placed by CRC-32 modulo the list's length.
type gomemcacheClient struct {
	c       *memcache.Client
	servers *memcache.ServerList
}

func newGomemcache(servers []string) (*gomemcacheClient, error) {
	// memcache.New, with the ServerList kept to report it.
	ss := new(memcache.ServerList)
	if err := ss.SetServers(servers...); err != nil {
		return nil, fmt.Errorf("gomemcache: %v", err)
	}
	c := memcache.NewFromSelector(ss)
	c.Timeout = timeout
	return &gomemcacheClient{c: c, servers: ss}, nil
}

func (g *gomemcacheClient) set(key string, value []byte) error {
	return g.c.Set(&memcache.Item{Key: key, Value: value})
}

func (g *gomemcacheClient) get(key string) ([]byte, bool, error) {
	switch it, err := g.c.Get(key); {
	case err == nil:
		return it.Value, true, nil
	case errors.Is(err, memcache.ErrCacheMiss):
		return nil, false, nil
	default:
		return nil, false, err
	}
}

func (g *gomemcacheClient) nodes() []string { return addrs(g.servers.Each) }

func (g *gomemcacheClient) close() { _ = g.c.Close() }
