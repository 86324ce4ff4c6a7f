// Package protocol is the configuration endpoint's side of memcached's text
// protocol: it reads command lines the way memcached 1.6.45 does, answers
// the commands of ElastiCache Auto Discovery (config get cluster, get
// AmazonElastiCache:cluster, version, quit) and memcached's errors for
// everything else, and serves connections with bounds on their number,
// their lines and their idle time.
//
// The parser is a port of memcached's own (proto_parser.c process_request,
// proto_text.c process_command_ascii and try_read_command_ascii, and mcmc's
// tokenizer in vendor/mcmc/mcmc.c), not a reading of what one client
// sends, so that a line any client writes is taken as memcached would take
// it: lines end at "\n" with an optional "\r" before it, tokens are
// separated by spaces only (a tab is part of a token), the command is what
// precedes the first space, and at most 23 tokens are looked at. The
// places where the agent answers differently from memcached are named
// where they happen and in the README.
package protocol

import (
	"bytes"
	"math"
)

// Limits of a command line, memcached's.
const (
	// MaxKeyLength is memcached's KEY_MAX_LENGTH: a longer key is a
	// CLIENT_ERROR.
	MaxKeyLength = 250
	// MaxLine is the most bytes a command line may hold before its "\n":
	// memcached closes a connection once it holds more than 2048 bytes
	// without a "\n" in them, unless they begin a get or gets.
	MaxLine = 2048
	// MaxGetLine bounds a get or gets line, which memcached leaves
	// unbounded: 16 KiB, memcached's read buffer (READ_BUFFER_SIZE), room
	// for 64 keys of the longest kind or hundreds of ordinary ones. A
	// longer get line closes the connection.
	MaxGetLine = 16 << 10
	// maxTokens is mcmc's MCMC_PARSER_MAX_TOKENS-1: the tokenizer stops
	// after 23 tokens and ignores the rest of the line.
	maxTokens = 23
	// leadingSpaces is how many spaces memcached skips before looking for
	// "get " in a line longer than MaxLine.
	leadingSpaces = 100
)

// ClusterKey is the key of the older Auto Discovery command, for servers
// older than 1.4.14: get AmazonElastiCache:cluster.
const ClusterKey = "AmazonElastiCache:cluster"

// Kind is what a command line asks for, as the agent answers it.
type Kind int

// The kinds of command lines. Their String is the metric label.
const (
	// BadFormat is a line memcached cannot parse: a known command with
	// too few arguments or a bad number, or a line shorter than four
	// bytes. Answer: CLIENT_ERROR bad command line format.
	BadFormat Kind = iota
	// Unknown is a command memcached does not have. Answer: ERROR.
	Unknown
	// HTTP is an unknown command whose last token starts with "HTTP/":
	// memcached closes the connection without an answer.
	HTTP
	// Unserved is a command memcached has and the agent does not serve
	// (delete, incr, stats, meta commands, ...). Answer: ERROR.
	Unserved
	// Store is a storage command (set, add, replace, append, prepend, cas,
	// ms) whose value follows the line: the agent reads and drops the
	// value, as memcached does with a value it refuses, so that the next
	// line is a command again. Answer: ERROR.
	Store
	// Get and Gets read keys; the cluster key has the server list.
	Get
	Gets
	// ConfigGetCluster is "config get cluster", Auto Discovery's command
	// since ElastiCache's memcached 1.4.14.
	ConfigGetCluster
	// Version answers "VERSION 1.6.45".
	Version
	// Quit closes the connection once the answers before it are sent.
	Quit
	// TooLong is not a command but a line longer than the endpoint reads
	// (see MaxLine): the connection is closed without an answer.
	TooLong
)

var kindNames = [...]string{
	BadFormat:        "bad_format",
	Unknown:          "unknown",
	HTTP:             "http",
	Unserved:         "unserved",
	Store:            "store",
	Get:              "get",
	Gets:             "gets",
	ConfigGetCluster: "config_get_cluster",
	Version:          "version",
	Quit:             "quit",
	TooLong:          "too_long",
}

// String names the kind, as metrics label it.
func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "invalid"
}

// Kinds are every kind, for metrics that show each from the start.
func Kinds() []Kind {
	out := make([]Kind, len(kindNames))
	for i := range out {
		out[i] = Kind(i)
	}
	return out
}

// Command is a parsed command line.
type Command struct {
	Kind Kind
	// Keys are a get's or gets' keys, in order, repeats kept (memcached
	// answers a key named twice twice). They point into the line.
	Keys [][]byte
	// NoReply is memcached's noreply: the line's last token is "noreply"
	// (for the commands whose parse looks for it), and an answer written
	// with memcached's out_string is not sent. get and gets answers are
	// sent all the same, as memcached sends them.
	NoReply bool
	// KeyTooLong is a storage command whose key is longer than
	// MaxKeyLength: CLIENT_ERROR bad command line format, after its value
	// is dropped.
	KeyTooLong bool
	// ValueBytes is how many bytes follow a storage command's line: its
	// value and "\r\n".
	ValueBytes int64
}

// Parse parses one command line, which ends with its "\n" (memcached never
// parses a line without it). It never fails: a line memcached would refuse
// is a Command of kind BadFormat, Unknown or HTTP.
func Parse(line []byte) Command {
	// process_request: fewer than four bytes with the "\n" is bad format
	// ("mn\n" included), before anything is tokenized.
	if len(line) < 4 || line[len(line)-1] != '\n' {
		return Command{Kind: BadFormat}
	}
	end := contentEnd(line)
	cl := bytes.IndexByte(line[:end], ' ')
	if cl < 0 {
		cl = end
	}
	cm := line[:cl]

	switch string(cm) {
	case "mg", "md", "ma", "me":
		// _process_request_meta: flags from the third token on must
		// start with a letter or a digit.
		if t := tokenize(line, 2); len(t.starts) < 2 {
			return Command{Kind: BadFormat}
		}
		return Command{Kind: Unserved}
	case "ms":
		t := tokenize(line, 3)
		if len(t.starts) < 3 {
			return Command{Kind: BadFormat}
		}
		vlen, ok := tokenInt32(t.token(2))
		if !ok || vlen < 0 || vlen > math.MaxInt32-2 {
			return Command{Kind: BadFormat}
		}
		return Command{Kind: Store, ValueBytes: int64(vlen) + 2, KeyTooLong: len(t.token(1)) > MaxKeyLength}
	case "mn", "quit":
		if string(cm) == "quit" {
			return Command{Kind: Quit}
		}
		return Command{Kind: Unserved}
	case "get", "gets":
		t := tokenize(line, noMeta)
		if len(t.starts) < 2 {
			return Command{Kind: BadFormat}
		}
		kind := Get
		if string(cm) == "gets" {
			kind = Gets
		}
		return Command{Kind: kind, Keys: splitKeys(line[cl:end]), NoReply: t.noReply()}
	case "gat", "gats":
		if t := tokenize(line, noMeta); len(t.starts) < 3 {
			return Command{Kind: BadFormat}
		}
		return Command{Kind: Unserved}
	case "set", "add", "cas", "append", "prepend", "replace":
		// _process_request_storage, then process_update_cmd_start's key
		// check.
		t := tokenize(line, noMeta)
		if len(t.starts) < 5 {
			return Command{Kind: BadFormat}
		}
		vlen, ok := tokenInt32(t.token(4))
		if !ok || vlen < 0 || vlen > math.MaxInt32-2 {
			return Command{Kind: BadFormat}
		}
		return Command{Kind: Store, ValueBytes: int64(vlen) + 2, KeyTooLong: len(t.token(1)) > MaxKeyLength, NoReply: t.noReply()}
	case "incr", "decr", "touch":
		t := tokenize(line, noMeta)
		if len(t.starts) < 3 {
			return Command{Kind: BadFormat}
		}
		return Command{Kind: Unserved, NoReply: t.noReply()}
	case "delete":
		t := tokenize(line, noMeta)
		if len(t.starts) < 2 {
			return Command{Kind: BadFormat}
		}
		return Command{Kind: Unserved, NoReply: t.noReply()}
	case "stats", "watch":
		return Command{Kind: Unserved}
	case "version":
		return Command{Kind: Version}
	}

	// Not a command of process_request's: _process_request_unknown.
	t := tokenize(line, noMeta)
	if len(t.starts) == 3 && string(cm) == "config" && string(t.token(1)) == "get" && string(t.token(2)) == "cluster" {
		return Command{Kind: ConfigGetCluster}
	}
	if adminCommands[string(cm)] {
		// memcached runs these before it looks for "HTTP/".
		return Command{Kind: Unserved}
	}
	if n := len(t.starts); n > 1 && bytes.HasPrefix(t.token(n-1), []byte("HTTP/")) {
		return Command{Kind: HTTP}
	}
	return Command{Kind: Unknown, NoReply: t.noReply()}
}

// adminCommands are memcached's commands outside process_request (its
// text_cmd_entries, as the official image builds them: with extstore and
// TLS, without the debug ones).
var adminCommands = map[string]bool{
	"shutdown": true, "slabs": true, "cache_memlimit": true, "flush_all": true, "lru_crawler": true,
	"verbosity": true, "lru": true, "extstore": true, "refresh_certs": true,
}

// contentEnd is where the line's content ends: before "\r\n", or before a
// bare "\n".
func contentEnd(line []byte) int {
	n := len(line)
	if n >= 2 && line[n-2] == '\r' {
		return n - 2
	}
	return n - 1
}

// splitKeys returns the space-separated keys of a get line after the
// command, as process_get_command walks them: every run of bytes other
// than a space, "\r" within the line included.
func splitKeys(rest []byte) [][]byte {
	var keys [][]byte
	for len(rest) > 0 {
		if rest[0] == ' ' {
			rest = rest[1:]
			continue
		}
		i := bytes.IndexByte(rest, ' ')
		if i < 0 {
			i = len(rest)
		}
		keys = append(keys, rest[:i])
		rest = rest[i:]
	}
	return keys
}

// noMeta is a meta offset no token reaches: the tokenizer checks no flags.
const noMeta = 255

// tokens are the tokens of a line as mcmc finds them.
type tokens struct {
	line []byte
	// starts are the tokens' offsets; endcap is where the last one ends
	// (before any spaces).
	starts []int
	endcap int
}

// token returns token i without the spaces after it (_mcmc_token).
func (t tokens) token(i int) []byte {
	s := t.starts[i]
	e := t.endcap
	if i+1 < len(t.starts) {
		e = t.starts[i+1]
	}
	for e > s && t.line[e-1] == ' ' {
		e--
	}
	return t.line[s:e]
}

// noReply is _process_request_noreply: the last token is "noreply".
func (t tokens) noReply() bool {
	return len(t.starts) > 0 && string(t.token(len(t.starts)-1)) == "noreply"
}

// tokenize is mcmc's _mcmc_tokenize_meta over a line that ends with "\n":
// tokens are runs of bytes other than ' ' before the line's end ("\r\n" or
// "\n"); after maxTokens tokens the rest is ignored. From token mstart on,
// a token must start with a byte in 'A'..'z' or a digit (meta flags);
// otherwise mcmc gives up and, as its callers ignore that, the line has no
// tokens at all. Lines here never reach mcmc's 65534-byte cap.
func tokenize(line []byte, mstart int) tokens {
	end := contentEnd(line)
	t := tokens{line: line}
	flagOK := func(s int) bool {
		c := line[s]
		return (c > 64 && c < 123) || (c >= '0' && c <= '9')
	}
	s, n := 0, 0
	for n != end {
		if line[n] == ' ' {
			if s != n {
				if len(t.starts) >= mstart && !flagOK(s) {
					return tokens{line: line}
				}
				t.starts = append(t.starts, s)
				if len(t.starts) == maxTokens {
					// The token ends at the space found here.
					s = n
					break
				}
				s = n
			}
			s++
		}
		n++
	}
	if s != n && len(t.starts) < maxTokens {
		if len(t.starts) >= mstart && !flagOK(s) {
			return tokens{line: line}
		}
		t.starts = append(t.starts, s)
		for s != end && line[s] != ' ' {
			s++
		}
	}
	t.endcap = s
	return t
}

// tokenInt32 is mcmc_tokto32: an optional '-' and decimal digits that fit
// an int32, at most 11 bytes (MCMC_TOKTO32_MAX).
func tokenInt32(b []byte) (int32, bool) {
	if len(b) > 11 {
		return 0, false
	}
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	var sum int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		sum = sum*10 + int64(c-'0')
		if (!neg && sum > math.MaxInt32) || (neg && -sum < math.MinInt32) {
			return 0, false
		}
	}
	if neg {
		sum = -sum
	}
	return int32(sum), true
}
