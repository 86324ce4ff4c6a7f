// Package pool writes the pool file of memcached's proxy: the slot table
// of the Memcached the agent follows, as the data the proxy's route
// configuration (sync/memcached/proxy.lua, the ConfigMap NAME-proxy) reads
// once a second and reloads when it changes.
//
// The file's line order is the distribution: the proxy hashes a key with
// XXH3 and picks a backend by jump hash over the lines, in order
// (slots.Place computes the same). So every slot of the table is a line, in
// slot order, Serving or not: a slot without a Serving Pod keeps its place
// as a placeholder backend, marked down, that the proxy answers with an
// error at once and never connects to, and no other slot's keys move.
//
// Why this much care: in memcached 1.6.45 a route configuration that fails
// makes the proxy exit, and a pool with no backend crashes it at its first
// request. proxy.lua refuses a bad file and keeps its last pool, but a
// refused file is a pool that did not follow the table. So the writer never
// writes a file proxy.lua would refuse (its rules are restated in Render,
// and the tests run every kind of table the writer renders through
// proxy.lua itself), never writes an empty pool, and replaces the file
// atomically, so that the proxy never reads half of one.
package pool

import (
	"bytes"
	"fmt"
	"net/netip"
	"strconv"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/sync/slots"
)

// Placeholder is the address of a slot with no Serving Pod: a valid
// address nothing listens on. Its label, DownLabel, makes the proxy treat
// it as a backend that is down.
const Placeholder = "127.0.0.1:1"

// DownLabel is the label of slot's placeholder. proxy.lua takes a label
// that starts with _down_ as a backend that is down; the slot number keeps
// the labels apart, as proxy.lua requires.
func DownLabel(slot int) string { return "_down_" + strconv.Itoa(slot) }

// Reasons a slot table is refused (never written), as metrics label them.
const (
	// BadSlots: the table's entries are not slots 0..n-1 in order.
	BadSlots = "bad_slots"
	// TooManySlots: more slots than proxy.lua takes.
	TooManySlots = "too_many_slots"
	// BadAddress: a Serving slot's ip is not an address the proxy takes,
	// or two Serving slots have the same one.
	BadAddress = "bad_address"
	// BadVersion: the version is negative.
	BadVersion = "bad_version"
	// WrongObject: the object is another Memcached than the one followed.
	WrongObject = "wrong_object"
	// Unreadable: the follower could not read or decode the object.
	Unreadable = "unreadable"
)

// Reasons are every refusal reason, for metrics that show each from the
// start.
var Reasons = []string{BadSlots, TooManySlots, BadAddress, BadVersion, WrongObject, Unreadable}

// Error is a slot table that cannot be written, and why.
type Error struct {
	// Reason is one of Reasons.
	Reason string
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

func refuse(reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Msg: fmt.Sprintf(format, args...)}
}

// Pool is a rendered pool file and what it holds.
type Pool struct {
	// Content is the file's bytes.
	Content []byte
	Version int64
	// Slots is how many slot lines the file has (at least one); Down, how
	// many of them are placeholders.
	Slots, Down int
}

// Render returns the pool file for a slot table:
//
//	version 1767225600        the table's version (informational)
//	10.244.1.7:11211          a Serving slot: its Pod's address, no label
//	127.0.0.1:1 _down_1       any other slot: a placeholder that is down
//	[fd00::7]:11211           IPv6 in brackets
//	end 3                     the number of slot lines: a truncated file lacks it
//
// A Serving slot has no label so that its label is its address: the proxy
// keeps a backend's connections across a reload when its label and address
// are the same, so a Pod that moves to another slot keeps its connections.
// A table with no slot is one placeholder (_down_0): a pool with no backend
// would crash the proxy.
//
// It refuses, with an *Error, a table proxy.lua would refuse or that the
// hook never writes: entries that are not slots 0..n-1 in order (the line
// is the slot: a table listed out of order would send keys to the wrong
// Pods), more than slots.MaxSlots slots, a Serving slot's ip that is not
// an IP address (or has a zone) or that another Serving slot has too, a
// negative version. A Serving slot with no ip is not served (as
// slots.Served has it) and gets a placeholder.
func Render(table v1alpha1.SlotTable) (*Pool, error) {
	if table.Version < 0 {
		return nil, refuse(BadVersion, "status.slotTable.version is %d, negative", table.Version)
	}
	if n := len(table.Slots); n > slots.MaxSlots {
		return nil, refuse(TooManySlots, "status.slotTable has %d slots, more than the proxy takes (%d)", n, slots.MaxSlots)
	}
	p := &Pool{Version: table.Version}
	var b bytes.Buffer
	fmt.Fprintf(&b, "version %d\n", table.Version)
	seen := make(map[netip.Addr]int, len(table.Slots))
	for i, e := range table.Slots {
		if int(e.Slot) != i {
			return nil, refuse(BadSlots, "status.slotTable.slots[%d] is slot %d: the table must list slots 0 to %d in order", i, e.Slot, len(table.Slots)-1)
		}
		if e.State != v1alpha1.SlotServing || e.IP == "" {
			fmt.Fprintf(&b, "%s %s\n", Placeholder, DownLabel(i))
			p.Down++
			continue
		}
		addr, err := netip.ParseAddr(e.IP)
		if err != nil || addr.Zone() != "" {
			return nil, refuse(BadAddress, "slot %d's ip %q is not an IP address without a zone", i, e.IP)
		}
		if j, twice := seen[addr]; twice {
			return nil, refuse(BadAddress, "slots %d and %d are both Serving at %s", j, i, addr)
		}
		seen[addr] = i
		b.WriteString(netip.AddrPortFrom(addr, memcached.Port).String())
		b.WriteByte('\n')
	}
	p.Slots = len(table.Slots)
	if p.Slots == 0 {
		fmt.Fprintf(&b, "%s %s\n", Placeholder, DownLabel(0))
		p.Slots, p.Down = 1, 1
	}
	fmt.Fprintf(&b, "end %d\n", p.Slots)
	p.Content = b.Bytes()
	return p, nil
}
