package dataplane

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// Values returns the value this memcached holds for each of keys it holds,
// asked directly (mg with v, pipelined: one write, then the answers).
func (m *Memcached) Values(t testing.TB, keys []string) map[string]string {
	t.Helper()
	c := mustDial(t, m.Addr(), 60*time.Second)
	defer c.Close()
	errc := make(chan error, 1)
	go func() {
		w := bufio.NewWriterSize(c, 64<<10)
		for _, k := range keys {
			fmt.Fprintf(w, "mg %s v\r\n", k)
		}
		errc <- w.Flush()
	}()
	r := bufio.NewReaderSize(c, 64<<10)
	out := map[string]string{}
	for _, k := range keys {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("dataplane: %s: %v", m.Addr(), err)
		}
		switch {
		case strings.HasPrefix(line, "VA "):
			var n int
			if _, err := fmt.Sscanf(line, "VA %d", &n); err != nil {
				t.Fatalf("dataplane: %s: %q", m.Addr(), line)
			}
			buf := make([]byte, n+2)
			if _, err := io.ReadFull(r, buf); err != nil {
				t.Fatalf("dataplane: %s: %v", m.Addr(), err)
			}
			out[k] = string(buf[:n])
		case line == "EN\r\n":
		default:
			t.Fatalf("dataplane: %s answered mg %s with %q", m.Addr(), k, line)
		}
	}
	if err := <-errc; err != nil {
		t.Fatalf("dataplane: %s: %v", m.Addr(), err)
	}
	return out
}

// Set stores key=value in this memcached, directly.
func (m *Memcached) Set(t testing.TB, key, value string) {
	t.Helper()
	got, err := Ask(m.Addr(), fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", key, len(value), value))
	if err != nil || got != "STORED\r\n" {
		t.Fatalf("dataplane: set %s on %s: %q, %v", key, m.Addr(), got, err)
	}
}
