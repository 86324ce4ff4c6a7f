package protocol

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/test/memcachedtest"
)

// startMemcached runs the real memcached 1.6.45 (MEMCACHED_BIN, which make
// test sets) on a loopback port for the test, or skips naming what is
// missing (fails under CI). memcached picks the port itself
// (memcachedtest.Config's Port 0): a port freed by the test and then given
// to memcached could be taken meanwhile by another package's process, and
// an answer on it would not be this memcached's.
func startMemcached(t *testing.T) string {
	t.Helper()
	return memcachedtest.Start(t, memcachedtest.Config{Args: []string{"-t", "1", "-m", "16"}, What: "memcached 1.6.45 to compare with"}).Addr()
}

// endpointAnswer is what the endpoint writes for input on a new
// connection, and whether it then closes it: the server's own session
// (Transcript) with nothing of the network, so that reading the live
// endpoint waits for its whole answer however slow the machine, rather
// than stopping at a moment of silence.
func endpointAnswer(input string, list *Answers) (string, bool) {
	sess := &session{
		r:       bufio.NewReaderSize(strings.NewReader(input), MaxLine+1),
		list:    func() *Answers { return list },
		observe: func(Kind) {},
	}
	for {
		more, err := sess.next()
		switch {
		case errors.Is(err, io.EOF):
			// The input ends: a connection would wait for more.
			return string(sess.out), false
		case !more || err != nil:
			return string(sess.out), true
		}
	}
}

// exchange writes input on a new connection and reads what comes back:
// want bytes, then until the connection closes if wantClosed, and
// otherwise for a moment more, so that bytes past the answer expected
// show. Only a server that writes less than want, or keeps open a
// connection it should close, makes it wait the whole deadline.
func exchange(t *testing.T, addr, input string, want int, wantClosed bool) (string, bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, input); err != nil {
		t.Fatal(err)
	}
	var got []byte
	buf := make([]byte, 64<<10)
	deadline := time.Now().Add(30 * time.Second)
	for {
		wait := time.Until(deadline)
		if len(got) >= want && !wantClosed {
			wait = 150 * time.Millisecond
		}
		c.SetReadDeadline(time.Now().Add(wait))
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err == io.EOF {
			return string(got), true
		}
		var ne net.Error
		if err != nil && (!errors.As(err, &ne) || !ne.Timeout()) {
			return string(got), true
		}
		if err != nil {
			return string(got), false
		}
	}
}

// TestSameAsMemcached sends the same bytes to memcached 1.6.45 and to the
// endpoint, on fresh connections, for every input both answer (not the
// cluster commands, which memcached does not have, nor storage and other
// commands memcached serves), and compares every byte written back and
// whether the connection was closed. This is what makes "parses like
// memcached" a test. The one known difference is named in the case.
func TestSameAsMemcached(t *testing.T) {
	mc := startMemcached(t)
	list := NewAnswers(testVersion, testNodes)
	agent := startServer(t, &Server{List: fixedList(list)})
	long := func(n int) string { return strings.Repeat("k", n) }
	// The rows run in parallel against one memcached, so each owns the
	// keys it stores: only "set noreply, then version" stores one, under a
	// name no other row reads (it stored "k", which "long get" then found
	// or not, by chance of order).
	tests := []struct {
		name  string
		input string
		// memcachedExtra is what memcached writes after the endpoint's
		// answer, on purpose.
		memcachedExtra string
	}{
		{name: "version", input: "version\r\n"},
		{name: "version with a bare newline", input: "version\n"},
		{name: "version with arguments", input: "version 1 2 3\r\n"},
		{name: "version with a tab", input: "version\t\r\n"},
		{name: "version with two carriage returns", input: "version\r\r\n"},
		{name: "version after a space", input: " version\r\n"},
		{name: "version in capitals", input: "VERSION\r\n"},
		{name: "unknown command", input: "bogus\r\n"},
		{name: "unknown command noreply", input: "bogus noreply\r\nversion\r\n"},
		{name: "two bytes", input: "ab\r\n"},
		{name: "shorter than four bytes", input: "a\n"},
		{name: "empty line", input: "\r\n"},
		{name: "mn with a bare newline", input: "mn\n"},
		{name: "meta get with a bad flag", input: "mg a !x\r\n"},
		{name: "meta set with a bad flag", input: "ms a 5 !x\r\nhello\r\n"},
		{name: "get a miss", input: "get nothing-here\r\n"},
		{name: "get several misses, spaces around", input: "get  a   b \r\n"},
		{name: "get noreply", input: "get a noreply\r\n"},
		{name: "gets a miss", input: "gets a\r\n"},
		{name: "get without a key", input: "get\r\n"},
		{name: "gets without a key", input: "gets \r\n"},
		{name: "get a key of 250 bytes", input: "get " + long(250) + "\r\n"},
		{name: "get a key of 251 bytes", input: "get " + long(251) + "\r\n", memcachedExtra: "\r\n"},
		{name: "get a long key after a short one", input: "get a " + long(251) + "\r\n", memcachedExtra: "\r\n"},
		{name: "set with a negative length", input: "set a 0 0 -1\r\n"},
		{name: "set without a length", input: "set a 0 0\r\n"},
		{name: "set with a long key", input: "set " + long(251) + " 0 0 5\r\nhello\r\nversion\r\n"},
		{name: "set noreply, then version", input: "set stored-by-one-row 0 0 5 noreply\r\nhello\r\nversion\r\n"},
		{name: "incr without a delta", input: "incr a\r\n"},
		{name: "gat without a key", input: "gat 10\r\n"},
		{name: "config get cluster with more tokens, noreply", input: "config get cluster noreply\r\nversion\r\n"},
		{name: "quit", input: "quit\r\nversion\r\n"},
		{name: "quit with arguments", input: "quit now\r\n"},
		{name: "HTTP request", input: "GET / HTTP/1.1\r\nHost: x\r\n\r\n"},
		{name: "HTTP/ alone", input: "foo HTTP/\r\n"},
		{name: "HTTP without a slash", input: "foo HTTP\r\n"},
		{name: "HTTP/ past the 23rd token", input: "foo" + strings.Repeat(" a", 30) + " HTTP/1.1\r\n"},
		{name: "HTTP/ as the 23rd token", input: "foo" + strings.Repeat(" a", 21) + " HTTP/1.1 b c\r\n"},
		{name: "line of 2048 bytes", input: "version" + strings.Repeat(" ", 2041) + "\n"},
		{name: "2049 bytes without a newline", input: "version" + strings.Repeat(" ", 2042)},
		{name: "long get", input: "get" + strings.Repeat(" k", 3000) + "\r\n"},
		{name: "long line after spaces", input: strings.Repeat(" ", 100) + "gets" + strings.Repeat(" k", 3000) + "\r\n"},
		{name: "long get after too many spaces", input: strings.Repeat(" ", 101) + "get" + strings.Repeat(" k", 3000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			answer, closes := endpointAnswer(tt.input, list)
			got, gotClosed := exchange(t, agent, tt.input, len(answer), closes)
			want, wantClosed := exchange(t, mc, tt.input, len(got)+len(tt.memcachedExtra), gotClosed)
			if got+tt.memcachedExtra != want || gotClosed != wantClosed {
				t.Errorf("answer to %.80q:\n endpoint %q (closed %v)\nmemcached %q (closed %v)", tt.input, got, gotClosed, want, wantClosed)
			}
		})
	}
}
