package v1alpha1

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// This file is the one place where the spec's numbers and rules are stated.
// controller-gen's markers are comments and cannot name a Go constant, so
// instead of markers restating these values, make generate (cmd/apigen)
// writes them into the CRD as the default, minimum, maximum and
// x-kubernetes-validations that markers would have produced; the hook
// (Default, Validate) and memcached's argv (Setting.Args) read them here.

// Images the operator runs when the spec names none. They are not CRD
// defaults, so that upgrading the operator upgrades every Memcached that does
// not pin an image; status.image shows what runs.
const (
	DefaultImage         = "memcached:1.6.45-alpine"
	DefaultExporterImage = "quay.io/prometheus/memcached-exporter:v0.16.0"
)

// Setting is a field of the spec with a default and bounds and, for
// memcached's own settings, the flag memcached takes it as.
//
// +kubebuilder:object:generate=false
type Setting interface {
	// Field is the field below spec, as the CRD names it:
	// "memcached.threads".
	Field() string
	// Flags are memcached's option for the setting ("-t") and its long
	// form ("threads"); both empty for a field memcached does not see.
	// extraArgs may set neither.
	Flags() (short, long string)
	// Args returns the setting's value in spec (which has its defaults) as
	// memcached's argv items.
	Args(spec *MemcachedSpec) []string
	// Schema returns what the CRD's schema says of the field: the keywords
	// default, minimum and maximum, and any rules.
	Schema() (keywords map[string]any, rules []Rule)

	setDefault(spec *MemcachedSpec)
	check(spec *MemcachedSpec) *field.Error
}

// Settings are every setting, memcached's in the order memcached's argv
// takes them. Adding a memcached flag to the API is a field in
// MemcachedConfig and an entry here; make generate does the rest.
var Settings = []Setting{
	IntSetting{Path: "size", Default: 1, Min: 0, Max: 1000,
		Value: func(s *MemcachedSpec) **int32 { return &s.Size }},
	IntSetting{Path: "memcached.maxMemoryMB", Flag: "-m", Long: "memory-limit", Default: 64, Min: 2, Max: 1 << 20,
		Value: func(s *MemcachedSpec) **int32 { return &s.Memcached.MaxMemoryMB }},
	// memcached sets both of its open-files limits to -c, and without
	// CAP_SYS_RESOURCE cannot raise the hard one past what the container
	// runtime gives (often 524288 or 1048576): Max stays well under it.
	IntSetting{Path: "memcached.maxConnections", Flag: "-c", Long: "conn-limit", Default: 1024, Min: int32(MinConnections(1)), Max: 65536,
		Value: func(s *MemcachedSpec) **int32 { return &s.Memcached.MaxConnections }},
	IntSetting{Path: "memcached.threads", Flag: "-t", Long: "threads", Default: 4, Min: 1, Max: 64,
		Value: func(s *MemcachedSpec) **int32 { return &s.Memcached.Threads }},
	// memcached needs -I to be a multiple of its slab chunk size (half its
	// 1 MiB slab page), or it exits at start.
	QuantitySetting{Path: "memcached.maxItemSize", Flag: "-I", Long: "max-item-size",
		Default: resource.MustParse("1Mi"), Min: 512 << 10, Max: 1 << 30, Step: 512 << 10,
		Value: func(s *MemcachedSpec) **resource.Quantity { return &s.Memcached.MaxItemSize }},
	IntSetting{Path: "memcached.verbosity", Flag: "-v", Long: "verbose", Repeat: true, Default: 0, Min: 0, Max: 2,
		Value: func(s *MemcachedSpec) **int32 { return &s.Memcached.Verbosity }},
}

// IntSetting is an integer setting.
//
// +kubebuilder:object:generate=false
type IntSetting struct {
	// Path is the field below spec.
	Path string
	// Default is what an unset field means; the API server writes it in.
	Default int32
	// Min and Max bound the value, both included.
	Min, Max int32
	// Flag and Long are memcached's options for the value.
	Flag, Long string
	// Repeat says the flag is repeated value times rather than given the
	// value: verbosity 2 is -vv.
	Repeat bool
	// Value returns where the value is in a spec whose memcached is set.
	Value func(*MemcachedSpec) **int32
}

func (s IntSetting) Field() string               { return s.Path }
func (s IntSetting) Flags() (short, long string) { return s.Flag, s.Long }

// Args returns the flag and the value as two items (memcached reads "-m=64"
// as 0 MB), or the repeated flag.
func (s IntSetting) Args(spec *MemcachedSpec) []string {
	v := **s.Value(spec)
	switch {
	case s.Flag == "", s.Repeat && v == 0:
		return nil
	case s.Repeat:
		return []string{"-" + strings.Repeat(s.Flag[1:], int(v))}
	}
	return []string{s.Flag, strconv.Itoa(int(v))}
}

func (s IntSetting) Schema() (map[string]any, []Rule) {
	return map[string]any{"default": s.Default, "minimum": s.Min, "maximum": s.Max}, nil
}

func (s IntSetting) setDefault(spec *MemcachedSpec) {
	if p := s.Value(spec); *p == nil {
		v := s.Default
		*p = &v
	}
}

func (s IntSetting) check(spec *MemcachedSpec) *field.Error {
	if v := **s.Value(spec); v < s.Min || v > s.Max {
		return field.Invalid(pathOf("spec."+s.Path), v, fmt.Sprintf("must be from %d to %d", s.Min, s.Max))
	}
	return nil
}

// QuantitySetting is a setting of bytes, written as a quantity.
//
// +kubebuilder:object:generate=false
type QuantitySetting struct {
	Path       string
	Flag, Long string
	Default    resource.Quantity
	// Min and Max bound the bytes, both included, and Step divides them.
	Min, Max, Step int64
	Value          func(*MemcachedSpec) **resource.Quantity
}

func (s QuantitySetting) Field() string               { return s.Path }
func (s QuantitySetting) Flags() (short, long string) { return s.Flag, s.Long }

// Args returns the flag and the bytes the way memcached's -I reads them,
// with a k or m suffix where it divides evenly.
func (s QuantitySetting) Args(spec *MemcachedSpec) []string {
	b := (*s.Value(spec)).Value()
	v := strconv.FormatInt(b, 10)
	switch {
	case b%(1<<20) == 0:
		v = strconv.FormatInt(b>>20, 10) + "m"
	case b%(1<<10) == 0:
		v = strconv.FormatInt(b>>10, 10) + "k"
	}
	return []string{s.Flag, v}
}

// Schema states the bounds as a rule: minimum and maximum do not apply to
// the string a quantity is.
func (s QuantitySetting) Schema() (map[string]any, []Rule) {
	name := s.Path[strings.LastIndex(s.Path, ".")+1:]
	return map[string]any{"default": s.Default.String()}, []Rule{{
		On: "spec." + s.Path,
		CEL: fmt.Sprintf("%s && %[2]s >= %[3]d && %[2]s <= %[4]d && %[2]s %% %[5]d == 0",
			isBytes("self"), quantityBytes("self"), s.Min, s.Max, s.Step),
		Message: fmt.Sprintf("%s must be a multiple of %s from %s to %s (write 1Mi, not 1m: m means milli)",
			name, binary(s.Step), binary(s.Min), binary(s.Max)),
		Holds: func(m *Memcached) bool {
			b, ok := wholeBytes(**s.Value(&m.Spec))
			return ok && b >= s.Min && b <= s.Max && b%s.Step == 0
		},
	}}
}

func (s QuantitySetting) setDefault(spec *MemcachedSpec) {
	if p := s.Value(spec); *p == nil {
		q := s.Default.DeepCopy()
		*p = &q
	}
}

// check is done by the rule Schema returns.
func (s QuantitySetting) check(*MemcachedSpec) *field.Error { return nil }

// managedShort and managedLong are the short option letters and long
// option names extraArgs may not set: the settings' and those forbidden
// for other reasons (extraargs.go).
var managedShort, managedLong = managedFlags()

// managedFlags returns the short option letters and long option names
// extraArgs may not set, in a fixed order.
func managedFlags() (short string, long []string) {
	for _, st := range Settings {
		if f, l := st.Flags(); f != "" {
			short += f[1:]
			long = append(long, l)
		}
	}
	for _, letter := range []byte(shortOptions) {
		if _, ok := forbidden[letter]; ok {
			short += string(letter)
		}
	}
	return short, append(long, forbiddenLongs()...)
}

// Connections. memcached sets both of its open-files limits to -c and
// takes file descriptors before it serves anyone: three for standard I/O,
// three for its main event loop, five per worker thread (two eventfds, an
// epoll, a pipe pair) and one per listening socket. It serves
// c - 7 - 5·threads - listeners clients, and exits at start below
// 6 + 5·threads + listeners (memcached.c:main, thread.c:
// memcached_thread_init; measured on 1.6.45: the smallest -c that answers
// one client is 14, 29, 49, 89 and 329 at 1, 4, 8, 16 and 64 threads with
// one listener).
const (
	descriptorsPerThread = 5
	// descriptorsFixed is the 7 of the rule plus the 3 listeners the Pod
	// may have: every address on IPv4 and IPv6, and a loopback one.
	descriptorsFixed = 7 + 3
	// minClients are the client connections a Memcached must leave room
	// for, the exporter's and the liveness check's among them.
	minClients = 10
)

// MinConnections is the smallest -c that leaves room for minClients with
// threads worker threads.
func MinConnections(threads int64) int64 {
	return descriptorsPerThread*threads + descriptorsFixed + minClients
}

// Memory sizing. memcached uses more than -m: the hash table, connections
// and threads come on top, and a limit that is too tight is the most
// common way memcached dies on Kubernetes (OOM-killed). The constants are
// measured on memcached 1.6.45 (README.md, "Memory"): every one is an upper
// bound of what was measured.
const (
	// hashTablePercent: the hash table holds 8 bytes per bucket and
	// doubles when items exceed 1.5 buckets, keeping the old table until
	// the move ends; with the smallest items (96-byte chunks) its peak is
	// at most m/6, 16.7 % (measured 16.4 to 16.6 % at the worst m), and
	// slab pages add 0.4 %.
	hashTablePercent = 17
	// connectionKiB is what a connection can hold while a request is read:
	// its 16 KiB read buffer, the connection and the kernel's socket
	// (measured 20.5 to 22.7 KiB, in a memory cgroup); a value being set
	// is allocated inside -m.
	connectionKiB = 24
	// tlsConnectionKiB is the same over TLS, OpenSSL's buffers and state
	// on top (measured 56.7 to 57.5 KiB, peak RSS and a memory cgroup's
	// peak, 3968 TLS connections, half of them in the middle of a set).
	tlsConnectionKiB = 64
	// threadPercentMiB is the memory of a worker thread, in hundredths of
	// a MiB (measured 0.09 to 0.13 MiB).
	threadPercentMiB = 15
	// baseMiB is the process before any of these (measured 4.9 to 5.4 MiB
	// and the initial 0.5 MiB hash table).
	baseMiB = 8
)

// MemoryMiB is what memcached can use with maxMemoryMB of items, the hash
// table at its peak with the smallest items, every allowed connection in
// the middle of a request, and its threads: both the default memory request
// and limit, and the least memory limit a spec may set.
//
//	m + ceil(17·m/100) + ceil(24·c/1024) + ceil(15·t/100) + 8   (64·c over TLS)
func MemoryMiB(maxMemoryMB, maxConnections, threads int64, tls bool) int64 {
	m, c, t := maxMemoryMB, maxConnections, threads
	perConnection := int64(connectionKiB)
	if tls {
		perConnection = tlsConnectionKiB
	}
	return m + ceilDiv(hashTablePercent*m, 100) + ceilDiv(perConnection*c, 1024) + ceilDiv(threadPercentMiB*t, 100) + baseMiB
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// memoryCEL is MemoryMiB in CEL, with self at spec.
func memoryCEL() string {
	ceil := func(x string, d int) string { return fmt.Sprintf("(%s + %d) / %d", x, d-1, d) }
	m, c, t := "self.memcached.maxMemoryMB", "self.memcached.maxConnections", "self.memcached.threads"
	wbuf, _, _ := extstoreCEL()
	threads := fmt.Sprintf("(has(self.extstore.threads) ? self.extstore.threads : %d)", DefaultExtstoreThreads)
	return fmt.Sprintf("%s + %s + %s + %s + %d + (has(self.extstore) ? %d * %s + %d * %s : 0)", m,
		ceil(fmt.Sprintf("%d * %s", hashTablePercent, m), 100),
		ceil(fmt.Sprintf("(has(self.tls) ? %d : %d) * %s", tlsConnectionKiB, connectionKiB, c), 1024),
		ceil(fmt.Sprintf("%d * %s", threadPercentMiB, t), 100),
		baseMiB, extstoreWriteBuffers, wbuf, extstoreThreadMiB, threads)
}

// MemoryOf is MemoryMiB for a spec that has its defaults, and extstore's
// write buffers and IO threads when it has them (ExtstoreMemoryMiB).
func MemoryOf(s *MemcachedSpec) int64 {
	c := s.Memcached
	return MemoryMiB(int64(*c.MaxMemoryMB), int64(*c.MaxConnections), int64(*c.Threads), s.TLS != nil) + ExtstoreMemoryMiB(s)
}

// Labels the operator and Metacontroller own on every Pod: the first two
// select the Pods and never change over an object's life (a Deployment's
// selector is immutable); Metacontroller selects children by the last.
const (
	LabelName          = "app.kubernetes.io/name"
	LabelInstance      = "app.kubernetes.io/instance"
	LabelManagedBy     = "app.kubernetes.io/managed-by"
	LabelControllerUID = "controller-uid"
	// LabelZone is the zone of a memcached or proxy Pod (spec.zones): its
	// zone's Deployment selects by it, and the hook reads a Pod's zone
	// from it.
	LabelZone = "cache.example.com/zone"
)

// reservedPodLabels are the labels podLabels may not set.
var reservedPodLabels = []string{LabelName, LabelInstance, LabelManagedBy, LabelControllerUID, LabelZone}

// DefaultTopologyKey is spec.zones.topologyKey left out: the well-known
// zone label every cloud provider's Nodes carry.
const DefaultTopologyKey = "topology.kubernetes.io/zone"

// MaxZoneNameLen bounds a zone's name: it is part of the names of its
// Deployments and of the labels of the proxy's down backends
// (_down_ZONE_SLOT, at most 64 characters). Real zone names are shorter
// (northamerica-northeast1-a has 25).
const MaxZoneNameLen = 40

// MaxZones bounds spec.zones.names: every proxy keeps connections to every
// zone's Pods, and writes go to every zone.
const MaxZones = 8

// reservedZoneNames would make a zone's memcached Deployment, NAME-ZONE,
// take the name of another child: NAME-agent, NAME-proxy, NAME-discovery,
// NAME-slots, or a zone's proxy Deployment, NAME-proxy-ZONE (so no zone
// starts with "proxy-" either).
var reservedZoneNames = []string{"agent", "proxy", "discovery", "slots"}

// ZonesOf returns the spec's zones, nil without spec.zones.
func ZonesOf(s *MemcachedSpec) []string {
	if s.Zones == nil {
		return nil
	}
	return s.Zones.Names
}

// zoneNameOK tells whether a zone's name can name its Deployments: a DNS
// label of at most MaxZoneNameLen characters, not one reservedZoneNames
// takes.
func zoneNameOK(z string) bool {
	return len(z) <= MaxZoneNameLen && dns1123LabelRE.MatchString(z) &&
		!slices.Contains(reservedZoneNames, z) && !strings.HasPrefix(z, "proxy-")
}

const dns1123Label = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`

var dns1123LabelRE = regexp.MustCompile(dns1123Label)

// zonesRules are spec.zones': the names, and the features that cannot go
// with zones.
var zonesRules = []Rule{{
	On: "spec.zones.names",
	CEL: fmt.Sprintf("self.all(z, z.matches('%s') && !(z in %s) && !z.startsWith('proxy-'))",
		dns1123Label, celList(reservedZoneNames)),
	Message: fmt.Sprintf("zones.names must be lower case letters, digits and '-', starting and ending with a letter or digit, at most %d characters, and none of %s nor starting with proxy-: a zone names its Deployments NAME-ZONE and NAME-proxy-ZONE",
		MaxZoneNameLen, strings.Join(reservedZoneNames, ", ")),
	Holds: func(m *Memcached) bool {
		for _, z := range ZonesOf(&m.Spec) {
			if !zoneNameOK(z) {
				return false
			}
		}
		return true
	},
}, {
	On:      "spec",
	Field:   ".zones",
	CEL:     "!has(self.zones) || (!has(self.tls) && !has(self.auth))",
	Message: "zones cannot be used with tls or auth: zones run memcached's proxy, which in the official images speaks neither TLS nor SASL to the memcached Pods",
	Holds:   func(m *Memcached) bool { return m.Spec.Zones == nil || (m.Spec.TLS == nil && m.Spec.Auth == nil) },
}, {
	On:    "spec",
	Field: ".zones",
	CEL: "!has(self.zones) || ((!has(self.discovery) || !has(self.discovery.enabled) || !self.discovery.enabled) && " +
		"(!has(self.stableNames) || !has(self.stableNames.enabled) || !self.stableNames.enabled))",
	Message: "zones cannot be used with discovery or stableNames: with zones the proxy is the only way in, because only it writes to every zone; a client given the Pods' addresses would write to one zone and leave the others stale",
	Holds: func(m *Memcached) bool {
		s := &m.Spec
		return s.Zones == nil || ((s.Discovery == nil || !s.Discovery.Enabled) && (s.StableNames == nil || !s.StableNames.Enabled))
	},
}, {
	On:      "",
	Field:   ".metadata.name",
	CEL:     fmt.Sprintf("!has(self.spec.zones) || self.metadata.name.size() <= %d", dns1035LabelMaxLen-len(ProxySuffix)),
	Message: fmt.Sprintf("metadata.name must be at most %d characters with spec.zones: the Service NAME-proxy must be a DNS label of at most %d", dns1035LabelMaxLen-len(ProxySuffix), dns1035LabelMaxLen),
	Holds: func(m *Memcached) bool {
		return m.Spec.Zones == nil || len(m.Name) <= dns1035LabelMaxLen-len(ProxySuffix)
	},
}}

// Rule is a check the schema's own keywords cannot state, in its two forms,
// built from the same values: CEL, which make generate writes into the CRD
// for the API server, and Go, which the hook runs.
//
// +kubebuilder:object:generate=false
type Rule struct {
	// On is the schema node the rule sits on, a path from the object's
	// root: "spec.memcached"; "" for the root.
	On string
	// Field is what the rule blames, relative to On
	// (".resources.limits['memory']"); "" for On itself. The CRD names it as
	// the rule's fieldPath, except at the root, where metadata has no
	// schema.
	Field string
	// CEL is the rule as the API server runs it, with self at On.
	CEL     string
	Message string
	// Holds tells whether m passes. m's spec has its defaults, as the API
	// server's has when it runs the rule. It is as strict as CEL, or
	// stricter where CEL cannot follow (extraArgs).
	Holds func(m *Memcached) bool
	// Explain, if set, is what the hook reports when the rule fails, more
	// precise than Message (say, naming the list item at fault).
	Explain func(m *Memcached) field.ErrorList
}

// Path is where the rule blames, from the object's root.
func (r Rule) Path() string { return strings.TrimPrefix(r.On+r.Field, ".") }

// The bounds of spec.rollout.handoffSeconds: long enough for a
// replacement Pod to start, short enough that a drain is not held for
// hours (two hours copy 360 GiB at the slowest rate measured).
const (
	MinHandoffSeconds = 10
	MaxHandoffSeconds = 7200
)

// ProxySuffix ends the name of the proxy tier's Service: NAME-proxy.
const ProxySuffix = "-proxy"

// SlotsSuffix ends the name of the Service that gives the slots their DNS
// names (spec.stableNames): NAME-slots. The slots' names, NAME-0, NAME-1...,
// are shorter than it while slots stay below 10,000.
const SlotsSuffix = "-slots"

// MaxClientMoveSeconds bounds spec.rollout.clientMoveSeconds: ten minutes
// covers any client's lookup period, and a leaving Pod serves that long.
const MaxClientMoveSeconds = 600

// proxyIntRule bounds an integer of spec.proxy.
func proxyIntRule(name string, lo, hi int32, value func(*ProxySpec) *int32) Rule {
	return intRule("proxy", func(s *MemcachedSpec) *ProxySpec { return s.Proxy }, name, lo, hi, value)
}

// intRule bounds an integer field name of a spec section (spec.SECTION),
// which get returns (nil when left out).
func intRule[S any](section string, get func(*MemcachedSpec) *S, name string, lo, hi int32, value func(*S) *int32) Rule {
	return Rule{
		On:      "spec." + section + "." + name,
		CEL:     fmt.Sprintf("self >= %d && self <= %d", lo, hi),
		Message: fmt.Sprintf("%s.%s must be from %d to %d", section, name, lo, hi),
		Holds: func(m *Memcached) bool {
			sec := get(&m.Spec)
			if sec == nil {
				return true
			}
			v := value(sec)
			return v == nil || (*v >= lo && *v <= hi)
		},
	}
}

// proxyDurationRule bounds a duration of spec.proxy.
func proxyDurationRule(name string, lo, hi time.Duration, value func(*ProxySpec) *metav1.Duration) Rule {
	return Rule{
		On:      "spec.proxy." + name,
		CEL:     fmt.Sprintf("duration(self) >= duration('%s') && duration(self) <= duration('%s')", lo, hi),
		Message: fmt.Sprintf("proxy.%s must be from %s to %s", name, lo, hi),
		Holds: func(m *Memcached) bool {
			if m.Spec.Proxy == nil {
				return true
			}
			v := value(m.Spec.Proxy)
			return v == nil || (v.Duration >= lo && v.Duration <= hi)
		},
	}
}

// DiscoverySuffix ends the name of the Service of the configuration
// endpoint: NAME-discovery.
const DiscoverySuffix = "-discovery"

// dns1035Label is what a Memcached's name must match: it names the Service
// and is a label value.
const (
	dns1035Label       = `^[a-z]([-a-z0-9]*[a-z0-9])?$`
	dns1035LabelMaxLen = 63
)

var dns1035LabelRE = regexp.MustCompile(dns1035Label)

// dns1123Subdomain is what a Secret's name must match.
const (
	dns1123Subdomain       = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	dns1123SubdomainMaxLen = 253
)

var dns1123SubdomainRE = regexp.MustCompile(dns1123Subdomain)

// secretNameRule is the rule of a field naming a Secret.
func secretNameRule(on string, name func(m *Memcached) (string, bool)) Rule {
	return Rule{
		On:      on,
		CEL:     fmt.Sprintf("self.matches('%s')", strings.ReplaceAll(dns1123Subdomain, `\`, `\\`)),
		Message: fmt.Sprintf("%s must be a Secret's name: lower case letters, digits, '-' and '.', at most %d characters", on[strings.LastIndex(on, ".")+1:], dns1123SubdomainMaxLen),
		Holds: func(m *Memcached) bool {
			n, ok := name(m)
			return !ok || (len(n) <= dns1123SubdomainMaxLen && dns1123SubdomainRE.MatchString(n))
		},
	}
}

// peersRule refuses a peer list that both opens a port to all and lists
// who may reach it: one of the two would be ignored.
func peersRule(on string, peers func(np *NetworkPolicySpec) *Peers) Rule {
	name := on[strings.LastIndex(on, ".")+1:]
	return Rule{
		On:      on,
		Field:   ".allowAll",
		CEL:     "!has(self.allowAll) || !self.allowAll || !has(self.from) || size(self.from) == 0",
		Message: fmt.Sprintf("networkPolicy.%s: allowAll lets everyone in, so from would be ignored: set one or the other", name),
		Holds: func(m *Memcached) bool {
			if m.Spec.NetworkPolicy == nil {
				return true
			}
			p := peers(m.Spec.NetworkPolicy)
			return p == nil || !p.AllowAll || len(p.From) == 0
		},
	}
}

// promDuration is a Prometheus duration, as a ServiceMonitor's interval.
const promDuration = `^([0-9]+(ms|s|m|h))+$`

var promDurationRE = regexp.MustCompile(promDuration)

// whiteSpace are the characters an image reference may not hold, in a CEL
// regular expression and in Go.
const (
	whiteSpaceCEL = `[ \t\r\n]`
	whiteSpace    = " \t\r\n"
)

// quantityBytes is a CEL expression for a quantity's bytes, and isBytes one
// that guards it: a quantity that is no whole number of bytes is left to
// the rules that refuse it.
func quantityBytes(q string) string { return fmt.Sprintf("quantity(string(%s)).asInteger()", q) }
func isBytes(q string) string {
	return fmt.Sprintf("isQuantity(string(%[1]s)) && quantity(string(%[1]s)).isInteger()", q)
}

// defaulted is a CEL expression that holds when the fields are set. Rules
// read a field's value without restating its default: the API server
// applies the defaults before it runs them, so the fields are always set by
// then. The guard is for the one time they are not, when the API server
// checks the CRD's own defaults ({} for spec.memcached) against the rules.
func defaulted(fields ...string) string {
	var has []string
	for _, f := range fields {
		parts := strings.Split(f, ".")
		for i := 2; i <= len(parts); i++ {
			if h := "has(" + strings.Join(parts[:i], ".") + ")"; !slices.Contains(has, h) {
				has = append(has, h)
			}
		}
	}
	return strings.Join(has, " && ")
}

// celList writes strings as a CEL list.
func celList(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = "'" + s + "'"
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// serviceNameRule keeps NAME+suffix, the Service a feature makes when it
// is on, a DNS label: feature is its field of spec, on its Go test.
func serviceNameRule(feature, suffix string, on func(s *MemcachedSpec) bool) Rule {
	most := dns1035LabelMaxLen - len(suffix)
	return Rule{
		On:      "",
		Field:   ".metadata.name",
		CEL:     fmt.Sprintf("!has(self.spec.%[1]s) || !has(self.spec.%[1]s.enabled) || !self.spec.%[1]s.enabled || self.metadata.name.size() <= %[2]d", feature, most),
		Message: fmt.Sprintf("metadata.name must be at most %d characters with spec.%s: the Service %s must be a DNS label of at most %d", most, feature, "NAME"+suffix, dns1035LabelMaxLen),
		Holds:   func(m *Memcached) bool { return !on(&m.Spec) || len(m.Name) <= most },
	}
}

func rolloutOf(s *MemcachedSpec) *RolloutSpec { return s.Rollout }

// Rules are the rules the schema's keywords cannot state, besides those of
// the settings (Setting.Schema): mostly rules across fields.
var Rules = func() []Rule {
	short, long := managedShort, managedLong
	limit, request := "self.resources.limits['memory']", "self.resources.requests['memory']"
	hasLimit := "has(self.resources) && has(self.resources.limits) && 'memory' in self.resources.limits"
	hasRequest := "has(self.resources) && has(self.resources.requests) && 'memory' in self.resources.requests"
	return []Rule{{
		On:      "",
		Field:   ".metadata.name",
		CEL:     fmt.Sprintf("self.metadata.name.size() <= %d && self.metadata.name.matches('%s')", dns1035LabelMaxLen, dns1035Label),
		Message: fmt.Sprintf("metadata.name must be a DNS label of at most %d characters that starts with a letter: it names the Service and is a label value", dns1035LabelMaxLen),
		Holds: func(m *Memcached) bool {
			return len(m.Name) <= dns1035LabelMaxLen && dns1035LabelRE.MatchString(m.Name)
		},
	}, {
		On:      "spec",
		Field:   ".rollout.keepWarm",
		CEL:     "!has(self.rollout) || !has(self.rollout.keepWarm) || !self.rollout.keepWarm || (!has(self.tls) && !has(self.auth))",
		Message: "rollout.keepWarm cannot be used with tls or auth: the agent that copies a leaving Pod's items has neither the client certificate nor the password memcached would ask it for",
		Holds: func(m *Memcached) bool {
			s := &m.Spec
			return s.Rollout == nil || !s.Rollout.KeepWarm || (s.TLS == nil && s.Auth == nil)
		},
	},
		intRule("rollout", rolloutOf, "handoffSeconds", MinHandoffSeconds, MaxHandoffSeconds, func(r *RolloutSpec) *int32 { return r.HandoffSeconds }),
		intRule("rollout", rolloutOf, "clientMoveSeconds", 0, MaxClientMoveSeconds, func(r *RolloutSpec) *int32 { return r.ClientMoveSeconds }),
		serviceNameRule("stableNames", SlotsSuffix, func(s *MemcachedSpec) bool { return s.StableNames != nil && s.StableNames.Enabled }),
		{
			On:      "spec",
			Field:   ".proxy.enabled",
			CEL:     "!has(self.proxy) || !has(self.proxy.enabled) || !self.proxy.enabled || (!has(self.tls) && !has(self.auth))",
			Message: "proxy cannot be used with tls or auth: memcached's proxy in the official images speaks neither TLS nor SASL to the memcached Pods",
			Holds: func(m *Memcached) bool {
				s := &m.Spec
				return s.Proxy == nil || !s.Proxy.Enabled || (s.TLS == nil && s.Auth == nil)
			},
		},
		serviceNameRule("proxy", ProxySuffix, func(s *MemcachedSpec) bool { return s.Proxy != nil && s.Proxy.Enabled }),
		serviceNameRule("discovery", DiscoverySuffix, func(s *MemcachedSpec) bool { return s.Discovery != nil && s.Discovery.Enabled }),
		{
			On:      "spec.image",
			CEL:     fmt.Sprintf("!self.matches('%s')", strings.NewReplacer("\t", `\t`, "\r", `\r`, "\n", `\n`).Replace(whiteSpaceCEL)),
			Message: "image must not contain white space",
			Holds:   func(m *Memcached) bool { return !strings.ContainsAny(m.Spec.Image, whiteSpace) },
		}, {
			On: "spec.podLabels",
			CEL: strings.Join(slices.Collect(func(yield func(string) bool) {
				for _, l := range reservedPodLabels {
					if !yield(fmt.Sprintf("!('%s' in self)", l)) {
						return
					}
				}
			}), " && "),
			Message: "podLabels must not set " + strings.Join(reservedPodLabels, ", ") + ": the operator and Metacontroller own them",
			Holds: func(m *Memcached) bool {
				return !slices.ContainsFunc(reservedPodLabels, func(l string) bool { _, ok := m.Spec.PodLabels[l]; return ok })
			},
		}, {
			On:    "spec",
			Field: ".resources.limits['memory']",
			CEL: fmt.Sprintf("!(%s) || !(%s) || !(%s) || %s >= (%s) * %d",
				hasLimit, defaulted("self.memcached.maxMemoryMB", "self.memcached.maxConnections", "self.memcached.threads"),
				isBytes(limit), quantityBytes(limit), memoryCEL(), 1<<20),
			Message: "resources.limits.memory must be at least what memcached can use with its settings: maxMemoryMB, its hash table, every connection busy (see Memory in sync/api/v1alpha1/README.md)",
			Holds: func(m *Memcached) bool {
				limit, ok := memoryBytes(m.Spec.Resources, true)
				return !ok || limit >= MemoryOf(&m.Spec)<<20
			},
			Explain: func(m *Memcached) field.ErrorList {
				limit, _ := memory(m.Spec.Resources, true)
				return field.ErrorList{field.Invalid(pathOf("spec.resources.limits['memory']"), limit.String(), fmt.Sprintf(
					"must be at least %dMi, what memcached can use with these settings: maxMemoryMB, its hash table, every connection busy (see Memory in sync/api/v1alpha1/README.md)", MemoryOf(&m.Spec)))}
			},
		}, {
			On:    "spec",
			Field: ".resources.requests['memory']",
			CEL: fmt.Sprintf("!(%s) || !(%s) || !isQuantity(string(%s)) || !isQuantity(string(%s)) || quantity(string(%s)).compareTo(quantity(string(%s))) <= 0",
				hasRequest, hasLimit, request, limit, request, limit),
			Message: "resources.requests.memory must not exceed resources.limits.memory",
			Holds: func(m *Memcached) bool {
				req, hasReq := memory(m.Spec.Resources, false)
				limit, hasLimit := memory(m.Spec.Resources, true)
				return !hasReq || !hasLimit || req.Cmp(limit) <= 0
			},
		}, {
			On:    "spec.memcached",
			Field: ".maxItemSize",
			CEL: fmt.Sprintf("!(%s) || !(%s) || %s * 2 <= self.maxMemoryMB * %d",
				defaulted("self.maxItemSize", "self.maxMemoryMB"), isBytes("self.maxItemSize"), quantityBytes("self.maxItemSize"), 1<<20),
			Message: "maxItemSize must be at most half of maxMemoryMB, or memcached refuses to start",
			Holds: func(m *Memcached) bool {
				c := m.Spec.Memcached
				b, ok := wholeBytes(*c.MaxItemSize)
				return !ok || b*2 <= int64(*c.MaxMemoryMB)<<20
			},
		}, {
			On:    "spec.memcached",
			Field: ".maxConnections",
			CEL: fmt.Sprintf("!(%s) || self.maxConnections >= %d * self.threads + %d",
				defaulted("self.maxConnections", "self.threads"), descriptorsPerThread, descriptorsFixed+minClients),
			Message: fmt.Sprintf("maxConnections must be at least %d × threads + %d: memcached takes %d file descriptors per worker thread and up to %d more before it serves anyone, and this leaves %d clients",
				descriptorsPerThread, descriptorsFixed+minClients, descriptorsPerThread, descriptorsFixed, minClients),
			Holds: func(m *Memcached) bool {
				c := m.Spec.Memcached
				return int64(*c.MaxConnections) >= MinConnections(int64(*c.Threads))
			},
		}, {
			// CEL cannot follow memcached's parsing; it refuses what one item
			// shows (a managed flag in a group of options, before any that
			// takes a value, whose value would follow; --) and a last item
			// that needs a value.
			// The hook's check is memcached's own reading (extraArgsErrors).
			On: "spec.memcached.extraArgs",
			CEL: fmt.Sprintf("self.all(a, a != '--' && !a.matches('^-[%s]*[%s]') && !(a.startsWith('--') && %s.exists(f, f.startsWith(a.substring(2).split('=')[0])))) && (size(self) == 0 || !(self[size(self) - 1] in %s))",
				flagOptions(), short, celList(long), celList(valueOptions())),
			Message: fmt.Sprintf("extraArgs must not set a flag the operator manages (%s, their long forms or any prefix of them), nor end with an option that needs a value; pass -o and its value as two items",
				flagList(short)),
			Holds:   func(m *Memcached) bool { return len(extraArgsErrors(&m.Spec)) == 0 },
			Explain: func(m *Memcached) field.ErrorList { return extraArgsErrors(&m.Spec) },
		},
		secretNameRule("spec.tls.secretName", func(m *Memcached) (string, bool) {
			if m.Spec.TLS == nil {
				return "", false
			}
			return m.Spec.TLS.SecretName, true
		}),
		secretNameRule("spec.auth.secretName", func(m *Memcached) (string, bool) {
			if m.Spec.Auth == nil {
				return "", false
			}
			return m.Spec.Auth.SecretName, true
		}),
		peersRule("spec.networkPolicy.memcached", func(np *NetworkPolicySpec) *Peers { return np.Memcached }),
		peersRule("spec.networkPolicy.metrics", func(np *NetworkPolicySpec) *Peers { return np.Metrics }),
		{
			On:      "spec",
			Field:   ".metrics.enabled",
			CEL:     "!has(self.auth) || !has(self.metrics) || !has(self.metrics.enabled) || !self.metrics.enabled",
			Message: "metrics.enabled cannot go with auth: memcached_exporter cannot authenticate to memcached, so it would only report memcached_up 0",
			Holds:   func(m *Memcached) bool { return m.Spec.Auth == nil || m.Spec.Metrics == nil || !m.Spec.Metrics.Enabled },
		}, {
			On:      "spec.metrics",
			Field:   ".serviceMonitor.enabled",
			CEL:     "!has(self.serviceMonitor) || !has(self.serviceMonitor.enabled) || !self.serviceMonitor.enabled || (has(self.enabled) && self.enabled)",
			Message: "metrics.serviceMonitor.enabled needs metrics.enabled: the ServiceMonitor scrapes the exporter",
			Holds: func(m *Memcached) bool {
				mt := m.Spec.Metrics
				return mt == nil || mt.ServiceMonitor == nil || !mt.ServiceMonitor.Enabled || mt.Enabled
			},
		}, {
			On:      "spec.metrics.image",
			CEL:     fmt.Sprintf("!self.matches('%s')", strings.NewReplacer("\t", `\t`, "\r", `\r`, "\n", `\n`).Replace(whiteSpaceCEL)),
			Message: "metrics.image must not contain white space",
			Holds: func(m *Memcached) bool {
				return m.Spec.Metrics == nil || !strings.ContainsAny(m.Spec.Metrics.Image, whiteSpace)
			},
		}, {
			On:      "spec.metrics.serviceMonitor.interval",
			CEL:     fmt.Sprintf("self.matches('%s')", promDuration),
			Message: "serviceMonitor.interval must be a Prometheus duration like 30s or 1m30s",
			Holds: func(m *Memcached) bool {
				mt := m.Spec.Metrics
				return mt == nil || mt.ServiceMonitor == nil || mt.ServiceMonitor.Interval == "" || promDurationRE.MatchString(mt.ServiceMonitor.Interval)
			},
		}, {
			On:      "spec.metrics.serviceMonitor.labels",
			CEL:     fmt.Sprintf("!('%s' in self)", LabelControllerUID),
			Message: fmt.Sprintf("serviceMonitor.labels must not set %s: Metacontroller owns it", LabelControllerUID),
			Holds: func(m *Memcached) bool {
				mt := m.Spec.Metrics
				if mt == nil || mt.ServiceMonitor == nil {
					return true
				}
				_, ok := mt.ServiceMonitor.Labels[LabelControllerUID]
				return !ok
			},
		}}
}()

// memory returns the memory limit (or request) of r, if set.
func memory(r *corev1.ResourceRequirements, limit bool) (resource.Quantity, bool) {
	if r == nil {
		return resource.Quantity{}, false
	}
	list := r.Requests
	if limit {
		list = r.Limits
	}
	q, ok := list[corev1.ResourceMemory]
	return q, ok
}

// memoryBytes is memory as a whole number of bytes; a quantity that is not
// one is reported unset, as the CEL rules' guards skip it.
func memoryBytes(r *corev1.ResourceRequirements, limit bool) (int64, bool) {
	q, ok := memory(r, limit)
	if !ok {
		return 0, false
	}
	return wholeBytes(q)
}

// wholeBytes is a quantity as a whole number of bytes, as CEL's
// isInteger() and asInteger() read it; false for a fraction ("1500m") or a
// number too large.
func wholeBytes(q resource.Quantity) (int64, bool) {
	v, ok := q.AsInt64()
	if ok {
		return v, true
	}
	v = q.Value()
	return v, q.Cmp(*resource.NewQuantity(v, resource.BinarySI)) == 0 && v < 1<<62
}

// binary writes bytes as a binary quantity: 512Ki, 1Gi.
func binary(b int64) string { return resource.NewQuantity(b, resource.BinarySI).String() }

// flagList writes option letters as "-a -b -c".
func flagList(letters string) string {
	var out []string
	for _, l := range letters {
		out = append(out, "-"+string(l))
	}
	return strings.Join(out, " ")
}

// AllRules are the settings' rules, then Rules.
func AllRules() []Rule { return allRules }

var allRules = func() []Rule {
	var all []Rule
	for _, st := range Settings {
		_, rules := st.Schema()
		all = append(all, rules...)
	}
	all = append(all, Rules...)
	all = append(all, zonesRules...)
	all = append(all, proxyRules...)
	return append(all, extstoreRules...)
}()

// proxyRules bound spec.proxy's settings; its defaults, applied by the hook
// (the API server cannot default a field of a struct that is absent), are
// in package memcached.
var proxyRules = []Rule{
	proxyIntRule("replicas", 1, 100, func(p *ProxySpec) *int32 { return p.Replicas }),
	proxyIntRule("threads", 1, 64, func(p *ProxySpec) *int32 { return p.Threads }),
	proxyIntRule("failureLimit", 0, 100, func(p *ProxySpec) *int32 { return p.FailureLimit }),
	proxyDurationRule("connectTimeout", 10*time.Millisecond, time.Minute, func(p *ProxySpec) *metav1.Duration { return p.ConnectTimeout }),
	proxyDurationRule("readTimeout", 10*time.Millisecond, time.Minute, func(p *ProxySpec) *metav1.Duration { return p.ReadTimeout }),
	proxyDurationRule("retryAfter", time.Second, 5*time.Minute, func(p *ProxySpec) *metav1.Duration { return p.RetryAfter }),
}
