package memcachedtest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Timeout bounds each exchange of a Conn: longer than any answer a
// loaded machine keeps a test waiting for, short enough that a server
// that never answers fails the test rather than hanging it.
const Timeout = 30 * time.Second

// Conn is a connection speaking memcached's text protocol, to a
// memcached, the proxy or the agent's endpoint, that returns errors: for
// loads that count them and for waits that try again (Ask, Stats). Tests
// use Client, which fails them instead. It is for one goroutine at a
// time.
type Conn struct {
	c       net.Conn
	r       *bufio.Reader
	w       *bufio.Writer
	timeout time.Duration
}

// DialConn connects to addr.
func DialConn(addr string) (*Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	return NewConn(c), nil
}

// NewConn speaks the text protocol on c (a TLS connection, a Pod's).
func NewConn(c net.Conn) *Conn {
	return &Conn{c: c, r: bufio.NewReaderSize(c, 1<<20), w: bufio.NewWriterSize(c, 1<<20), timeout: Timeout}
}

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// RemoteAddr is the server's address.
func (c *Conn) RemoteAddr() net.Addr { return c.c.RemoteAddr() }

// Do sends req (whole lines, with their \r\n) and returns the whole
// answer, with its \r\n: up to END after VALUE, CONFIG or STAT lines, a VA
// line and its value, or one line.
func (c *Conn) Do(req string) (string, error) {
	if err := c.Send(req); err != nil {
		return "", err
	}
	return c.Answer()
}

// Send writes req without reading an answer: the first of several
// pipelined requests, or a request with q that has none.
func (c *Conn) Send(req string) error {
	_ = c.c.SetDeadline(time.Now().Add(c.timeout))
	if _, err := c.w.WriteString(req); err != nil {
		return err
	}
	return c.w.Flush()
}

// Answer reads one whole answer, as Do does.
func (c *Conn) Answer() (string, error) {
	_ = c.c.SetDeadline(time.Now().Add(c.timeout))
	var b strings.Builder
	for {
		line, err := c.r.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			return b.String(), fmt.Errorf("%s: %w (answered %q)", c.c.RemoteAddr(), err, b.String())
		}
		f := strings.Fields(line)
		switch {
		case len(f) >= 4 && (f[0] == "VALUE" || f[0] == "CONFIG"):
			if err := c.data(&b, f[3]); err != nil {
				return b.String(), err
			}
		case len(f) >= 2 && f[0] == "VA":
			err := c.data(&b, f[1])
			return b.String(), err
		case line == "END\r\n":
			return b.String(), nil
		case len(f) >= 1 && f[0] == "STAT":
		default:
			if b.Len() == len(line) {
				return b.String(), nil
			}
			return b.String(), fmt.Errorf("%s: %q in the middle of %q", c.c.RemoteAddr(), line, b.String())
		}
	}
}

// data reads a value of size bytes and its \r\n into b.
func (c *Conn) data(b *strings.Builder, size string) error {
	n, err := strconv.Atoi(size)
	if err != nil || n < 0 {
		return fmt.Errorf("%s: a value of %q bytes", c.c.RemoteAddr(), size)
	}
	data := make([]byte, n+2)
	read, err := io.ReadFull(c.r, data)
	b.Write(data[:read])
	if err != nil {
		return fmt.Errorf("%s: a value of %d bytes: %w (answered %q)", c.c.RemoteAddr(), n, err, b.String())
	}
	return nil
}

// Ask sends req on a new connection to addr and returns the answer (Do),
// within 5 s: for a wait that asks until the server says what it waits
// for.
func Ask(addr, req string) (string, error) {
	c, err := DialConn(addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.timeout = 5 * time.Second
	return c.Do(req)
}

// Stats asks addr (a memcached, or the proxy) for its stats, on a
// connection of its own.
func Stats(addr string) (map[string]string, error) {
	ans, err := Ask(addr, "stats\r\n")
	if err != nil {
		return nil, fmt.Errorf("stats of %s: %w", addr, err)
	}
	return parseStats(ans), nil
}

// parseStats reads STAT lines.
func parseStats(answer string) map[string]string {
	out := map[string]string{}
	for line := range strings.Lines(answer) {
		if f := strings.SplitN(strings.TrimRight(line, "\r\n"), " ", 3); len(f) == 3 && f[0] == "STAT" {
			out[f[1]] = f[2]
		}
	}
	return out
}

// Client is a test's connection to a memcached, the proxy or an
// endpoint: Conn that fails the test on an error rather than returning
// it, closed when the test ends.
type Client struct {
	t testing.TB
	*Conn
}

// Dial connects t to addr, failing it if nothing answers.
func Dial(t testing.TB, addr string) *Client {
	t.Helper()
	c, err := DialConn(addr)
	if err != nil {
		t.Fatalf("memcachedtest: %v", err)
	}
	return NewClient(t, c)
}

// NewClient is a Client on conn, closed when t ends.
func NewClient(t testing.TB, conn *Conn) *Client {
	t.Cleanup(func() { conn.Close() })
	return &Client{t: t, Conn: conn}
}

// Do sends req and returns the whole answer (Conn.Do).
func (c *Client) Do(req string) string {
	c.t.Helper()
	got, err := c.Conn.Do(req)
	if err != nil {
		c.t.Fatalf("memcachedtest: %q: %v", req, err)
	}
	return got
}

// Set stores value at key with ms, and fails the test unless it is
// stored. flags are ms's: "T60 F3", "b" for a base64 key.
func (c *Client) Set(key string, value []byte, flags ...string) {
	c.t.Helper()
	req := fmt.Sprintf("ms %s\r\n%s\r\n", strings.Join(append([]string{key, strconv.Itoa(len(value))}, flags...), " "), value)
	if got := c.Do(req); got != "HD\r\n" {
		c.t.Fatalf("memcachedtest: ms %s on %s: %q", key, c.RemoteAddr(), got)
	}
}

// Item is an item as mg sees it.
type Item struct {
	Value []byte
	Flags uint32
	// TTL is the seconds it has left, -1 for none.
	TTL int64
}

// Get reads key with mg ("key b" for a base64 key): false on a miss.
func (c *Client) Get(key string) (Item, bool) {
	c.t.Helper()
	got := c.Do("mg " + key + " v f t\r\n")
	if got == "EN\r\n" {
		return Item{}, false
	}
	head, value, ok := strings.Cut(got, "\r\n")
	f := strings.Fields(head)
	if !ok || len(f) < 2 || f[0] != "VA" {
		c.t.Fatalf("memcachedtest: mg %s on %s: %q", key, c.RemoteAddr(), got)
	}
	it := Item{Value: []byte(strings.TrimSuffix(value, "\r\n"))}
	for _, tok := range f[2:] {
		switch tok[0] {
		case 'f':
			v, _ := strconv.ParseUint(tok[1:], 10, 32)
			it.Flags = uint32(v)
		case 't':
			it.TTL, _ = strconv.ParseInt(tok[1:], 10, 64)
		}
	}
	return it, true
}

// Value is key's value, "" on a miss.
func (c *Client) Value(key string) string {
	c.t.Helper()
	it, _ := c.Get(key)
	return string(it.Value)
}

// Has tells whether the server holds key.
func (c *Client) Has(key string) bool {
	c.t.Helper()
	switch got := c.Do("mg " + key + "\r\n"); got {
	case "HD\r\n":
		return true
	case "EN\r\n":
		return false
	default:
		c.t.Fatalf("memcachedtest: mg %s on %s: %q", key, c.RemoteAddr(), got)
		return false
	}
}

// Held is which of keys the server holds, in keys' order.
func (c *Client) Held(keys []string) []string {
	c.t.Helper()
	var held []string
	for _, k := range keys {
		if c.Has(k) {
			held = append(held, k)
		}
	}
	return held
}

// Delete deletes key, failing the test unless it was there.
func (c *Client) Delete(key string) {
	c.t.Helper()
	if got := c.Do("md " + key + "\r\n"); got != "HD\r\n" {
		c.t.Fatalf("memcachedtest: md %s on %s: %q", key, c.RemoteAddr(), got)
	}
}

// Stats sends a stats command ("stats", "stats settings") and returns its
// STAT lines.
func (c *Client) Stats(cmd string) map[string]string {
	c.t.Helper()
	return parseStats(c.Do(cmd + "\r\n"))
}

// Stat is one of stats' numbers, -1 when stats has no such line.
func (c *Client) Stat(name string) int64 {
	c.t.Helper()
	v, ok := c.Stats("stats")[name]
	if !ok {
		return -1
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		c.t.Fatalf("memcachedtest: stat %s on %s: %q", name, c.RemoteAddr(), v)
	}
	return n
}

// Fill writes count items named prefix-i, each value(i) with flags
// "F<i>" and ttl seconds to live (0: none), pipelined with ms q and an mn
// to end each batch of a hundred; it returns their total bytes.
func (c *Client) Fill(prefix string, count int, value func(key string, i int) []byte, ttl int64) int64 {
	c.t.Helper()
	var total int64
	var req bytes.Buffer
	for i := range count {
		key := fmt.Sprintf("%s-%d", prefix, i)
		v := value(key, i)
		total += int64(len(v))
		fmt.Fprintf(&req, "ms %s %d T%d F%d q\r\n%s\r\n", key, len(v), ttl, i, v)
		if i%100 == 99 || i == count-1 {
			req.WriteString("mn\r\n")
			if got := c.Do(req.String()); got != "MN\r\n" {
				c.t.Fatalf("memcachedtest: filling %s: %q", c.RemoteAddr(), got)
			}
			req.Reset()
		}
	}
	return total
}
