package dataplane

import (
	"fmt"
	"strings"
	"testing"

	"github.com/example/memcached-operator/test/memcachedtest"
)

// Values returns the value this memcached holds for each of keys it holds,
// asked directly (mg with v, pipelined: one write, then the answers).
func (m *Memcached) Values(t testing.TB, keys []string) map[string]string {
	t.Helper()
	c := memcachedtest.Dial(t, m.Addr())
	defer c.Close()
	errc := make(chan error, 1)
	go func() {
		var req strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&req, "mg %s v\r\n", k)
		}
		errc <- c.Send(req.String())
	}()
	out := map[string]string{}
	for _, k := range keys {
		got, err := c.Answer()
		if err != nil {
			t.Fatalf("dataplane: %v", err)
		}
		switch head, value, _ := strings.Cut(got, "\r\n"); {
		case strings.HasPrefix(head, "VA "):
			out[k] = strings.TrimSuffix(value, "\r\n")
		case got == "EN\r\n":
		default:
			t.Fatalf("dataplane: %s answered mg %s with %q", m.Addr(), k, got)
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
	got, err := memcachedtest.Ask(m.Addr(), fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", key, len(value), value))
	if err != nil || got != "STORED\r\n" {
		t.Fatalf("dataplane: set %s on %s: %q, %v", key, m.Addr(), got, err)
	}
}
