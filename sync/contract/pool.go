package contract

import (
	"bytes"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
)

// The pool file is the slot tables as memcached's proxy routes by them: the
// agent beside each proxy writes it (RenderPool), and the proxy's route
// configuration (sync/memcached/proxy.lua, the ConfigMap NAME-proxy) reads
// it once a second and reloads when it changes. ParsePool reads it by
// proxy.lua's rules, and a test runs proxy.lua itself, under memcached's
// Lua, on every kind of pool RenderPool writes, and on broken ones, to
// hold the two readers equal.
//
// The file is a pool set, a pool a zone: each zone's slot table under a
// "zone NAME" line. A Memcached without zones is the one zone "", which has
// no zone line, so that its file is what it was before zones. The file
// says which: proxy.lua routes every command to the one pool of the zone
// "", and with zones reads to the proxy's own zone and writes to every
// zone.
//
// A zone's line order is the distribution: the proxy hashes a key with
// XXH3 and picks a backend by jump hash over the zone's lines, in order
// (slots.Place computes the same). So every slot of the table is a line, in
// slot order, served or not: a slot that serves no Pod (v1alpha1.Slot's
// ServedIP: a Serving or Leaving slot serves its own Pod, a Filling slot
// the Pod it is being filled from) keeps its place as a placeholder backend, marked down, that the proxy answers with an
// error at once and never connects to, and no other slot's keys move.
//
// Why this much care: in memcached 1.6.45 a route configuration that fails
// makes the proxy exit, and a pool with no backend crashes it at its first
// request. proxy.lua refuses a bad file and keeps its last pool, but a
// refused file is a pool that did not follow the table. So RenderPool
// never renders a file proxy.lua would refuse, nor an empty pool.

// PoolPlaceholder is the address of a slot that serves no Pod: a valid
// address nothing listens on. Its label, DownLabel, makes the proxy treat
// it as a backend that is down.
const PoolPlaceholder = "127.0.0.1:1"

// DownLabel is the label of slot's placeholder without zones. proxy.lua
// takes a label that starts with _down_ as a backend that is down; the
// slot number keeps the labels apart, as proxy.lua requires.
func DownLabel(slot int) string { return downPrefix + strconv.Itoa(slot) }

const downPrefix = "_down_"

// ZoneDownLabel is the label of a zone's slot's placeholder: with zones
// the file holds a table a zone, and the zone keeps its labels apart from
// the other zones' (proxy.lua requires every label once in the file).
// v1alpha1.MaxZoneNameLen keeps it within the 64 characters a label may
// have.
func ZoneDownLabel(zone string, slot int) string {
	return downPrefix + zone + "_" + strconv.Itoa(slot)
}

// MaxPoolBytes is the largest pool file proxy.lua reads (its MAX_BYTES):
// v1alpha1.MaxZones zones of MaxSlots placeholders with names of
// v1alpha1.MaxZoneNameLen take half of it.
const MaxPoolBytes = 1024 * 1024

// Reasons RenderPool refuses a slot table, as metrics label them.
const (
	// BadSlots: the table's entries are not slots 0..n-1 in order.
	BadSlots = "bad_slots"
	// TooManySlots: more slots than proxy.lua takes.
	TooManySlots = "too_many_slots"
	// BadAddress: a served slot's address is not one the proxy takes, or
	// two served slots have the same one.
	BadAddress = "bad_address"
	// BadVersion: the version is negative.
	BadVersion = "bad_version"
	// BadZone: no zone, more than v1alpha1.MaxZones, a zone's name that
	// is not a DNS label of at most v1alpha1.MaxZoneNameLen characters, a
	// zone listed twice, or the zone "" beside another.
	BadZone = "bad_zone"
)

// PoolError is a slot table that cannot be rendered, and why.
type PoolError struct {
	// Reason is BadSlots, TooManySlots, BadAddress, BadVersion or BadZone.
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
	// Zones are the zones' sections, in file order: without zones, the
	// one zone "".
	Zones []ZonePool
}

// ZonePool is one zone's section of a pool file.
type ZonePool struct {
	Name string
	// Version is the version of the zone's slot table, as the tables line
	// says it.
	Version int64
	// Slots is how many slot lines the zone has (at least one); Down, how
	// many of them are placeholders.
	Slots, Down int
}

// PoolZones is the pool set of a Memcached's status: status.zones, or
// without zones the one zone "" of status.slotTable. The status has the
// one or the other, never both.
func PoolZones(st *v1alpha1.MemcachedStatus) []v1alpha1.ZoneStatus {
	if len(st.Zones) > 0 {
		return st.Zones
	}
	return []v1alpha1.ZoneStatus{{SlotTable: st.SlotTable}}
}

// RenderPool returns the pool file of a pool set (PoolZones): each zone's
// slot table under a zone line, in the order of zones (the status's, that
// of spec.zones.names), as proxy.lua reads it:
//
//	version 1767225600        the highest of the zones' table versions (informational)
//	# tables a=1767225599 b=1767225600
//	                          each zone's table version, in the order of zones:
//	                          what the proxy says it loaded (TablesLine)
//	zone a                    zone a's slot lines follow
//	10.244.1.7:11211          a served slot: its served Pod's address, no label
//	127.0.0.1:1 _down_a_1     any other slot: a placeholder that is down, its
//	                          label naming the zone, so that no two are alike
//	zone b
//	[fd00::7]:11211           IPv6 in brackets
//	127.0.0.1:1 _down_b_1
//	end 4                     the number of slot lines, every zone's: a
//	                          truncated file lacks it
//
// A Memcached without zones is the one zone "", whose slot lines are the
// file's, with no zone line, and whose placeholders are labelled _down_1
// (DownLabel):
//
//	version 1767225600
//	# tables =1767225600
//	10.244.1.7:11211
//	127.0.0.1:1 _down_1
//	end 2
//
// A served slot has no label so that its label is its address: the proxy
// keeps a backend's connections across a reload when its label and address
// are the same, so a Pod that moves to another slot keeps its connections.
// A zone whose table has no slot is one placeholder (_down_0, _down_a_0):
// a pool with no backend would crash the proxy.
//
// It refuses, with a *PoolError, a pool set proxy.lua would refuse or that
// the hook never writes: entries of a table that are not slots 0..n-1 in
// order (BadSlots, CheckOrder: the line is the slot, and a table listed
// out of order would send keys to the wrong Pods), more than MaxSlots
// slots in a zone (TooManySlots), a served slot's address that is not an IP
// address (or has a zone) or that another served slot has too, in any
// zone (BadAddress: a Pod is in one zone, and the proxy takes an address
// once), a negative version (BadVersion); no zone, more than
// v1alpha1.MaxZones zones, a zone's name that is not a DNS label of at
// most v1alpha1.MaxZoneNameLen characters, a zone listed twice, or the
// zone "" beside another (BadZone). Those bounds keep the file within
// MaxPoolBytes. A slot with no served address is not served (as
// slots.Served has it) and gets a placeholder.
func RenderPool(zones []v1alpha1.ZoneStatus) (*Pool, error) {
	if len(zones) == 0 {
		return nil, refuse(BadZone, "the pool set has no zone")
	}
	if len(zones) > v1alpha1.MaxZones {
		return nil, refuse(BadZone, "status.zones lists %d zones, more than %d", len(zones), v1alpha1.MaxZones)
	}
	p := &Pool{}
	names := make(map[string]bool, len(zones))
	for _, z := range zones {
		switch {
		case z.Name == "" && len(zones) > 1:
			return nil, refuse(BadZone, "the zone \"\" (a Memcached without zones) is listed beside %d others", len(zones)-1)
		case z.Name != "" && !ZoneNameOK(z.Name):
			return nil, refuse(BadZone, "zone %q is not a DNS label of at most %d characters", z.Name, v1alpha1.MaxZoneNameLen)
		case names[z.Name]:
			return nil, refuse(BadZone, "zone %s is listed twice", z.Name)
		case z.SlotTable.Version < 0 && z.Name == "":
			return nil, refuse(BadVersion, "status.slotTable.version is %d, negative", z.SlotTable.Version)
		case z.SlotTable.Version < 0:
			return nil, refuse(BadVersion, "zone %s's slot table version is %d, negative", z.Name, z.SlotTable.Version)
		}
		names[z.Name] = true
		p.Version = max(p.Version, z.SlotTable.Version)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "version %d\n", p.Version)
	b.WriteString(TablesLine(zones))
	seen := map[netip.Addr]servedAt{}
	for _, z := range zones {
		if z.Name != "" {
			fmt.Fprintf(&b, "zone %s\n", z.Name)
		}
		slots, down, err := renderSlots(&b, z.Name, z.SlotTable, seen)
		if err != nil {
			return nil, err
		}
		p.Zones = append(p.Zones, ZonePool{Name: z.Name, Version: z.SlotTable.Version, Slots: slots, Down: down})
		p.Slots += slots
		p.Down += down
	}
	fmt.Fprintf(&b, "end %d\n", p.Slots)
	p.Content = b.Bytes()
	return p, nil
}

// ZoneNameOK tells whether a zone's name is one a zone line of the pool
// file takes: a DNS label (lower case letters, digits and '-', starting and
// ending with a letter or digit) of at most v1alpha1.MaxZoneNameLen
// characters, as spec.zones.names' rule has it (which also keeps a few
// names out for the Deployments' sake; the pool file does not need to).
func ZoneNameOK(z string) bool {
	if z == "" || len(z) > v1alpha1.MaxZoneNameLen || z[0] == '-' || z[len(z)-1] == '-' {
		return false
	}
	return strings.IndexFunc(z, func(r rune) bool { return !isDigit(r) && !('a' <= r && r <= 'z') && r != '-' }) < 0
}

// servedAt is where renderSlots met an address: a zone (empty without
// zones) and a slot.
type servedAt struct {
	zone string
	slot int
}

// renderSlots writes the slot lines of zone's table (zone is empty
// without zones) to b, and returns how many it wrote and how many of them
// are placeholders: one a listed slot (v1alpha1.Listed: a scale-up's
// Adding slots are not, so that no key moves before its Pod holds it), or
// one placeholder for a table with none. seen holds the addresses already Serving in the file, and gets
// this table's.
func renderSlots(b *bytes.Buffer, zone string, table v1alpha1.SlotTable, seen map[netip.Addr]servedAt) (slots, down int, err error) {
	what := "status.slotTable"
	if zone != "" {
		what = "zone " + zone + "'s slot table"
	}
	if n := len(table.Slots); n > MaxSlots {
		return 0, 0, refuse(TooManySlots, "%s has %d slots, more than the proxy takes (%d)", what, n, MaxSlots)
	}
	if err := CheckOrder(table.Slots); err != nil {
		if zone != "" {
			return 0, 0, refuse(BadSlots, "zone %s: %s", zone, err)
		}
		return 0, 0, refuse(BadSlots, "%s", err)
	}
	listed := v1alpha1.Listed(table.Slots)
	for i, e := range listed {
		ip := e.ServedIP()
		if ip == "" {
			fmt.Fprintf(b, "%s %s\n", PoolPlaceholder, downLabel(zone, i))
			down++
			continue
		}
		addr, err := netip.ParseAddr(ip)
		if err != nil || addr.Zone() != "" {
			if zone != "" {
				return 0, 0, refuse(BadAddress, "zone %s: slot %d's ip %q is not an IP address without a zone", zone, i, ip)
			}
			return 0, 0, refuse(BadAddress, "slot %d's ip %q is not an IP address without a zone", i, ip)
		}
		if at, twice := seen[addr]; twice {
			if zone == "" {
				return 0, 0, refuse(BadAddress, "slots %d and %d are both Serving at %s", at.slot, i, addr)
			}
			return 0, 0, refuse(BadAddress, "zone %s's slot %d and zone %s's slot %d are both Serving at %s", at.zone, at.slot, zone, i, addr)
		}
		seen[addr] = servedAt{zone: zone, slot: i}
		b.WriteString(netip.AddrPortFrom(addr, Port).String())
		b.WriteByte('\n')
	}
	if len(listed) == 0 {
		fmt.Fprintf(b, "%s %s\n", PoolPlaceholder, downLabel(zone, 0))
		return 1, 1, nil
	}
	return len(listed), down, nil
}

// downLabel is DownLabel, or ZoneDownLabel in a zone.
func downLabel(zone string, slot int) string {
	if zone == "" {
		return DownLabel(slot)
	}
	return ZoneDownLabel(zone, slot)
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
	// Backends are the slots, in order: every zone's, in file order.
	Backends []Backend
	// Zones are the zones' pools, in file order: without zone lines, the
	// one zone "".
	Zones []ParsedZone
	// Tables are the zones' table versions the tables line gives
	// (TablesLine), in the order of Zones; nil when the file has no
	// tables line proxy.lua takes (ParseTables).
	Tables []ZoneVersion
}

// ParsedZone is a zone's pool, as the proxy routes by it.
type ParsedZone struct {
	Name string
	// Backends are the zone's slots, in order.
	Backends []Backend
}

// ParsePool reads a pool file by proxy.lua's rules, and refuses what it
// refuses with the reason it logs: a file that is empty or larger than
// MaxPoolBytes; a last line without a newline; text after the end line; a
// version line that is not the first; a zone line whose name is not a DNS
// label of at most v1alpha1.MaxZoneNameLen characters, or a zone listed
// twice, or one after slot lines of no zone (the zone ""); more than
// MaxSlots slot lines in a zone; a slot line that is not IPv4:port or
// [IPv6]:port (the IPv6 address as hex digits, colons and dots), a port
// out of 1..65535, a label longer than 64 or of other characters than
// letters, digits, "_.:-", or more than two fields; a label, or the
// address of a backend that is not down, listed twice in the file; no end
// line, or one that does not count every zone's slot lines; no slot; a
// zone with no slot. Blank lines and lines starting with # are skipped;
// white space is Lua's. The one comment that means something is the
// tables line (TablesLine), read into Tables; a file without one, or with
// one proxy.lua does not take, is taken all the same, with no Tables.
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
	labels, addrs, zones := map[string]bool{}, map[string]bool{}, map[string]bool{}
	hasVersion, ended, end := false, false, ""
	var tables []string
	tablesLines := 0
	lines := strings.Split(string(data[:len(data)-1]), "\n")
	for i, raw := range lines {
		n := i + 1
		line := strings.Trim(raw, luaSpace)
		fields := strings.FieldsFunc(line, isLuaSpace)
		switch {
		case line == "" || line[0] == '#':
			if f := strings.FieldsFunc(line[min(1, len(line)):], isLuaSpace); len(f) > 1 && f[0] == "tables" {
				tables = f[1:]
				tablesLines++
			}
		case ended:
			return nil, fmt.Errorf("line %d: text after the end line", n)
		case len(fields) == 2 && fields[0] == "version" && isDigits(fields[1]):
			if hasVersion || len(p.Backends) > 0 || len(p.Zones) > 0 {
				return nil, fmt.Errorf("line %d: version must come first, once", n)
			}
			hasVersion, p.Version = true, fields[1]
		case len(fields) == 2 && fields[0] == "end" && isDigits(fields[1]):
			ended, end = true, fields[1]
		case len(fields) == 2 && fields[0] == "zone":
			z := fields[1]
			if zones[""] {
				return nil, fmt.Errorf("line %d: a zone line after slot lines of no zone", n)
			}
			if !ZoneNameOK(z) {
				return nil, fmt.Errorf("line %d: bad zone name %s", n, z)
			}
			if zones[z] {
				return nil, fmt.Errorf("line %d: zone %s listed twice", n, z)
			}
			zones[z] = true
			p.Zones = append(p.Zones, ParsedZone{Name: z})
		default:
			if len(p.Zones) == 0 {
				// Slot lines before any zone line: the zone "".
				zones[""] = true
				p.Zones = append(p.Zones, ParsedZone{})
			}
			zone := &p.Zones[len(p.Zones)-1]
			if len(zone.Backends) >= MaxSlots {
				if zone.Name == "" {
					return nil, fmt.Errorf("more than %d slots", MaxSlots)
				}
				return nil, fmt.Errorf("zone %s has more than %d slots", zone.Name, MaxSlots)
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
			zone.Backends = append(zone.Backends, b)
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
	for _, z := range p.Zones {
		if len(z.Backends) == 0 {
			return nil, fmt.Errorf("zone %s has no backend", z.Name)
		}
	}
	if tablesLines == 1 {
		p.Tables = parseTables(tables, p.Zones)
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
