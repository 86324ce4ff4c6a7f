package v1alpha1

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// memcached 1.6.45's command line, as its main parses it (memcached.c:main,
// getopt_long with argument permutation), so that extraArgs can be checked
// the way memcached would read them: an argument memcached would refuse
// (and so exit at start), or silently ignore, is an error here instead.

// shortOptions is memcached's getopt string: a letter followed by ':' takes
// a value.
const shortOptions = "a:AZp:s:U:m:Mc:khiVrvdl:u:P:f:n:t:D:LR:Cb:B:I:SFXWY:e:o:N:"

// longOptions maps memcached's long options to their letters. getopt_long
// also takes any unambiguous prefix of one.
var longOptions = map[string]byte{
	"unix-mask": 'a', "enable-shutdown": 'A', "enable-ssl": 'Z', "port": 'p', "unix-socket": 's',
	"udp-port": 'U', "memory-limit": 'm', "disable-evictions": 'M', "conn-limit": 'c', "lock-memory": 'k',
	"help": 'h', "license": 'i', "version": 'V', "enable-coredumps": 'r', "verbose": 'v', "daemon": 'd',
	"listen": 'l', "user": 'u', "pidfile": 'P', "slab-growth-factor": 'f', "slab-min-size": 'n',
	"threads": 't', "enable-largepages": 'L', "max-reqs-per-event": 'R', "disable-cas": 'C',
	"listen-backlog": 'b', "protocol": 'B', "max-item-size": 'I', "enable-sasl": 'S',
	"disable-flush-all": 'F', "disable-dumping": 'X', "disable-watch": 'W', "auth-file": 'Y',
	"memory-file": 'e', "extended": 'o', "napi-ids": 'N',
}

// takesValue tells whether memcached's option letter takes a value.
func takesValue(letter byte) bool {
	i := strings.IndexByte(shortOptions, letter)
	return i >= 0 && i+1 < len(shortOptions) && shortOptions[i+1] == ':'
}

// forbidden says why extraArgs may not give an option memcached knows, or ""
// if it may. The operator's own settings come from Settings.
var forbidden = map[byte]string{
	'p': "the operator sets the port",
	'l': "the operator sets the listeners",
	's': "a unix socket would take memcached off its port",
	'U': "UDP is off, and the Service does not carry it",
	'u': "memcached runs as the Pod's user",
	'd': "memcached would daemonize and the container would end",
	'h': "memcached would print its help and exit",
	'V': "memcached would print its version and exit",
	'i': "memcached would print its license and exit",
	'e': "a memory file needs a writable volume, which the Pod does not have",
	'Z': "TLS is spec.tls",
	'S': "authentication is spec.auth",
	'Y': "authentication is spec.auth",
}

// Suboptions of -o (memcached.c:main, storage.c:storage_read_config):
// flags, whose value if any is ignored; one whose value may be left out;
// and those that need one. Three of these crash memcached when their value
// is missing (slab_sizes, proxy_arg, sock_cookie_id); here every missing
// value is an error.
var (
	suboptionFlags = []string{
		"maxconns_fast", "no_maxconns_fast", "no_hashexpand", "slab_reassign", "no_slab_reassign",
		"no_slab_automove", "lru_crawler", "no_lru_crawler", "lru_maintainer", "no_lru_maintainer",
		"track_sizes", "inline_ascii_resp", "no_inline_ascii_resp", "modern", "no_modern",
		"no_chunked_items", "drop_privileges", "no_drop_privileges", "resp_obj_mem_limit",
		"ssl_session_cache", "ssl_kernel_tls", "proxy_uring", "proxy_memprofile", "ext_drop_unread",
	}
	suboptionsMaybeValued = []string{"slab_automove"}
	suboptionsValued      = []string{
		"hashpower", "slab_automove_ratio", "slab_automove_window", "tail_repair_time", "hash_algorithm",
		"lru_crawler_sleep", "lru_crawler_tocrawl", "hot_lru_pct", "warm_lru_pct", "hot_max_factor",
		"warm_max_factor", "temporary_ttl", "idle_timeout", "watcher_logbuf_size", "worker_logbuf_size",
		"slab_chunk_max", "read_buf_mem_limit", "ssl_chain_cert", "ssl_key", "ssl_verify_mode",
		"ssl_keyformat", "ssl_ciphers", "ssl_ca_cert", "ssl_wbuf_size", "ssl_min_version", "proxy_config",
		"slab_sizes", "proxy_arg", "sock_cookie_id",
		"ext_page_size", "ext_wbuf_size", "ext_threads", "ext_io_depth", "ext_path", "ext_item_size",
		"ext_item_age", "ext_low_ttl", "ext_recache_rate", "ext_compact_under", "ext_drop_under",
		"ext_max_sleep", "ext_max_frag", "slab_automove_freeratio",
	}
)

// option is one option of extraArgs as memcached reads it.
type option struct {
	index  int    // of the item that names it
	vindex int    // of the item that holds its value
	name   string // as given: "-o", "--thr"
	letter byte
	value  string
	valued bool // a value was given
}

// extraArgsErrors checks extraArgs the way memcached reads them, and what
// they would break of what the spec turns on. Each error names the item.
func extraArgsErrors(s *MemcachedSpec) field.ErrorList {
	path := field.NewPath("spec", "memcached", "extraArgs")
	args := s.Memcached.ExtraArgs
	var errs field.ErrorList
	bad := func(i int, msg string, a ...any) {
		errs = append(errs, field.Invalid(path.Index(i), args[i], fmt.Sprintf(msg, a...)))
	}
	var opts []option
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			bad(i, "memcached ignores every argument after --")
			return errs
		case strings.HasPrefix(a, "--"):
			name, value, valued := strings.Cut(a[2:], "=")
			letter, err := resolveLong(name)
			if err != "" {
				bad(i, "%s", err)
				continue
			}
			o := option{index: i, vindex: i, name: "--" + name, letter: letter, value: value, valued: valued}
			switch {
			case takesValue(letter) && !valued:
				if i+1 == len(args) {
					bad(i, "needs a value, or memcached exits at start")
					continue
				}
				i++
				o.value, o.valued, o.vindex = args[i], true, i
			case !takesValue(letter) && valued && letter != 'v':
				bad(i, "takes no value, or memcached exits at start")
				continue
			}
			opts = append(opts, o)
		case strings.HasPrefix(a, "-") && len(a) > 1:
			for j := 1; j < len(a); j++ {
				letter := a[j]
				if strings.IndexByte(shortOptions, letter) < 0 || letter == ':' {
					bad(i, "memcached has no option -%c and exits at start", letter)
					break
				}
				o := option{index: i, vindex: i, name: "-" + string(letter), letter: letter}
				if takesValue(letter) {
					o.value, o.valued = a[j+1:], j+1 < len(a)
					if !o.valued {
						if i+1 == len(args) {
							bad(i, "-%c needs a value, or memcached exits at start", letter)
							break
						}
						i++
						o.value, o.valued, o.vindex = args[i], true, i
					}
					opts = append(opts, o)
					break
				}
				opts = append(opts, o)
			}
		default:
			bad(i, "memcached ignores an argument that is no option: write the option it belongs to (-o %s?)", a)
		}
	}
	for _, o := range opts {
		errs = append(errs, optionErrors(s, o, args, path)...)
	}
	return errs
}

// resolveLong finds a long option by its name or an unambiguous prefix of
// it, as getopt_long does, or says why it cannot.
func resolveLong(name string) (byte, string) {
	if l, ok := longOptions[name]; ok {
		return l, ""
	}
	var matches []string
	for long := range longOptions {
		if strings.HasPrefix(long, name) {
			matches = append(matches, long)
		}
	}
	switch {
	case len(matches) == 1:
		return longOptions[matches[0]], ""
	case len(matches) == 0 || name == "":
		return 0, fmt.Sprintf("memcached has no option --%s and exits at start", name)
	}
	slices.Sort(matches)
	return 0, fmt.Sprintf("--%s could be any of --%s: memcached exits at start", name, strings.Join(matches, ", --"))
}

// optionErrors checks one option's meaning: not one the operator manages
// (SetsManagedFlag says the same of its item), a value memcached takes,
// nothing that breaks what the spec turns on.
func optionErrors(s *MemcachedSpec, o option, args []string, path *field.Path) field.ErrorList {
	at := path.Index(o.index)
	item := args[o.index]
	for _, st := range Settings {
		if short, long := st.Flags(); short != "" && short[1] == o.letter {
			return field.ErrorList{field.Invalid(at, item, fmt.Sprintf("sets %s (--%s), which is spec.%s", short, long, st.Field()))}
		}
	}
	if why, ok := forbidden[o.letter]; ok {
		return field.ErrorList{field.Invalid(at, item, why)}
	}
	keepWarm := s.Rollout != nil && s.Rollout.KeepWarm
	if o.letter == 'X' && keepWarm {
		return field.ErrorList{field.Invalid(at, item, "turns off lru_crawler mgdump, which spec.rollout.keepWarm's hand-off lists a leaving Pod's keys with")}
	}
	at, item = path.Index(o.vindex), args[o.vindex]
	switch o.letter {
	case 'o':
		if keepWarm && slices.Contains(strings.Split(o.value, ","), "no_lru_crawler") {
			return field.ErrorList{field.Invalid(at, item, "no_lru_crawler turns off lru_crawler mgdump, which spec.rollout.keepWarm's hand-off lists a leaving Pod's keys with")}
		}
		return suboptionErrors(at, item, o.value, s.Extstore != nil)
	case 'B':
		sasl := s.Auth != nil && s.Auth.Mode == AuthModeSASL
		ascii := s.Auth != nil && s.Auth.Mode == AuthModeASCII
		switch o.value {
		case "auto", "ascii":
			if sasl {
				return field.ErrorList{field.Invalid(at, item, "SASL (spec.auth) speaks the binary protocol only: memcached exits with -B "+o.value)}
			}
		case "binary":
			switch {
			case keepWarm:
				return field.ErrorList{field.Invalid(at, item, "-B binary shuts out the text protocol, whose meta commands spec.rollout.keepWarm's hand-off copies items with")}
			case s.Metrics != nil && s.Metrics.Enabled:
				return field.ErrorList{field.Invalid(at, item, "-B binary shuts out the text protocol, which the exporter (spec.metrics) speaks")}
			case ascii:
				return field.ErrorList{field.Invalid(at, item, "ASCII authentication (spec.auth) is the text protocol's: memcached exits with -B binary")}
			}
		default:
			return field.ErrorList{field.NotSupported(at, o.value, []string{"auto", "binary", "ascii"})}
		}
	}
	return nil
}

// extstoreSuboptions are the suboptions spec.extstore sets: extraArgs may
// not give them beside it (ext_path not even without it: the Pod has no
// disk for the file but spec.extstore's).
var extstoreSuboptions = []string{"ext_path", "ext_page_size", "ext_wbuf_size", "ext_threads", "ext_item_size",
	"ext_item_age", "ext_max_sleep", "ext_recache_rate", "slab_automove_freeratio"}

// suboptionErrors checks the value of -o: comma-separated suboptions, each
// one memcached knows, with a value where it needs one; ssl_ ones belong
// to spec.tls, and those of extstoreSuboptions to spec.extstore.
func suboptionErrors(at *field.Path, item, value string, extstore bool) field.ErrorList {
	var errs field.ErrorList
	// memcached strips the leading spaces of the whole value only: a
	// space after a comma is part of the next name.
	for _, sub := range strings.Split(strings.TrimLeft(value, " "), ",") {
		name, _, valued := strings.Cut(sub, "=")
		switch {
		case strings.HasPrefix(name, "ssl_"):
			errs = append(errs, field.Invalid(at, item, fmt.Sprintf("-o %s: TLS is spec.tls", name)))
		case name == "ext_path" || (extstore && slices.Contains(extstoreSuboptions, name)):
			errs = append(errs, field.Invalid(at, item, fmt.Sprintf("-o %s: extstore is spec.extstore, which gives it a disk and sets this", name)))
		case slices.Contains(suboptionFlags, name), slices.Contains(suboptionsMaybeValued, name):
		case slices.Contains(suboptionsValued, name):
			if !valued {
				errs = append(errs, field.Invalid(at, item, fmt.Sprintf("-o %s needs a value (%s=...), or memcached exits or crashes at start", name, name)))
			}
		default:
			errs = append(errs, field.Invalid(at, item, fmt.Sprintf("memcached has no -o %q and exits at start", name)))
		}
	}
	return errs
}

// forbiddenLongs are the long names of the forbidden options, sorted.
func forbiddenLongs() []string {
	var out []string
	for name, l := range longOptions {
		if _, ok := forbidden[l]; ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// valueOptions are the items that name an option needing a value that is
// not in the same item: "-o", "--extended".
func valueOptions() []string {
	var out []string
	for i := 0; i < len(shortOptions); i++ {
		if takesValue(shortOptions[i]) {
			out = append(out, "-"+string(shortOptions[i]))
		}
	}
	var long []string
	for name, l := range longOptions {
		if takesValue(l) {
			long = append(long, "--"+name)
		}
	}
	slices.Sort(long)
	return append(out, long...)
}

// flagOptions are the letters of memcached's options that take no value.
func flagOptions() string {
	var out []byte
	for i := 0; i < len(shortOptions); i++ {
		if l := shortOptions[i]; l != ':' && !takesValue(l) {
			out = append(out, l)
		}
	}
	return string(out)
}
