package protocol

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/memcached-operator/test/testutil"
)

// startServer serves srv on a loopback port and shuts it down when the
// test ends.
func startServer(t *testing.T, srv *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if srv.Logger == nil {
		srv.Logger = slog.New(slog.DiscardHandler)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve = %v, want ErrServerClosed", err)
		}
	})
	return ln.Addr().String()
}

func fixedList(a *Answers) func() *Answers { return func() *Answers { return a } }

// dial connects to addr.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes req and reads exactly len(want) bytes.
func roundTrip(t *testing.T, c net.Conn, req, want string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("reading the answer to %q: %v (got %q)", req, err, got)
	}
	if string(got) != want {
		t.Fatalf("answer to %q = %q, want %q", req, got, want)
	}
}

// expectClosed checks that the server closes c without writing more.
func expectClosed(t *testing.T, c net.Conn, within time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(within))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("connection not closed within %s: %v (read %q)", within, err, b)
	}
	if len(b) > 0 {
		t.Fatalf("server wrote %q before closing, want nothing", b)
	}
}

// counter is an Observer that counts.
type counter struct {
	opened, closed, refused atomic.Int64
	mu                      sync.Mutex
	kinds                   map[Kind]int
}

func (c *counter) ConnOpened()  { c.opened.Add(1) }
func (c *counter) ConnClosed()  { c.closed.Add(1) }
func (c *counter) ConnRefused() { c.refused.Add(1) }
func (c *counter) Command(k Kind) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kinds == nil {
		c.kinds = map[Kind]int{}
	}
	c.kinds[k]++
}

// TestServerPipelined sends commands in one write and in pieces, and reads
// their answers in order.
func TestServerPipelined(t *testing.T) {
	obs := &counter{}
	addr := startServer(t, &Server{List: fixedList(NewAnswers(testVersion, testNodes)), Observer: obs})
	c := dial(t, addr)
	roundTrip(t, c, "version\r\nconfig get cluster\r\nget AmazonElastiCache:cluster\r\nbogus\r\n",
		"VERSION 1.6.45\r\n"+testConfig+testValue+"END\r\nERROR\r\n")
	// A line in three writes.
	c.SetDeadline(time.Now().Add(5 * time.Second))
	for _, part := range []string{"conf", "ig get clu", "ster\r"} {
		io.WriteString(c, part)
		time.Sleep(20 * time.Millisecond)
	}
	roundTrip(t, c, "\n", testConfig)
	roundTrip(t, c, "quit\r\n", "")
	expectClosed(t, c, 5*time.Second)
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.kinds[ConfigGetCluster] != 2 || obs.kinds[Version] != 1 || obs.kinds[Get] != 1 || obs.kinds[Unknown] != 1 || obs.kinds[Quit] != 1 {
		t.Errorf("commands counted %v", obs.kinds)
	}
}

// TestServerConnectionLimit opens MaxConnections connections: the next
// one is answered memcached's "ERROR Too many open connections" and
// closed, and once one closes a new one is served.
func TestServerConnectionLimit(t *testing.T) {
	obs := &counter{}
	addr := startServer(t, &Server{List: fixedList(nil), MaxConnections: 2, Observer: obs})
	a, b := dial(t, addr), dial(t, addr)
	roundTrip(t, a, "version\r\n", "VERSION 1.6.45\r\n")
	roundTrip(t, b, "version\r\n", "VERSION 1.6.45\r\n")

	over := dial(t, addr)
	over.SetDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(over)
	if err != nil || string(got) != "ERROR Too many open connections\r\n" {
		t.Fatalf("connection over the limit read %q, %v; want the error then EOF", got, err)
	}
	if obs.refused.Load() != 1 {
		t.Errorf("refused = %d, want 1", obs.refused.Load())
	}

	a.Close()
	testutil.EventuallyEvery(t, 30*time.Second, 5*time.Millisecond, func() error {
		if obs.closed.Load() < 1 {
			return errors.New("the server did not see a connection close")
		}
		return nil
	})
	roundTrip(t, dial(t, addr), "version\r\n", "VERSION 1.6.45\r\n")
}

// TestServerIdleTimeout checks that a connection silent for IdleTimeout is
// closed, whether between commands or in the middle of a line, and that
// one that keeps talking is not.
func TestServerIdleTimeout(t *testing.T) {
	const idle = 300 * time.Millisecond
	addr := startServer(t, &Server{List: fixedList(nil), IdleTimeout: idle})

	t.Run("talking", func(t *testing.T) {
		// A loaded machine can hold the talker back past the timeout, and
		// then the server is right to close: so the talker measures the
		// longest the server could have waited for each command (from
		// before the previous one was written, which comes before the
		// server reads it and sets its deadline, to after this one is) and
		// holds the server to staying open only while that is under the
		// timeout. A run the machine stalled says so and talks again.
		testutil.Eventually(t, 60*time.Second, func() error {
			if stalled := talk(t, addr, idle, 3*idle); stalled != 0 {
				t.Logf("the machine held a command back %s, past the idle timeout: talking again", stalled)
				return fmt.Errorf("no talk of %s without a pause of %s", 3*idle, idle)
			}
			return nil
		})
	})

	for _, tt := range []struct{ name, sent string }{{"between commands", "version\r\n"}, {"mid-line", "vers"}} {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, addr)
			start := time.Now()
			io.WriteString(c, tt.sent)
			if tt.sent == "version\r\n" {
				r := bufio.NewReader(c)
				if l, _ := r.ReadString('\n'); l != "VERSION 1.6.45\r\n" {
					t.Fatalf("read %q", l)
				}
			}
			// Bounds the wait for a server that never closes, not how
			// soon it closes: that is only held to not before idle.
			expectClosed(t, c, idle+30*time.Second)
			if took := time.Since(start); took < idle {
				t.Errorf("closed after %s, before the idle timeout %s", took, idle)
			}
		})
	}
}

// talk sends a command on a new connection every idle/10 for as long as
// for, and fails the test if the server closes it although no command came
// later than idle after the one before. It returns 0, or the longest wait
// the server may have had when that was past idle.
func talk(t *testing.T, addr string, idle, long time.Duration) time.Duration {
	t.Helper()
	// The server sets the deadline after accepting, so after this.
	last := time.Now()
	c := dial(t, addr)
	defer c.Close()
	r := bufio.NewReader(c)
	var longest time.Duration
	for start := time.Now(); time.Since(start) < long; {
		time.Sleep(idle / 10)
		c.SetDeadline(time.Now().Add(30 * time.Second))
		sent := time.Now()
		_, err := io.WriteString(c, "version\r\n")
		longest = max(longest, time.Since(last))
		last = sent
		var line string
		if err == nil {
			line, err = r.ReadString('\n')
		}
		switch {
		case err != nil && longest >= idle:
			return longest
		case err != nil:
			t.Fatalf("closed while talking (no command later than %s after the one before): %v", longest, err)
		case line != "VERSION 1.6.45\r\n":
			t.Fatalf("answer %q", line)
		}
	}
	if longest >= idle {
		return longest
	}
	return 0
}

// TestServerShutdown ends the server while one connection waits for its
// answer and another is idle: the idle one is closed at once, no new
// connection is accepted, the answer in flight is written whole, then
// that connection is closed too and Shutdown returns.
func TestServerShutdown(t *testing.T) {
	release := make(chan struct{})
	asked := make(chan struct{}, 1)
	list := NewAnswers(testVersion, testNodes)
	srv := &Server{List: func() *Answers {
		asked <- struct{}{}
		<-release
		return list
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	addr := ln.Addr().String()

	idle := dial(t, addr)
	roundTrip(t, idle, "version\r\n", "VERSION 1.6.45\r\n")
	busy := dial(t, addr)
	io.WriteString(busy, "config get cluster\r\nversion\r\n")
	<-asked

	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(context.Background()) }()
	expectClosed(t, idle, 5*time.Second)
	if err := <-served; !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve = %v, want ErrServerClosed", err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("a new connection was accepted during shutdown")
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with an answer in flight", err)
	case <-time.After(100 * time.Millisecond):
	}

	close(release)
	busy.SetDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(busy)
	if err != nil {
		t.Fatal(err)
	}
	// Both commands were read before shutdown began: both are answered.
	if want := testConfig + "VERSION 1.6.45\r\n"; string(got) != want {
		t.Errorf("in-flight connection read %q, want %q then EOF", got, want)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown = %v, want nil", err)
	}
}

// TestServerShutdownTimeout checks that Shutdown gives up on an answer
// that does not come when its context ends, and closes the connection.
func TestServerShutdownTimeout(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	asked := make(chan struct{}, 1)
	srv := &Server{List: func() *Answers { asked <- struct{}{}; <-block; return nil }}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	c := dial(t, ln.Addr().String())
	io.WriteString(c, "config get cluster\r\n")
	<-asked
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown = %v, want the context's deadline", err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Errorf("connection still open after Shutdown gave up")
	}
}

// TestServerLongLines checks the line limits over TCP, sent in pieces:
// 2049 bytes without a newline close the connection at once, as in
// memcached; a get may run to 16 KiB.
func TestServerLongLines(t *testing.T) {
	addr := startServer(t, &Server{List: fixedList(NewAnswers(testVersion, testNodes))})
	c := dial(t, addr)
	io.WriteString(c, "version"+strings.Repeat(" ", 2042))
	expectClosed(t, c, 5*time.Second)

	g := dial(t, addr)
	g.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(g, "get"+strings.Repeat(" k", 2000))
	time.Sleep(50 * time.Millisecond)
	roundTrip(t, g, " AmazonElastiCache:cluster\r\n", testValue+"END\r\n")
}
