package follow_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/example/memcached-operator/cmd/memcached-agent/internal/follow"
	"github.com/example/memcached-operator/cmd/memcached-agent/internal/serverlist"
	"github.com/example/memcached-operator/sync/api/v1alpha1"
)

// FuzzDecode feeds any bytes to the path a --from-file object takes:
// Decode (JSON, or YAML converted) and the Publisher. No panic; an object
// that decodes is a Memcached; whatever is published has servers and a
// positive version.
//
// make test runs it for a few seconds; make fuzz for as long as you like.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(object(5, "a=10.0.0.1", "", "b=fd00::2")))
	f.Add([]byte(toYAML(f, object(6, "a=10.0.0.1"))))
	f.Add([]byte(`{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":"cache"},"status":{"slotTable":{"version":-1}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := follow.Decode(b)
		if err != nil {
			return
		}
		if m.APIVersion != v1alpha1.APIVersion || m.Kind != v1alpha1.Kind {
			t.Fatalf("decoded %s %s", m.APIVersion, m.Kind)
		}
		pub := serverlist.New(slog.New(slog.DiscardHandler), nil, time.Now)
		pub.Offer("file", m)
		if cur := pub.Current(); cur != nil && (len(cur.Nodes) == 0 || cur.Version <= 0) {
			t.Fatalf("published %+v", cur)
		}
	})
}
