package handoff

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// conn is one connection to a memcached, spoken to in its meta protocol.
// A conn is used by at most one reader and one writer goroutine at once.
type conn struct {
	addr    string
	nc      net.Conn
	r       *bufio.Reader
	w       *bufio.Writer
	timeout time.Duration
}

// bufSizes are a connection's read and write buffers, sized for what it
// carries, so that an agent with a 64 MiB memory limit can copy to a
// hundred destinations at once.
type bufSizes struct{ read, write int }

var (
	// dumpBufs read the key dump: lines of at most about 350 bytes.
	dumpBufs = bufSizes{read: 64 << 10, write: 4 << 10}
	// getBufs read the values that stream through to the destinations,
	// and write pipelined mg lines.
	getBufs = bufSizes{read: 256 << 10, write: 64 << 10}
	// destBufs write items and read short answers.
	destBufs = bufSizes{read: 4 << 10, write: 128 << 10}
	// controlBufs carry the lock and the markers.
	controlBufs = bufSizes{read: 4 << 10, write: 4 << 10}
)

// Dialer opens a connection (the agent's is a net.Dialer; TLS would go
// here).
type Dialer func(ctx context.Context, network, addr string) (net.Conn, error)

func dial(ctx context.Context, d Dialer, addr string, timeout time.Duration, bufs bufSizes) (*conn, error) {
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	nc, err := d(dctx, "tcp", addr)
	if err != nil {
		return nil, &connError{addr: addr, err: err}
	}
	return &conn{addr: addr, nc: nc, r: bufio.NewReaderSize(nc, bufs.read), w: bufio.NewWriterSize(nc, bufs.write), timeout: timeout}, nil
}

// connError is a failure to reach or talk to a memcached: worth trying
// again, unlike an answer that says no.
type connError struct {
	addr string
	err  error
}

func (e *connError) Error() string { return e.addr + ": " + e.err.Error() }
func (e *connError) Unwrap() error { return e.err }

func (c *conn) fail(err error) error {
	if err == nil {
		return nil
	}
	var ce *connError
	if errors.As(err, &ce) {
		return err
	}
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return &connError{addr: c.addr, err: err}
}

func (c *conn) close() { c.nc.Close() }

// line reads one answer line, without its \r\n. The slice is valid until
// the next read. The read deadline is set only when the line is not
// buffered whole (buffered): one taken from the buffer makes no syscall
// and cannot block, and a deadline costs a clock read and a timer change,
// which for items of 1 KiB was a fifth of the copy's CPU.
func (c *conn) line() ([]byte, error) {
	if !c.buffered() {
		c.nc.SetReadDeadline(time.Now().Add(c.timeout))
	}
	l, err := c.r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		return nil, c.fail(fmt.Errorf("an answer line longer than %d bytes", c.r.Size()))
	}
	if err != nil {
		return nil, c.fail(err)
	}
	return bytes.TrimSuffix(l[:len(l)-1], []byte{'\r'}), nil
}

// lineLookahead bounds how far buffered looks for a line's end: an mg
// answer's head, a dump line and a store's answer are shorter.
const lineLookahead = 512

// buffered tells whether the reader holds a whole line already.
func (c *conn) buffered() bool {
	b, _ := c.r.Peek(min(c.r.Buffered(), lineLookahead))
	return bytes.IndexByte(b, '\n') >= 0
}

// flush sends what was written.
func (c *conn) flush() error {
	c.nc.SetWriteDeadline(time.Now().Add(c.timeout))
	return c.fail(c.w.Flush())
}

// bytesTime is what moving n bytes may take beyond the timeout: a second
// per MiB (items may be as large as memcached's -I, up to 1 GiB).
func bytesTime(n int64) time.Duration { return time.Duration(n>>20) * time.Second }

// copyValue moves an n-byte value and its \r\n from c's reader to w,
// without holding it whole.
// The read deadline is set only when the value and its \r\n are not
// buffered whole (as for line).
func (c *conn) copyValue(w io.Writer, n int64) error {
	if int64(c.r.Buffered()) < n+2 {
		c.nc.SetReadDeadline(time.Now().Add(c.timeout + bytesTime(n)))
	}
	if bw, ok := w.(*bufio.Writer); ok {
		if err := copyBuffered(bw, c.r, n); err != nil {
			return err
		}
		return c.crlf()
	}
	if _, err := io.CopyN(w, c.r, n); err != nil {
		return err
	}
	return c.crlf()
}

// copyBuffered moves n bytes from r into w's own buffer, flushed whenever
// it is full, so that a destination is written a whole buffer per
// syscall. (io.CopyN into a bufio.Writer flushes what it holds and then
// writes to the connection in 32 KiB pieces, with a buffer allocated per
// value.) A value longer than r's buffer is read straight into w's.
func copyBuffered(w *bufio.Writer, r *bufio.Reader, n int64) error {
	for n > 0 {
		if w.Available() == 0 {
			if err := w.Flush(); err != nil {
				return err
			}
		}
		buf := w.AvailableBuffer()[:min(int64(w.Available()), n)]
		m, err := r.Read(buf)
		if _, werr := w.Write(buf[:m]); werr != nil {
			return werr
		}
		n -= int64(m)
		if err != nil && n > 0 {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// discard skips an n-byte value and its \r\n.
func (c *conn) discard(n int64) error {
	c.nc.SetReadDeadline(time.Now().Add(c.timeout + bytesTime(n)))
	if _, err := c.r.Discard(int(n)); err != nil {
		return c.fail(err)
	}
	return c.crlf()
}

func (c *conn) crlf() error {
	var end [2]byte
	if _, err := io.ReadFull(c.r, end[:]); err != nil {
		return c.fail(err)
	}
	if end != [2]byte{'\r', '\n'} {
		return &protocolError{addr: c.addr, msg: fmt.Sprintf("a value not followed by \\r\\n but %q", end[:])}
	}
	return nil
}

// protocolError is an answer the copier did not expect: the stream can no
// longer be trusted, and trying again would meet it again.
type protocolError struct {
	addr, msg string
}

func (e *protocolError) Error() string { return e.addr + ": " + e.msg }

// do sends one command line (and a value, if any) and reads its answer
// line: the control connection's requests, one at a time.
func (c *conn) do(line string, value []byte) (string, error) {
	c.w.WriteString(line)
	c.w.WriteString("\r\n")
	if value != nil {
		c.w.Write(value)
		c.w.WriteString("\r\n")
	}
	if err := c.flush(); err != nil {
		return "", err
	}
	l, err := c.line()
	return string(l), err
}

// get is mg key v c: the value and cas of an item, ok false on a miss.
func (c *conn) get(key string) (value []byte, cas uint64, ok bool, err error) {
	answer, err := c.do("mg "+key+" v c", nil)
	if err != nil {
		return nil, 0, false, err
	}
	if answer == "EN" {
		return nil, 0, false, nil
	}
	f := bytes.Fields([]byte(answer))
	if len(f) < 3 || string(f[0]) != "VA" || f[2][0] != 'c' {
		return nil, 0, false, &protocolError{addr: c.addr, msg: fmt.Sprintf("mg %s answered %q", key, answer)}
	}
	n, err1 := strconv.ParseInt(string(f[1]), 10, 32)
	cas, err2 := strconv.ParseUint(string(f[2][1:]), 10, 64)
	if err1 != nil || err2 != nil || n < 0 {
		return nil, 0, false, &protocolError{addr: c.addr, msg: fmt.Sprintf("mg %s answered %q", key, answer)}
	}
	var buf bytes.Buffer
	if err := c.copyValue(&buf, n); err != nil {
		return nil, 0, false, c.fail(err)
	}
	return buf.Bytes(), cas, true, nil
}

// store is ms key with the given flags (mode, cas, TTL): it answers
// whether memcached stored it (HD), or not (NS, EX, NF).
func (c *conn) store(key string, value []byte, flags string) (bool, error) {
	answer, err := c.do(fmt.Sprintf("ms %s %d %s", key, len(value), flags), value)
	if err != nil {
		return false, err
	}
	switch answer {
	case "HD":
		return true, nil
	case "NS", "EX", "NF":
		return false, nil
	}
	return false, &protocolError{addr: c.addr, msg: fmt.Sprintf("ms %s answered %q", key, answer)}
}

// deleteCAS is md key C<cas>: it deletes the item only if it is still
// the one read.
func (c *conn) deleteCAS(key string, cas uint64) error {
	answer, err := c.do(fmt.Sprintf("md %s C%d", key, cas), nil)
	if err != nil {
		return err
	}
	switch answer {
	case "HD", "NF", "EX":
		return nil
	}
	return &protocolError{addr: c.addr, msg: fmt.Sprintf("md %s answered %q", key, answer)}
}
