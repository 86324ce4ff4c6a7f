package handoff

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"net"
	"strings"
	"testing"
	"time"
)

// FuzzAnswers feeds arbitrary bytes where the copy reads memcached's
// answers (the key dump's lines, an mg answer's head and value, the TTL
// token): whatever a memcached, or something posing as one, sends, the
// copy must not panic, and an item it accepts has a size it can read.
func FuzzAnswers(f *testing.F) {
	for _, s := range []string{
		"OK\r\nmg foo\r\nmg AP8= b\r\nEN\r\n",
		"VA 3 kfoo f0 t-1\r\nbar\r\n",
		"VA 5 kfoo f4294967295 t2592001\r\nhello\r\n",
		"EN kfoo\r\n",
		"EN\r\n",
		"SERVER_ERROR refcount overflow during fetch\r\n",
		"VA -1 kfoo f0 t1\r\n",
		"VA 99999999999999999999 kfoo f1 t5\r\n",
		"VA 3 kbar f0 t1\r\nbar\r\n",
		"BUSY currently processing crawler request\r\n",
		"ERROR key dump not allowed\r\n",
		"mg \r\nmg foo  b\r\nmg foo x\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := fuzzConn(data)
		for range 100 {
			l, err := c.line()
			if err != nil {
				break
			}
			if k, err := parseDumpLine(l); err == nil && k.key == "" {
				t.Fatalf("parseDumpLine(%q) accepted an empty key", l)
			}
			if ttl, live := remainingTTL(l, func() time.Time { return time.Unix(1767225600, 0) }); live && ttl < 0 {
				t.Fatalf("remainingTTL(%q) = %d, live", l, ttl)
			}
		}
		c = fuzzConn(data)
		it, err := readItem(c, dumpKey{key: "foo"})
		if err != nil || it == nil {
			return
		}
		if it.size < 0 {
			t.Fatalf("readItem accepted a negative size %d from %q", it.size, data)
		}
		_ = c.discard(min(it.size, 1<<20))
	})
}

// FuzzWatchLine feeds arbitrary lines to the parser of watch mutations
// deletions: it must not panic, and a key it accepts is one the meta
// protocol takes (no space or control byte unless base64 with b, at most
// memcached's longest key once decoded).
func FuzzWatchLine(f *testing.F) {
	for _, s := range []string{
		"ts=1795656778.71856 gid=2 type=item_store key=foo status=stored cmd=set ttl=0 clsid=1 cfd=29 size=3",
		"ts=1795656778.171161 gid=4 type=item_store key=%00bin%201%0D%0A%FF status=stored cmd=set ttl=0 clsid=1 cfd=29 size=1",
		"ts=1795656778.424445 gid=9 type=deleted key=%00bin%201%0D%0A%FF cmd=md clsid=1 size=1",
		"ts=1 gid=5 type=item_store key=foo status=not_stored cmd=add ttl=0 clsid=1 cfd=29 size=1",
		"skipped=12",
		"OK",
		"type=deleted key=%2",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		ev, err := parseWatchLine(line)
		if err != nil || (ev.kind != watchStored && ev.kind != watchDeleted) {
			if err == nil && ev.kind == watchSkipped && ev.skipped < 0 {
				t.Fatalf("parseWatchLine(%q) lost %d events", line, ev.skipped)
			}
			return
		}
		raw := []byte(ev.key.key)
		if ev.key.binary {
			var derr error
			if raw, derr = base64.StdEncoding.DecodeString(ev.key.key); derr != nil {
				t.Fatalf("parseWatchLine(%q) gave binary key %q, not base64: %v", line, ev.key.key, derr)
			}
		} else if strings.ContainsFunc(ev.key.key, func(r rune) bool { return r <= ' ' || r > '~' }) {
			t.Fatalf("parseWatchLine(%q) gave key %q, which the meta protocol would split", line, ev.key.key)
		}
		if len(raw) == 0 || len(raw) > maxKeyLength {
			t.Fatalf("parseWatchLine(%q) gave a key of %d bytes", line, len(raw))
		}
	})
}

// fuzzConn is a conn that reads data and writes nowhere.
func fuzzConn(data []byte) *conn {
	nc := readOnlyConn{bytes.NewReader(data)}
	return &conn{addr: "fuzz", nc: nc, r: bufio.NewReaderSize(nc, 512), w: bufio.NewWriterSize(nc, 512), timeout: time.Second}
}

// readOnlyConn is a net.Conn over a reader: writes vanish, deadlines are
// moot.
type readOnlyConn struct{ *bytes.Reader }

func (readOnlyConn) Write(b []byte) (int, error)      { return len(b), nil }
func (readOnlyConn) Close() error                     { return nil }
func (readOnlyConn) LocalAddr() net.Addr              { return nil }
func (readOnlyConn) RemoteAddr() net.Addr             { return nil }
func (readOnlyConn) SetDeadline(time.Time) error      { return nil }
func (readOnlyConn) SetReadDeadline(time.Time) error  { return nil }
func (readOnlyConn) SetWriteDeadline(time.Time) error { return nil }
