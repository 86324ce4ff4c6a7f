package contract

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
)

// A proxy says which pool it routes by (#40, "clients confirm"): the pool
// file carries, in a comment line an earlier proxy.lua skips, the version
// of each zone's slot table it was rendered from (TablesLine); proxy.lua
// keeps them with the pool its workers route by, and announces them once
// a second to whoever watches its user log (`watch proxyuser` on the
// proxy's own port), in one line (LoadedMessage). The agent beside the
// proxy reads that line (ParseLoaded) and reports it (ProxyReport).
//
// Why the versions travel through the file and back, rather than the
// agent assuming what it wrote was loaded: the proxy loads a file at its
// next whole second, may refuse it, and reloads only when the routes
// change; only the proxy knows which one its workers route by. And why
// they are versions, not a checksum of the file: a checksum the agent
// maps back needs the agent to remember every file it wrote, across its
// own restarts; the versions mean the same thing to the proxy, the agent
// and the hook.

// ZoneVersion is one zone's slot table version: the zone "" for a
// Memcached without zones.
type ZoneVersion struct {
	Zone    string
	Version int64
}

// TablesLine is the pool file's tables line for a pool set (PoolZones):
// each zone's slot table version, in the order of zones, as zone=version
// (the zone "" as "=version"), after "# tables ":
//
//	# tables a=1767225599 b=1767225600
//	# tables =1767225600
//
// It is a comment to a proxy.lua before #40, which skips it. proxy.lua
// takes it when it is the file's only tables line, each of its fields a
// zone of the pool and a version in int64 written without a leading zero,
// every zone of the pool once (ParsePool's Tables); otherwise the pool is
// taken all the same, with no versions known.
func TablesLine(zones []v1alpha1.ZoneStatus) string {
	var b strings.Builder
	b.WriteString("# tables")
	for _, z := range zones {
		fmt.Fprintf(&b, " %s=%d", z.Name, z.SlotTable.Version)
	}
	b.WriteByte('\n')
	return b.String()
}

// parseTables reads a tables line's fields (after "# tables") against the
// pool's zones, as proxy.lua's read_tables does: nil unless every field
// is zone=version, the zone of lower case letters, digits and '-' (or
// none), the version digits without a leading zero that fit in int64,
// each zone of the pool once and no other. The result is in the order of
// zones.
func parseTables(fields []string, zones []ParsedZone) []ZoneVersion {
	versions := map[string]int64{}
	for _, f := range fields {
		z, v, ok := strings.Cut(f, "=")
		if !ok || strings.IndexFunc(z, func(r rune) bool { return !isDigit(r) && !('a' <= r && r <= 'z') && r != '-' }) >= 0 {
			return nil
		}
		n, ok := parseVersion(v)
		if _, twice := versions[z]; !ok || twice {
			return nil
		}
		versions[z] = n
	}
	if len(versions) != len(zones) {
		return nil
	}
	out := make([]ZoneVersion, 0, len(zones))
	for _, z := range zones {
		v, ok := versions[z.Name]
		if !ok {
			return nil
		}
		out = append(out, ZoneVersion{Zone: z.Name, Version: v})
	}
	return out
}

// parseVersion reads a version as the tables line and the announcement
// write it: digits, no leading zero, at most int64's largest.
func parseVersion(v string) (int64, bool) {
	if !isDigits(v) || len(v) > 1 && v[0] == '0' {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

// LoadedPrefix starts what proxy.lua announces of the pool it routes by.
const LoadedPrefix = "memcached-proxy-pool: loaded"

// MaxLoadedBytes is the longest announcement a watcher receives whole:
// memcached 1.6.45 formats a user log entry as "type=proxy_user msg=%s"
// into 512 bytes (logger.c) and cuts what does not fit. proxy.lua does not
// announce a longer one (it says so on stderr, once): with versions of
// UnixMilli's 13 digits, eight zones of the longest names come to 479.
const MaxLoadedBytes = 512 - 1 - len("type=proxy_user msg=")

// LoadedMessage is what proxy.lua announces, through mcp.log, once a
// second while its workers route by a pool: the tables of that pool's
// tables line, in its order, then their count in brackets, which a line
// cut short lacks:
//
//	memcached-proxy-pool: loaded a=1767225599 b=1767225600 (2 tables)
//	memcached-proxy-pool: loaded =1767225600 (1 tables)
//	memcached-proxy-pool: loaded (0 tables)
//
// The last is a pool without a tables line proxy.lua takes: a pool is
// loaded, its versions are not known. Before any pool (the placeholder),
// nothing is announced.
func LoadedMessage(tables []ZoneVersion) string {
	var b strings.Builder
	b.WriteString(LoadedPrefix)
	for _, t := range tables {
		fmt.Fprintf(&b, " %s=%d", t.Zone, t.Version)
	}
	fmt.Fprintf(&b, " (%d tables)", len(tables))
	return b.String()
}

// ParseLoaded reads an announcement (LoadedMessage): the tables, in its
// order (empty, not nil, for "(0 tables)"), or why it is not one. It takes
// what LoadedMessage writes and nothing else: single spaces, each zone
// once (a zone's name as the tables line has it, at most
// v1alpha1.MaxZoneNameLen, or none), versions in int64 without a leading
// zero, the count matching, at most MaxLoadedBytes.
func ParseLoaded(msg string) ([]ZoneVersion, error) {
	if len(msg) > MaxLoadedBytes {
		return nil, fmt.Errorf("announcement of %d bytes, longer than %d", len(msg), MaxLoadedBytes)
	}
	rest, ok := strings.CutPrefix(msg, LoadedPrefix+" ")
	if !ok {
		return nil, fmt.Errorf("not an announcement of a loaded pool")
	}
	fields := strings.Split(rest, " ")
	if len(fields) < 2 || fields[len(fields)-1] != "tables)" {
		return nil, fmt.Errorf("announcement does not end in (N tables): cut short?")
	}
	count, ok := strings.CutPrefix(fields[len(fields)-2], "(")
	n, okN := parseVersion(count)
	if !ok || !okN || n != int64(len(fields)-2) {
		return nil, fmt.Errorf("announcement counts %q tables, has %d", count, len(fields)-2)
	}
	tables := make([]ZoneVersion, 0, n)
	seen := map[string]bool{}
	for _, f := range fields[:len(fields)-2] {
		z, v, ok := strings.Cut(f, "=")
		if !ok || z != "" && !ZoneNameOK(z) || seen[z] {
			return nil, fmt.Errorf("announcement's table %q: not zone=version, or a zone twice", f)
		}
		version, ok := parseVersion(v)
		if !ok {
			return nil, fmt.Errorf("announcement's table %q: not a version", f)
		}
		seen[z] = true
		tables = append(tables, ZoneVersion{Zone: z, Version: version})
	}
	if seen[""] && len(tables) > 1 {
		return nil, fmt.Errorf("announcement has the zone \"\" beside others")
	}
	return tables, nil
}
