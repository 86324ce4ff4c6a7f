package contract

import (
	"bytes"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
)

// The pool file is the slot table as memcached's proxy routes by it: the
// agent beside each proxy writes it (RenderPool), and the proxy's route
// configuration (sync/memcached/proxy.lua, the ConfigMap NAME-proxy) reads
// it once a second and reloads when it changes. ParsePool reads it by
// proxy.lua's rules, and a test runs proxy.lua itself, under memcached's
// Lua, on every kind of pool RenderPool writes, and on broken ones, to
// hold the two readers equal.
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
// refused file is a pool that did not follow the table. So RenderPool
// never renders a file proxy.lua would refuse, nor an empty pool.

// PoolPlaceholder is the address of a slot with no Serving Pod: a valid
// address nothing listens on. Its label, DownLabel, makes the proxy treat
// it as a backend that is down.
const PoolPlaceholder = "127.0.0.1:1"

// DownLabel is the label of slot's placeholder. proxy.lua takes a label
// that starts with _down_ as a backend that is down; the slot number keeps
// the labels apart, as proxy.lua requires.
func DownLabel(slot int) string { return downPrefix + strconv.Itoa(slot) }

const downPrefix = "_down_"

// MaxPoolBytes is the largest pool file proxy.lua reads (its MAX_BYTES).
const MaxPoolBytes = 256 * 1024

// Reasons RenderPool refuses a slot table, as metrics label them.
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
)

// PoolError is a slot table that cannot be rendered, and why.
type PoolError struct {
	// Reason is BadSlots, TooManySlots, BadAddress or BadVersion.
	Reason string
	Msg    string
}

func (e *PoolError) Error() string { return e.Msg }

func refuse(reason, format string, args ...any) *PoolError {
	return &PoolError{Reason: reason, Msg: fmt.Sprintf(format, args...)}
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

// RenderPool returns the pool file for a slot table:
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
// It refuses, with a *PoolError, a table proxy.lua would refuse or that the
// hook never writes: entries that are not slots 0..n-1 in order
// (CheckOrder: the line is the slot, and a table listed out of order would
// send keys to the wrong Pods), more than MaxSlots slots, a Serving slot's
// ip that is not an IP address (or has a zone) or that another Serving
// slot has too, a negative version. A Serving slot with no ip is not
// served (as slots.Served has it) and gets a placeholder.
func RenderPool(table v1alpha1.SlotTable) (*Pool, error) {
	if table.Version < 0 {
		return nil, refuse(BadVersion, "status.slotTable.version is %d, negative", table.Version)
	}
	if n := len(table.Slots); n > MaxSlots {
		return nil, refuse(TooManySlots, "status.slotTable has %d slots, more than the proxy takes (%d)", n, MaxSlots)
	}
	if err := CheckOrder(table.Slots); err != nil {
		return nil, refuse(BadSlots, "%s", err)
	}
	p := &Pool{Version: table.Version}
	var b bytes.Buffer
	fmt.Fprintf(&b, "version %d\n", table.Version)
	seen := make(map[netip.Addr]int, len(table.Slots))
	for i, e := range table.Slots {
		if e.State != v1alpha1.SlotServing || e.IP == "" {
			fmt.Fprintf(&b, "%s %s\n", PoolPlaceholder, DownLabel(i))
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
		b.WriteString(netip.AddrPortFrom(addr, Port).String())
		b.WriteByte('\n')
	}
	p.Slots = len(table.Slots)
	if p.Slots == 0 {
		fmt.Fprintf(&b, "%s %s\n", PoolPlaceholder, DownLabel(0))
		p.Slots, p.Down = 1, 1
	}
	fmt.Fprintf(&b, "end %d\n", p.Slots)
	p.Content = b.Bytes()
	return p, nil
}

// Backend is a line of a pool file as the proxy takes it: routelib's
// backend, with its address and label as text, as proxy.lua hands them on.
type Backend struct {
	Host, Port, Label string
	// Down is a placeholder: the proxy never connects to it.
	Down bool
}

// ParsedPool is a pool file as the proxy routes by it.
type ParsedPool struct {
	// Version is the version line's digits, or "-" without one.
	Version string
	// Backends are the slots, in order.
	Backends []Backend
}

// ParsePool reads a pool file by proxy.lua's rules, and refuses what it
// refuses with the reason it logs: a file that is empty or larger than
// MaxPoolBytes; a last line without a newline; text after the end line; a
// version line that is not the first; more than MaxSlots slot lines; a
// slot line that is not IPv4:port or [IPv6]:port (the IPv6 address as hex
// digits, colons and dots), a port out of 1..65535, a label longer than 64
// or of other characters than letters, digits, "_.:-", or more than two
// fields; a label, or the address of a backend that is not down, listed
// twice; no end line, or one that does not count the slot lines; no slot.
// Blank lines and lines starting with # are skipped; white space is Lua's.
func ParsePool(data []byte) (*ParsedPool, error) {
	switch {
	case len(data) == 0:
		return nil, fmt.Errorf("is empty")
	case len(data) > MaxPoolBytes:
		return nil, fmt.Errorf("is larger than %d bytes", MaxPoolBytes)
	case data[len(data)-1] != '\n':
		return nil, fmt.Errorf("last line has no newline (truncated?)")
	}
	p := &ParsedPool{Version: "-"}
	labels, addrs := map[string]bool{}, map[string]bool{}
	hasVersion, ended, end := false, false, ""
	lines := strings.Split(string(data[:len(data)-1]), "\n")
	for i, raw := range lines {
		n := i + 1
		line := strings.Trim(raw, luaSpace)
		fields := strings.FieldsFunc(line, isLuaSpace)
		switch {
		case line == "" || line[0] == '#':
		case ended:
			return nil, fmt.Errorf("line %d: text after the end line", n)
		case len(fields) == 2 && fields[0] == "version" && isDigits(fields[1]):
			if hasVersion || len(p.Backends) > 0 {
				return nil, fmt.Errorf("line %d: version must come first, once", n)
			}
			hasVersion, p.Version = true, fields[1]
		case len(fields) == 2 && fields[0] == "end" && isDigits(fields[1]):
			ended, end = true, fields[1]
		default:
			if len(p.Backends) >= MaxSlots {
				return nil, fmt.Errorf("more than %d slots", MaxSlots)
			}
			b, err := parseBackend(fields)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			if labels[b.Label] {
				return nil, fmt.Errorf("line %d: label %s listed twice", n, b.Label)
			}
			a := b.Host + "|" + b.Port
			if !b.Down && addrs[a] {
				return nil, fmt.Errorf("line %d: address %s:%s listed twice", n, b.Host, b.Port)
			}
			labels[b.Label], addrs[a] = true, true
			p.Backends = append(p.Backends, b)
		}
	}
	if !ended {
		return nil, fmt.Errorf("no end line (truncated?)")
	}
	// Lua reads a count too large for an integer as a float, which equals
	// no count of lines (and prints it as C's %.14g).
	if count, err := strconv.ParseUint(end, 10, 63); err != nil {
		f, _ := strconv.ParseFloat(end, 64)
		return nil, fmt.Errorf("end line says %s slots, file has %d", strconv.FormatFloat(f, 'g', 14, 64), len(p.Backends))
	} else if count != uint64(len(p.Backends)) {
		return nil, fmt.Errorf("end line says %d slots, file has %d", count, len(p.Backends))
	}
	if len(p.Backends) == 0 {
		return nil, fmt.Errorf("no backend")
	}
	return p, nil
}

// parseBackend reads a slot line's fields (proxy.lua's parse_line).
func parseBackend(fields []string) (Backend, error) {
	if len(fields) > 2 {
		return Backend{}, fmt.Errorf("too many fields")
	}
	addr, label := fields[0], ""
	if len(fields) == 2 {
		label = fields[1]
	}
	var host, port string
	if h, pt, ok := bracketed(addr); ok {
		if len(h) < 2 || len(h) > 45 || !strings.Contains(h, ":") || strings.IndexFunc(h, func(r rune) bool { return !isHex(r) && r != ':' && r != '.' }) >= 0 {
			return Backend{}, fmt.Errorf("bad IPv6 address %s", h)
		}
		host, port = h, pt
	} else {
		h, pt, ok := strings.Cut(addr, ":")
		if !ok || strings.Contains(pt, ":") || h == "" || !isDigits(pt) || strings.IndexFunc(h, func(r rune) bool { return !isDigit(r) && r != '.' }) >= 0 || !validIPv4(h) {
			return Backend{}, fmt.Errorf("want IPv4:port or [IPv6]:port, got %s", addr)
		}
		host, port = h, pt
	}
	p, _ := strconv.Atoi(port)
	if len(port) > 5 || p < 1 || p > 65535 {
		return Backend{}, fmt.Errorf("bad port %s", port)
	}
	// No leading zeros: the label is compared as text.
	port = strconv.Itoa(p)
	if label == "" {
		label = host + ":" + port
	} else if len(label) > 64 || strings.IndexFunc(label, func(r rune) bool { return !isDigit(r) && !isLetter(r) && !strings.ContainsRune("_.:-", r) }) >= 0 {
		return Backend{}, fmt.Errorf("bad label %s", label)
	}
	return Backend{Host: host, Port: port, Label: label, Down: strings.HasPrefix(label, downPrefix)}, nil
}

// bracketed splits "[host]:port", host without ']' and port digits.
func bracketed(addr string) (host, port string, ok bool) {
	rest, found := strings.CutPrefix(addr, "[")
	if !found {
		return "", "", false
	}
	host, port, found = strings.Cut(rest, "]:")
	if !found || host == "" || strings.Contains(host, "]") || !isDigits(port) {
		return "", "", false
	}
	return host, port, true
}

// validIPv4 is proxy.lua's valid_ipv4: four dotted decimal octets up to
// 255, without a leading zero (getaddrinfo would read "010" as octal 8).
func validIPv4(h string) bool {
	octets := strings.Split(h, ".")
	if len(octets) != 4 {
		return false
	}
	for _, o := range octets {
		if !isDigits(o) || len(o) > 3 || (len(o) > 1 && o[0] == '0') {
			return false
		}
		if v, _ := strconv.Atoi(o); v > 255 {
			return false
		}
	}
	return true
}

// luaSpace is Lua's %s, in the C locale.
const luaSpace = " \t\n\v\f\r"

func isLuaSpace(r rune) bool { return strings.ContainsRune(luaSpace, r) }
func isDigit(r rune) bool    { return '0' <= r && r <= '9' }
func isLetter(r rune) bool   { return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' }
func isHex(r rune) bool      { return isDigit(r) || 'a' <= r && r <= 'f' || 'A' <= r && r <= 'F' }

// isDigits is Lua's %d+.
func isDigits(s string) bool {
	return s != "" && strings.IndexFunc(s, func(r rune) bool { return !isDigit(r) }) < 0
}
