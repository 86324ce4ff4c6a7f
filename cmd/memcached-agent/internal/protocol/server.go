package protocol

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Observer is told what the server does, for metrics. Its methods are
// called from many goroutines.
type Observer interface {
	ConnOpened()
	ConnClosed()
	// ConnRefused is a connection over the limit, answered "ERROR Too
	// many open connections" and closed.
	ConnRefused()
	// Command is a command line read, by kind.
	Command(Kind)
}

// ErrServerClosed is what Serve returns once Shutdown has begun.
var ErrServerClosed = errors.New("protocol: server closed")

// Server serves the configuration endpoint on the listeners given to
// Serve. Set its fields before the first Serve.
type Server struct {
	// List returns the answers for the list now served, or nil before the
	// first good list. It is called once per command that needs it.
	List func() *Answers
	// MaxConnections bounds the connections open at once; past it a new
	// connection is answered memcached's "ERROR Too many open
	// connections" and closed. 0 means no bound.
	MaxConnections int
	// IdleTimeout closes a connection on which nothing was read for that
	// long, and bounds each write and TLS handshake. 0 means none.
	IdleTimeout time.Duration
	// TLS, when set, makes every connection TLS.
	TLS      *tls.Config
	Logger   *slog.Logger
	Observer Observer

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	closing   atomic.Bool
}

// Connection states, for shutdown: an idle connection (waiting for the
// first byte of a command, or in its TLS handshake) may be closed at once;
// an active one finishes the commands it has read and their answers.
const (
	stateIdle int32 = iota
	stateActive
	stateClosed
)

type conn struct {
	nc    net.Conn
	state atomic.Int32
}

// Serve accepts connections on ln until Shutdown, and returns
// ErrServerClosed then, or the listener's error.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	if s.listeners == nil {
		s.listeners = map[net.Listener]struct{}{}
		s.conns = map[*conn]struct{}{}
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()

	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) {
				// Out of descriptors or a transient failure: wait and
				// try again, as net/http does.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.logger().Warn("accept failed; retrying", "error", err.Error(), "in", backoff.String())
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		c := &conn{nc: nc}
		if !s.track(c) {
			s.refuse(nc)
			continue
		}
		go s.serveConn(c)
	}
}

// track adds c to the open connections, unless the server is closing or
// full.
func (s *Server) track(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() || (s.MaxConnections > 0 && len(s.conns) >= s.MaxConnections) {
		return false
	}
	s.conns[c] = struct{}{}
	if s.Observer != nil {
		s.Observer.ConnOpened()
	}
	return true
}

// refuse answers a connection over the limit as memcached does: the error
// in plain text, before any TLS handshake, then close.
func (s *Server) refuse(nc net.Conn) {
	if s.Observer != nil {
		s.Observer.ConnRefused()
	}
	nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	io.WriteString(nc, tooManyAnswer)
	nc.Close()
}

func (s *Server) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

func (s *Server) deadline() time.Time {
	if s.IdleTimeout <= 0 {
		return time.Time{}
	}
	return time.Now().Add(s.IdleTimeout)
}

// flushAt is how many bytes of answers are held before they are written,
// when more commands are already read: a burst of pipelined commands is
// answered with few writes, and memory stays bounded.
const flushAt = 64 << 10

func (s *Server) serveConn(c *conn) {
	defer func() {
		c.state.Store(stateClosed)
		c.nc.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		if s.Observer != nil {
			s.Observer.ConnClosed()
		}
	}()
	log := s.logger().With("remote", c.nc.RemoteAddr().String())
	nc := c.nc
	if s.TLS != nil {
		tc := tls.Server(nc, s.TLS)
		tc.SetDeadline(s.deadline())
		if err := tc.Handshake(); err != nil {
			log.Debug("TLS handshake failed", "error", err.Error())
			return
		}
		nc = tc
	}
	sess := &session{
		r:       bufio.NewReaderSize(nc, MaxLine+1),
		list:    s.List,
		observe: s.observe,
		refresh: func() { nc.SetReadDeadline(s.deadline()) },
	}
	flush := func() error {
		if len(sess.out) == 0 {
			return nil
		}
		nc.SetWriteDeadline(s.deadline())
		_, err := nc.Write(sess.out)
		sess.out = sess.out[:0]
		return err
	}
	for {
		if sess.r.Buffered() == 0 {
			if err := flush(); err != nil {
				log.Debug("write failed", "error", err.Error())
				return
			}
			// Nothing read and not answered: the connection is idle.
			if s.closing.Load() || c.state.Swap(stateIdle) == stateClosed {
				return
			}
			nc.SetReadDeadline(s.deadline())
			if _, err := sess.r.Peek(1); err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
					log.Debug("connection ends", "error", err.Error())
				}
				return
			}
			// A command has begun: from now on shutdown lets it finish.
			if !c.state.CompareAndSwap(stateIdle, stateActive) {
				return
			}
		}
		sess.refresh()
		more, err := sess.next()
		if err != nil && !errors.Is(err, io.EOF) {
			log.Debug("connection ends", "error", err.Error())
		}
		if !more || err != nil {
			// The answers before a quit (or a line that closes the
			// connection) are sent first.
			flush()
			return
		}
		if len(sess.out) >= flushAt {
			if err := flush(); err != nil {
				return
			}
		}
	}
}

func (s *Server) observe(k Kind) {
	if s.Observer != nil {
		s.Observer.Command(k)
	}
}

// Shutdown stops accepting connections, closes the idle ones, and waits
// for the active ones to answer what they have read and close; when ctx
// ends first, it closes them all and returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing.Store(true)
	for ln := range s.listeners {
		ln.Close()
	}
	s.mu.Unlock()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if s.closeIdle() == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			s.mu.Lock()
			for c := range s.conns {
				c.nc.Close()
			}
			s.mu.Unlock()
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// closeIdle closes the idle connections and returns how many are left.
func (s *Server) closeIdle() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.state.CompareAndSwap(stateIdle, stateClosed) {
			c.nc.Close()
		}
	}
	return len(s.conns)
}

// session reads command lines and answers them into out.
type session struct {
	r       *bufio.Reader
	out     []byte
	long    []byte
	list    func() *Answers
	observe func(Kind)
	// refresh pushes the read deadline back while a long value is
	// dropped; nil when there is none.
	refresh func()
}

// errTooLong is a line the endpoint does not read to its end.
var errTooLong = errors.New("command line too long")

// next reads one command and appends its answer to out. It returns false
// when the connection is to be closed: quit, a line memcached would close
// on, or a read error (err, io.EOF at the end of the input).
func (s *session) next() (bool, error) {
	line, err := s.readLine()
	if errors.Is(err, errTooLong) {
		s.observe(TooLong)
		return false, nil
	}
	if err != nil {
		// A line cut short by the end of input is dropped, unanswered,
		// as memcached drops it.
		return false, err
	}
	cmd := Parse(line)
	s.observe(cmd.Kind)
	if cmd.Kind == Store {
		if err := s.drop(cmd.ValueBytes); err != nil {
			return false, err
		}
	}
	var list *Answers
	if s.list != nil && (cmd.Kind == ConfigGetCluster || cmd.Kind == Get || cmd.Kind == Gets) {
		list = s.list()
	}
	out, closeAfter := Answer(s.out, cmd, list)
	s.out = out
	return !closeAfter, nil
}

// readLine returns the next line with its "\n". A line with more than
// MaxLine bytes before its "\n" is errTooLong unless it is a get or gets,
// which may have up to MaxGetLine: memcached's rule, taken as if every
// byte arrived alone, so that the outcome does not depend on how TCP cut
// the stream (memcached, which looks only at what one read gave it, takes
// a longer line that happens to arrive whole).
func (s *session) readLine() ([]byte, error) {
	line, err := s.r.ReadSlice('\n')
	if err == nil {
		return line, nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		return nil, err
	}
	if !startsGet(line) {
		return nil, errTooLong
	}
	s.long = append(s.long[:0], line...)
	for {
		line, err = s.r.ReadSlice('\n')
		s.long = append(s.long, line...)
		switch {
		case err == nil && len(s.long)-1 <= MaxGetLine:
			return s.long, nil
		case err == nil || len(s.long) > MaxGetLine:
			return nil, errTooLong
		case !errors.Is(err, bufio.ErrBufferFull):
			return nil, err
		}
	}
}

// startsGet is try_read_command_ascii's test of a line longer than MaxLine:
// at most 100 spaces, then "get " or "gets ".
func startsGet(b []byte) bool {
	i := 0
	for i < len(b)-6 && b[i] == ' ' {
		i++
	}
	if i > leadingSpaces {
		return false
	}
	return bytes.HasPrefix(b[i:], []byte("get ")) || bytes.HasPrefix(b[i:], []byte("gets "))
}

// drop reads and discards n bytes: a storage command's value.
func (s *session) drop(n int64) error {
	for n > 0 {
		if s.refresh != nil {
			s.refresh()
		}
		k, err := s.r.Discard(int(min(n, 64<<10)))
		n -= int64(k)
		if err != nil {
			return err
		}
	}
	return nil
}

// Transcript answers input as one connection would and returns what it
// writes: the parser, the line limits and the answers with nothing of the
// network. For tests and fuzzing.
func Transcript(input []byte, list *Answers) []byte {
	sess := &session{
		r:       bufio.NewReaderSize(bytes.NewReader(input), MaxLine+1),
		list:    func() *Answers { return list },
		observe: func(Kind) {},
	}
	for {
		if more, err := sess.next(); !more || err != nil {
			return sess.out
		}
	}
}
