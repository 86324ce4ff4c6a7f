// Package confirm asks memcached's proxy beside the agent which pool it
// routes by, and reports it (#40, "clients confirm"): a hand-off takes the
// proxies' clients as moved once every proxy says it loaded the table that
// moved them, not once the agent wrote the file.
//
// The Watcher holds a connection to the proxy's own port and asks for its
// user log (`watch proxyuser`, memcached's text protocol, which the routes
// leave to memcached). Once a second the proxy's route configuration
// (sync/memcached/proxy.lua) logs there the slot table versions of the
// pool its workers route by (contract.LoadedMessage), and nothing before
// it has a pool. The Reporter writes what the Watcher last heard into the
// ConfigMap the hook reads (contract.ProxyReport, under
// contract.ProxyReportKey of the agent's Pod), when it changes, and takes
// it out when the agent stops.
//
// Nothing the proxy sends can stop the agent: lines are bounded
// (MaxLine), a line that is not an announcement is skipped, and a
// connection that fails, closes or goes quiet is made again, with a
// backoff.
package confirm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/example/memcached-operator/sync/contract"
)

// Timings of the watch.
const (
	// Quiet is how long an announcement stays true: the proxy repeats it
	// every second, so past Quiet without one (the connection lost, the
	// proxy restarting, its config thread stuck) nothing is known, and
	// the connection, if open, is made again.
	Quiet = 5 * time.Second
	// DialTimeout bounds a connection's setup and the watch command.
	DialTimeout = 2 * time.Second
	// MinBackoff and MaxBackoff bound the wait before a new connection.
	MinBackoff = 100 * time.Millisecond
	MaxBackoff = 2 * time.Second
)

// MaxLine bounds a watch line the Watcher reads: memcached formats a log
// entry into 512 bytes, to which the watch adds its ts= and gid= fields.
// A longer line is skipped whole.
const MaxLine = 2048

// Loaded is what the proxy last said of the pool its workers route by.
type Loaded struct {
	// Tables are the pool's slot table versions, in its zone order;
	// empty for a pool whose versions the proxy does not know (a pool
	// file without a tables line).
	Tables []contract.ZoneVersion
	// At is when the proxy last said it.
	At time.Time
}

// Report is the ProxyReport of what is loaded (nil: no pool).
func Report(l *Loaded) contract.ProxyReport {
	r := contract.ProxyReport{Loaded: map[string]int64{}}
	if l != nil {
		for _, t := range l.Tables {
			r.Loaded[t.Zone] = t.Version
		}
	}
	return r
}

// String is the tables as the announcement gives them, for logs and
// /readyz.
func (l *Loaded) String() string {
	if len(l.Tables) == 0 {
		return "versions unknown"
	}
	parts := make([]string, len(l.Tables))
	for i, t := range l.Tables {
		parts[i] = fmt.Sprintf("%s=%d", t.Zone, t.Version)
	}
	return strings.Join(parts, " ")
}

// Observer is told what the Watcher hears, for metrics.
type Observer interface {
	// ProxyLoaded is a change of what is known: nil when nothing is.
	ProxyLoaded(l *Loaded)
	// ProxyWatchFailed is a connection that could not be made, or
	// ended.
	ProxyWatchFailed()
	// ProxyLineRefused is a line that claimed to be an announcement
	// and is not one the Watcher takes (cut short, malformed, too
	// long).
	ProxyLineRefused()
}

// Watcher follows the proxy at an address. Run follows it until its
// context ends; Current and Changed may be called from any goroutine.
type Watcher struct {
	addr     string
	logger   *slog.Logger
	observer Observer
	now      func() time.Time

	changed chan struct{}

	mu sync.Mutex
	// loaded is what the proxy last said; nil before, and once Quiet
	// passed without a word.
	loaded *Loaded
	// said is the last problem logged, so that each is logged once
	// until the proxy is heard again.
	said string
}

// NewWatcher follows the proxy at addr (host:port).
func NewWatcher(addr string, logger *slog.Logger, observer Observer, now func() time.Time) *Watcher {
	return &Watcher{addr: addr, logger: logger, observer: observer, now: now, changed: make(chan struct{}, 1)}
}

// Addr is the proxy's address.
func (w *Watcher) Addr() string { return w.addr }

// Current is what the proxy last said it loaded, or nil while it has
// said nothing (in the last Quiet).
func (w *Watcher) Current() *Loaded {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.loaded
}

// Changed receives after each change of Current (at most one waiting).
func (w *Watcher) Changed() <-chan struct{} { return w.changed }

// set records what the proxy said (nil: nothing known), telling the
// observer and Changed when it differs.
func (w *Watcher) set(l *Loaded) {
	w.mu.Lock()
	same := (l == nil) == (w.loaded == nil) && (l == nil || equalTables(l.Tables, w.loaded.Tables))
	w.loaded = l
	if l != nil {
		w.said = ""
	}
	w.mu.Unlock()
	if same {
		return
	}
	if l == nil {
		w.logger.Warn("the proxy has not said which pool it routes by", "proxy", w.addr, "for", Quiet.String())
	} else {
		w.logger.Info("the proxy routes by a new pool", "proxy", w.addr, "tables", l.String())
	}
	if w.observer != nil {
		w.observer.ProxyLoaded(l)
	}
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

func equalTables(a, b []contract.ZoneVersion) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Run connects to the proxy and reads its announcements until ctx ends,
// connecting again (after MinBackoff, doubling up to MaxBackoff while
// nothing is heard) whenever a connection fails, ends or goes quiet.
func (w *Watcher) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		// What is known expires Quiet after the last word, connected
		// or not.
		tick := time.NewTicker(Quiet / 10)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if cur := w.Current(); cur != nil && w.now().Sub(cur.At) > Quiet {
					w.set(nil)
				}
			}
		}
	})
	backoff := MinBackoff
	for ctx.Err() == nil {
		heard, err := w.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if w.observer != nil {
			w.observer.ProxyWatchFailed()
		}
		w.problem("watching the proxy's announcements; connecting again", "proxy", w.addr, "error", err.Error())
		if heard {
			backoff = MinBackoff
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, MaxBackoff)
	}
}

// problem logs a warning once until another problem or an announcement.
func (w *Watcher) problem(msg string, attrs ...any) {
	key := fmt.Sprint(msg, attrs)
	w.mu.Lock()
	repeated := key == w.said
	w.said = key
	w.mu.Unlock()
	if !repeated {
		w.logger.Warn(msg, attrs...)
	}
}

// session is one connection: it asks for the user log and reads it until
// the connection fails, ends, goes Quiet or ctx ends. heard says whether
// an announcement came.
func (w *Watcher) session(ctx context.Context) (heard bool, err error) {
	d := net.Dialer{Timeout: DialTimeout}
	conn, err := d.DialContext(ctx, "tcp", w.addr)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	conn.SetDeadline(w.now().Add(DialTimeout))
	if _, err := io.WriteString(conn, "watch proxyuser\r\n"); err != nil {
		return false, err
	}
	r := bufio.NewReaderSize(conn, MaxLine)
	line, err := readLine(r)
	if err != nil {
		return false, fmt.Errorf("asking for the proxy's user log: %w", err)
	}
	if string(line) != "OK" {
		return false, fmt.Errorf("the proxy answered `watch proxyuser` with %q", truncate(line))
	}
	w.logger.Info("watching the proxy's announcements", "proxy", w.addr)
	for {
		conn.SetReadDeadline(w.now().Add(Quiet))
		line, err := readLine(r)
		if errors.Is(err, errTooLong) {
			if w.observer != nil {
				w.observer.ProxyLineRefused()
			}
			w.problem("skipped a watch line longer than the proxy writes", "proxy", w.addr, "max", MaxLine)
			continue
		}
		if err != nil {
			return heard, err
		}
		tables, ok, err := ParseWatchLine(line)
		switch {
		case err != nil:
			if w.observer != nil {
				w.observer.ProxyLineRefused()
			}
			w.problem("skipped an announcement the agent does not take", "proxy", w.addr, "line", truncate(line), "error", err.Error())
		case ok:
			heard = true
			w.set(&Loaded{Tables: tables, At: w.now()})
		}
	}
}

var errTooLong = errors.New("line too long")

// readLine reads a line without its "\n" (or "\r\n"). A line longer than
// the reader's buffer is read to its end and dropped with errTooLong.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		for errors.Is(err, bufio.ErrBufferFull) {
			_, err = r.ReadSlice('\n')
		}
		if err != nil {
			return nil, err
		}
		return nil, errTooLong
	}
	if err != nil {
		return nil, err
	}
	line = bytes.TrimSuffix(line[:len(line)-1], []byte("\r"))
	return line, nil
}

// truncate keeps a line short enough to log.
func truncate(line []byte) string {
	if len(line) > 200 {
		return string(line[:200]) + "..."
	}
	return string(line)
}

// userLogPrefix and userLogField are how memcached 1.6.45 writes a user
// log entry to a watcher (logger.c): "ts=SECONDS.MICROS gid=N
// type=proxy_user msg=MESSAGE".
const userLogField = " type=proxy_user msg="

// ParseWatchLine reads a line of `watch proxyuser` (without its newline):
// the tables of an announcement of a loaded pool (ok), nothing for any
// other line (memcached's "skipped=N" when the watcher fell behind, the
// proxy's other user log messages, lines of other types), or why a line
// that is an announcement is not one the agent takes.
func ParseWatchLine(line []byte) (tables []contract.ZoneVersion, ok bool, err error) {
	rest, found := bytes.CutPrefix(line, []byte("ts="))
	if !found {
		return nil, false, nil
	}
	ts, rest, found := bytes.Cut(rest, []byte(" gid="))
	if !found || !timestamp(ts) {
		return nil, false, nil
	}
	gid, msg, found := bytes.Cut(rest, []byte(userLogField))
	if !found || !digits(gid) {
		return nil, false, nil
	}
	if !bytes.HasPrefix(msg, []byte(contract.LoadedPrefix)) {
		return nil, false, nil
	}
	tables, err = contract.ParseLoaded(string(msg))
	if err != nil {
		return nil, false, err
	}
	return tables, true, nil
}

// timestamp is memcached's SECONDS.MICROS.
func timestamp(b []byte) bool {
	s, us, found := bytes.Cut(b, []byte("."))
	return found && digits(s) && digits(us)
}

func digits(b []byte) bool {
	if len(b) == 0 || len(b) > 20 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
