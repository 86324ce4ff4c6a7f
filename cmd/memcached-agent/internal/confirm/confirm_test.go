package confirm

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example/memcached-operator/cmd/memcached-agent/internal/report"
	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/test/dataplane"
	"github.com/example/memcached-operator/test/memcachedtest"
	"github.com/example/memcached-operator/test/testutil"
)

// TestParseWatchLine reads lines as memcached 1.6.45 sends them to a
// watcher of proxyuser (logger.c: "ts=%lld.%d gid=%llu type=proxy_user
// msg=%s"; the microseconds are not zero-padded).
func TestParseWatchLine(t *testing.T) {
	tests := []struct {
		name    string
		line    string
		want    []contract.ZoneVersion
		wantOK  bool
		wantErr bool
	}{
		{name: "zones", line: "ts=1795950413.106 gid=2 type=proxy_user msg=memcached-proxy-pool: loaded a=1767225600000 b=7 (2 tables)",
			want: []contract.ZoneVersion{{Zone: "a", Version: 1767225600000}, {Zone: "b", Version: 7}}, wantOK: true},
		{name: "without zones", line: "ts=1795950414.9163 gid=3 type=proxy_user msg=memcached-proxy-pool: loaded =5 (1 tables)",
			want: []contract.ZoneVersion{{Version: 5}}, wantOK: true},
		{name: "versions unknown", line: "ts=1.5 gid=1 type=proxy_user msg=memcached-proxy-pool: loaded (0 tables)", want: []contract.ZoneVersion{}, wantOK: true},
		{name: "cut short", line: "ts=1795950421.121 gid=2 type=proxy_user msg=memcached-proxy-pool: loaded a=1 b=1767", wantErr: true},
		{name: "a count that does not match", line: "ts=1.5 gid=1 type=proxy_user msg=memcached-proxy-pool: loaded =5 (2 tables)", wantErr: true},
		{name: "another user log message", line: "ts=1.5 gid=1 type=proxy_user msg=memcached-proxy-pool: pool version 5: 2 slots, 0 down"},
		{name: "a message of another program", line: "ts=1.5 gid=1 type=proxy_user msg=loaded =5 (1 tables)"},
		{name: "another type", line: "ts=1.5 gid=1 type=proxy_conf status=done"},
		{name: "lines the watcher missed", line: "skipped=12"},
		{name: "the watch's answer", line: "OK"},
		{name: "no gid", line: "ts=1.2 type=proxy_user msg=memcached-proxy-pool: loaded =5 (1 tables)"},
		{name: "a bad timestamp", line: "ts=x.2 gid=1 type=proxy_user msg=memcached-proxy-pool: loaded =5 (1 tables)"},
		{name: "empty", line: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := ParseWatchLine([]byte(tt.line))
			if (err != nil) != tt.wantErr || ok != tt.wantOK || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseWatchLine(%q) = %v, %v, %v; want %v, %v, error %v", tt.line, got, ok, err, tt.want, tt.wantOK, tt.wantErr)
			}
		})
	}
}

// FuzzWatchLine feeds arbitrary lines to ParseWatchLine: it must not
// panic, and what it takes is an announcement LoadedMessage writes back
// the same, of zones the pool file takes and versions in int64 that are
// not negative.
func FuzzWatchLine(f *testing.F) {
	for _, s := range []string{
		"ts=1795950413.106 gid=2 type=proxy_user msg=memcached-proxy-pool: loaded a=1767225600000 b=7 (2 tables)",
		"ts=1.5 gid=1 type=proxy_user msg=memcached-proxy-pool: loaded =5 (1 tables)",
		"ts=1.5 gid=1 type=proxy_user msg=memcached-proxy-pool: loaded (0 tables)",
		"ts=1795950421.121 gid=2 type=proxy_user msg=memcached-proxy-pool: loaded a=1 b=1767",
		"ts=1.5 gid=1 type=proxy_user msg=memcached-proxy-pool: pool version 5: 2 slots, 0 down",
		"skipped=12",
		"OK",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		tables, ok, err := ParseWatchLine(line)
		if !ok {
			if tables != nil {
				t.Fatalf("ParseWatchLine(%q) = %v, not ok", line, tables)
			}
			return
		}
		if err != nil {
			t.Fatalf("ParseWatchLine(%q) is ok with an error: %v", line, err)
		}
		_, msg, _ := strings.Cut(string(line), userLogField)
		if back := contract.LoadedMessage(tables); back != msg {
			t.Fatalf("ParseWatchLine(%q) = %v, which LoadedMessage writes %q", line, tables, back)
		}
		seen := map[string]bool{}
		for _, tv := range tables {
			if tv.Version < 0 || seen[tv.Zone] || tv.Zone != "" && !contract.ZoneNameOK(tv.Zone) {
				t.Fatalf("ParseWatchLine(%q) took %v", line, tables)
			}
			seen[tv.Zone] = true
		}
	})
}

// counter is an Observer that counts, and keeps what is loaded.
type counter struct {
	mu                              sync.Mutex
	loaded                          []*Loaded
	watchFailed, refused, putFailed int
}

func (c *counter) ProxyLoaded(l *Loaded) { c.mu.Lock(); c.loaded = append(c.loaded, l); c.mu.Unlock() }
func (c *counter) ProxyWatchFailed()     { c.mu.Lock(); c.watchFailed++; c.mu.Unlock() }
func (c *counter) ProxyLineRefused()     { c.mu.Lock(); c.refused++; c.mu.Unlock() }
func (c *counter) reportFailed()         { c.mu.Lock(); c.putFailed++; c.mu.Unlock() }

func (c *counter) counts() (watchFailed, refused, putFailed int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.watchFailed, c.refused, c.putFailed
}

// peer is something listening where the proxy should: each connection
// it accepts is handed to the next of its sessions, which reads the
// watch command and writes what it likes.
type peer struct {
	ln       net.Listener
	sessions chan func(c net.Conn, r *bufio.Reader)
}

func startPeer(t *testing.T) *peer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &peer{ln: ln, sessions: make(chan func(net.Conn, *bufio.Reader), 10)}
	var wg sync.WaitGroup
	closed := make(chan struct{})
	t.Cleanup(func() { ln.Close(); close(closed); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				r := bufio.NewReader(c)
				if cmd, err := r.ReadString('\n'); err != nil || cmd != "watch proxyuser\r\n" {
					t.Errorf("the watcher sent %q, %v", cmd, err)
					return
				}
				select {
				case s := <-p.sessions:
					s(c, r)
				case <-closed:
				}
			})
		}
	})
	return p
}

// announce is a watch line of an announcement of tables.
func announce(tables ...contract.ZoneVersion) string {
	return "ts=1795950413.106 gid=2 type=proxy_user msg=" + contract.LoadedMessage(tables) + "\n"
}

// TestWatcherSurvivesWhatItIsSent points a Watcher at a peer that is not
// a well-behaved proxy: lines far over MaxLine, announcements cut short
// or malformed, bytes of no protocol, an answer to the watch that is not
// OK, connections closed. The Watcher skips what it does not take,
// counts it, connects again, and takes each good announcement.
func TestWatcherSurvivesWhatItIsSent(t *testing.T) {
	p := startPeer(t)
	obs := &counter{}
	w := NewWatcher(p.ln.Addr().String(), slog.New(slog.DiscardHandler), obs, time.Now)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	wantLoaded := func(want ...contract.ZoneVersion) {
		t.Helper()
		testutil.Eventually(t, 10*time.Second, func() error {
			if cur := w.Current(); cur == nil || !reflect.DeepEqual(cur.Tables, want) {
				return fmt.Errorf("Current() = %v, want %v", cur, want)
			}
			return nil
		})
	}
	p.sessions <- func(c net.Conn, _ *bufio.Reader) {
		io.WriteString(c, "OK\r\n")
		io.WriteString(c, "ts=1.5 gid=1 type=proxy_user msg="+strings.Repeat("x", 10*MaxLine)+"\n")
		io.WriteString(c, "ts=1.5 gid=2 type=proxy_user msg=memcached-proxy-pool: loaded =5 (1 tab\n")
		io.WriteString(c, "ts=1.5 gid=3 type=proxy_user msg=memcached-proxy-pool: loaded =05 (1 tables)\n")
		io.WriteString(c, "\x00\xff\r\n\n\n")
		io.WriteString(c, announce(contract.ZoneVersion{Version: 5}))
		time.Sleep(100 * time.Millisecond)
	}
	wantLoaded(contract.ZoneVersion{Version: 5})
	// The peer closed; the next answers the watch wrongly; the one after
	// announces zones.
	p.sessions <- func(c net.Conn, _ *bufio.Reader) { io.WriteString(c, "ERROR\r\n") }
	p.sessions <- func(c net.Conn, _ *bufio.Reader) {
		io.WriteString(c, "OK\r\n"+announce(contract.ZoneVersion{Zone: "a", Version: 7}, contract.ZoneVersion{Zone: "b", Version: 6}))
		time.Sleep(time.Second)
	}
	wantLoaded(contract.ZoneVersion{Zone: "a", Version: 7}, contract.ZoneVersion{Zone: "b", Version: 6})
	if failed, refused, _ := obs.counts(); failed < 2 || refused != 3 {
		t.Errorf("the observer counted %d failed watches and %d refused lines; want at least 2 and 3", failed, refused)
	}
}

// TestWatcherForgetsAQuietProxy checks that what a proxy said is known
// for Quiet after it said it, and not after.
func TestWatcherForgetsAQuietProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for Quiet")
	}
	p := startPeer(t)
	obs := &counter{}
	w := NewWatcher(p.ln.Addr().String(), slog.New(slog.DiscardHandler), obs, time.Now)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	held := make(chan struct{})
	p.sessions <- func(c net.Conn, _ *bufio.Reader) {
		io.WriteString(c, "OK\r\n"+announce(contract.ZoneVersion{Version: 5}))
		<-held // connected and quiet
	}
	defer close(held)
	var said time.Time
	testutil.Eventually(t, 10*time.Second, func() error {
		cur := w.Current()
		if cur == nil {
			return fmt.Errorf("nothing heard yet")
		}
		said = cur.At
		return nil
	})
	testutil.Eventually(t, 3*Quiet, func() error {
		if w.Current() != nil {
			return fmt.Errorf("still known")
		}
		return nil
	})
	if since := time.Since(said); since < Quiet {
		t.Errorf("forgotten %s after the proxy said it, before Quiet (%s)", since, Quiet)
	}
}

// TestReporterRetries reports through a report.File in a directory that
// does not exist yet: each write fails, and is tried again until the
// directory is made; a change is reported; the report is taken out when
// Run ends.
func TestReporterRetries(t *testing.T) {
	p := startPeer(t)
	obs := &counter{}
	logger := slog.New(slog.DiscardHandler)
	w := NewWatcher(p.ln.Addr().String(), logger, obs, time.Now)
	dir := filepath.Join(t.TempDir(), "later")
	path := filepath.Join(dir, "reports.json")
	r := NewReporter(contract.ProxyReportKey("cache-proxy-0"), report.NewFile(path, logger), w, logger, obs.reportFailed)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx) })
	wg.Go(func() { r.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	next := make(chan string)
	p.sessions <- func(c net.Conn, _ *bufio.Reader) {
		io.WriteString(c, "OK\r\n")
		for line := range next {
			io.WriteString(c, line)
		}
	}
	say := func(tables ...contract.ZoneVersion) {
		// Said again and again, as the proxy does.
		for range 3 {
			next <- announce(tables...)
		}
	}
	held := func() map[string]string {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		var data map[string]string
		if err := json.Unmarshal(b, &data); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		return data
	}
	say(contract.ZoneVersion{Version: 5})
	testutil.Eventually(t, 10*time.Second, func() error {
		if _, _, n := obs.counts(); n < 2 {
			return fmt.Errorf("%d writes failed", n)
		}
		return nil
	})
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	key := contract.ProxyReportKey("cache-proxy-0")
	for _, want := range []string{`{"loaded":{"":5}}`, `{"loaded":{"":6}}`} {
		if want == `{"loaded":{"":6}}` {
			say(contract.ZoneVersion{Version: 6})
		}
		testutil.Eventually(t, 3*MaxRetry, func() error {
			if got := held()[key]; got != want {
				return fmt.Errorf("the report is %q, want %q", got, want)
			}
			return nil
		})
	}
	close(next)
	cancel()
	wg.Wait()
	if got, ok := held()[key]; ok {
		t.Errorf("after Run, the report is %q, want it taken out", got)
	}
}

// TestWatcherTakesNoLineMemcachedCut runs memcached 1.6.45 as a proxy
// whose configuration announces, in turn, a pool whose announcement is
// longer than a user log line (memcached cuts it, keeping the first 491
// bytes of the message) and one that fits: the Watcher refuses the cut
// line every time and takes only the other.
func TestWatcherTakesNoLineMemcachedCut(t *testing.T) {
	var long []contract.ZoneVersion
	for i := range v1alpha1.MaxZones {
		long = append(long, contract.ZoneVersion{Zone: fmt.Sprintf("%d%s", i, strings.Repeat("z", v1alpha1.MaxZoneNameLen-1)), Version: 1<<63 - 1})
	}
	short := []contract.ZoneVersion{{Version: 7}}
	dir := dataplane.ReadableDir(t)
	config := filepath.Join(dir, "config.lua")
	lua := fmt.Sprintf(`pools{ main = { backends = { { host = "127.0.0.1", port = "1", label = "_down_x", down = true } } } }
routes{ default = route_direct{ child = "main" } }
__n = __n or 0
mcp.register_cron("announce", { every = 1, func = function()
    __n = __n + 1
    if __n %% 2 == 1 then mcp.log(%q) else mcp.log(%q) end
end })
`, contract.LoadedMessage(long), contract.LoadedMessage(short))
	if err := os.WriteFile(config, []byte(lua), 0o644); err != nil {
		t.Fatal(err)
	}
	proxy := memcachedtest.Start(t, memcachedtest.Config{Args: []string{"-t", "1", "-o", "proxy_config=routelib,proxy_arg=" + config}, What: "memcached 1.6.45 as a proxy"})
	obs := &counter{}
	w := NewWatcher(proxy.Addr(), slog.New(slog.DiscardHandler), obs, time.Now)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	testutil.Eventually(t, 15*time.Second, func() error {
		if _, refused, _ := obs.counts(); refused < 2 {
			return fmt.Errorf("%d lines refused", refused)
		}
		if cur := w.Current(); cur == nil || !reflect.DeepEqual(cur.Tables, short) {
			return fmt.Errorf("Current() = %v, want %v", cur, short)
		}
		return nil
	})
	obs.mu.Lock()
	defer obs.mu.Unlock()
	for _, l := range obs.loaded {
		if l == nil || !reflect.DeepEqual(l.Tables, short) {
			t.Errorf("the Watcher took %v", l)
		}
	}
}
