package testutil

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"
)

// loopbackBlocks gives each package whose tests run servers on loopback
// addresses of their own (memcached on its port, 11211, as at a Pod IP:
// the hand-offs and the pools name addresses alone) a /24 of 127/8, every
// address of which is the loopback on Linux. make test runs packages at
// once (go test -p 3), so two packages taking addresses from one block
// would meet: this table is the one place blocks are given, and
// TestLoopbackBlocks holds it to no two overlapping and to no address
// written anywhere else. A name is the package's directory in the module,
// and a word after it when the package has a second block.
var loopbackBlocks = map[string]string{
	"cmd/memcached-agent":                  "127.20.2.0/24",
	"cmd/memcached-agent/internal/handoff": "127.20.1.0/24",
	"sync/memcached":                       "127.0.126.0/24",
	"test/clients":                         "127.0.27.0/24",
	"test/clients stale":                   "127.0.28.0/24",
	"test/dataplane":                       "127.0.23.0/24",
	"test/discovery":                       "127.0.18.0/24",
	"test/handoff":                         "127.0.21.0/24",
	"test/handoff dns":                     "127.0.24.0/24",
	"test/proxy":                           "127.0.19.0/24",
	"test/proxy zones":                     "127.0.30.0/24",
	"test/proxy zones hook":                "127.0.31.0/24",
	"test/monitoring":                      "127.0.35.0/24",
	"test/memcachedtest":                   "127.0.37.0/24",
}

// LoopbackBlock is a package's block of loopback addresses.
type LoopbackBlock struct {
	name   string
	prefix netip.Prefix

	mu   sync.Mutex
	lent [256]bool
}

var loopback = struct {
	sync.Mutex
	blocks map[string]*LoopbackBlock
}{blocks: map[string]*LoopbackBlock{}}

// Loopback is the block named name in the table above; it panics on a
// name the table does not hold.
func Loopback(name string) *LoopbackBlock {
	loopback.Lock()
	defer loopback.Unlock()
	if b, ok := loopback.blocks[name]; ok {
		return b
	}
	s, ok := loopbackBlocks[name]
	if !ok {
		panic(fmt.Sprintf("testutil: no loopback block for %q: give it one in loopbackBlocks", name))
	}
	b := &LoopbackBlock{name: name, prefix: netip.MustParsePrefix(s)}
	loopback.blocks[name] = b
	return b
}

// String is the block, as 127.x.y.0/24.
func (b *LoopbackBlock) String() string { return b.prefix.String() }

// IP is the block's address n (1 to 254), as 127.x.y.n; it panics on any
// other n.
func (b *LoopbackBlock) IP(n int) string {
	if n < 1 || n > 254 {
		panic(fmt.Sprintf("testutil: address %d of loopback block %s (%s): want 1 to 254", n, b.name, b.prefix))
	}
	a := b.prefix.Addr().As4()
	a[3] = byte(n)
	return netip.AddrFrom4(a).String()
}

// Lend is the lowest address of the block that no running test holds,
// held by t until it ends: the cleanup that gives it back runs after
// those of the servers t starts on it later, so a package that takes its
// addresses so runs under -count=N, and with any number of tests, in 254
// addresses at once. A package lends its block's addresses or names them
// with IP, not both.
func (b *LoopbackBlock) Lend(t testing.TB) string {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for n := 1; n <= 254; n++ {
		if !b.lent[n] {
			b.lent[n] = true
			t.Cleanup(func() {
				b.mu.Lock()
				defer b.mu.Unlock()
				b.lent[n] = false
			})
			return b.IP(n)
		}
	}
	t.Fatalf("testutil: every address of loopback block %s (%s) is held", b.name, b.prefix)
	return ""
}
