package protocol

import (
	"strconv"

	"github.com/example/memcached-operator/sync/slots"
)

// Answers are a server list rendered once, when it is published, in the
// forms the endpoint serves it: every connection then writes the same
// bytes, and none formats anything.
//
// The payload is Auto Discovery's two lines: the version, then the nodes
// as host|ip|port separated by single spaces, each line ended by "\n"
// (ElastiCache's "Adding Auto Discovery to your Memcached client
// library", Output Format). The byte count in the header is the payload's
// length, both "\n" included; the "\r\n" after the payload is the text
// protocol's end of data and is not counted.
type Answers struct {
	version int64
	// config is the whole answer to config get cluster.
	config []byte
	// value and valueCAS are the cluster key's VALUE block in a get or a
	// gets answer, without the END that closes the answer.
	value    []byte
	valueCAS []byte
}

// NewAnswers renders the answers for version and nodes.
func NewAnswers(version int64, nodes []slots.Node) *Answers {
	payload := strconv.AppendInt(nil, version, 10)
	payload = append(payload, '\n')
	for i, n := range nodes {
		if i > 0 {
			payload = append(payload, ' ')
		}
		payload = append(payload, n.Host...)
		payload = append(payload, '|')
		payload = append(payload, n.IP...)
		payload = append(payload, '|')
		payload = strconv.AppendInt(payload, int64(n.Port), 10)
	}
	payload = append(payload, '\n')
	size := strconv.Itoa(len(payload))

	block := func(header string) []byte {
		b := make([]byte, 0, len(header)+len(payload)+len(endAnswer))
		b = append(b, header...)
		b = append(b, payload...)
		return append(b, "\r\n"...)
	}
	a := &Answers{version: version}
	a.config = append(block("CONFIG cluster 0 "+size+"\r\n"), endAnswer...)
	a.value = block("VALUE " + ClusterKey + " 0 " + size + "\r\n")
	// gets adds a cas unique: the list's version, which changes exactly
	// when the value does, as a cas unique must.
	a.valueCAS = block("VALUE " + ClusterKey + " 0 " + size + " " + strconv.FormatInt(version, 10) + "\r\n")
	return a
}

// Version is the list's version.
func (a *Answers) Version() int64 { return a.version }

// Config is the answer to config get cluster.
func (a *Answers) Config() []byte { return a.config }

// Get is the answer to get AmazonElastiCache:cluster (the cluster key
// alone), or with cas to gets.
func (a *Answers) Get(cas bool) []byte {
	v := a.value
	if cas {
		v = a.valueCAS
	}
	return append(append([]byte(nil), v...), endAnswer...)
}

// The answers that are always the same.
const (
	endAnswer       = "END\r\n"
	errorAnswer     = "ERROR\r\n"
	badFormatAnswer = "CLIENT_ERROR bad command line format\r\n"
	// versionAnswer is memcached 1.6.45's, byte for byte: Auto Discovery
	// clients compare it with 1.4.14 to choose config get cluster over
	// the older get, and parse it as numbers, so it carries no suffix.
	// 1.6.45 is the memcached the operator runs by default and the one
	// whose parser this package follows.
	versionAnswer = "VERSION 1.6.45\r\n"
	// noListAnswer is the answer about the cluster before the first good
	// list: clients take a SERVER_ERROR as a failed poll and try again
	// (they keep the servers they had, if any).
	noListAnswer = "SERVER_ERROR no server list yet\r\n"
	// tooManyAnswer is memcached's, written before the connection is
	// closed when --max-connections are open.
	tooManyAnswer = "ERROR Too many open connections\r\n"
)

// Answer appends to out the answer to cmd given the list now served (nil:
// none yet), and tells whether the connection is to be closed after it.
// A Store command's value must already have been read and dropped.
func Answer(out []byte, cmd Command, list *Answers) ([]byte, bool) {
	switch cmd.Kind {
	case ConfigGetCluster:
		if list == nil {
			return append(out, noListAnswer...), false
		}
		return append(out, list.config...), false
	case Get, Gets:
		return answerGet(out, cmd, list), false
	case Version:
		return append(out, versionAnswer...), false
	case Quit, HTTP:
		return out, true
	case BadFormat:
		return append(out, badFormatAnswer...), false
	case Store:
		if cmd.NoReply {
			return out, false
		}
		if cmd.KeyTooLong {
			return append(out, badFormatAnswer...), false
		}
		return append(out, errorAnswer...), false
	default: // Unknown, Unserved
		if cmd.NoReply {
			return out, false
		}
		return append(out, errorAnswer...), false
	}
}

// answerGet answers a get or gets: a VALUE block for each time the
// cluster key is named, a miss for any other key, then END. A key longer
// than MaxKeyLength makes the whole answer CLIENT_ERROR, as in memcached,
// which drops what it had answered for the keys before it. (memcached
// 1.6.45 then writes "\r\n" twice, an empty line clients would take for
// the next answer; the agent writes it once.) Before the first list, a get
// that names the cluster key answers SERVER_ERROR no server list yet.
func answerGet(out []byte, cmd Command, list *Answers) []byte {
	start := len(out)
	for _, k := range cmd.Keys {
		if len(k) > MaxKeyLength {
			return append(out[:start], badFormatAnswer...)
		}
		if string(k) != ClusterKey {
			continue
		}
		if list == nil {
			// Keys are taken in order, as memcached takes them: a long
			// key before this one was a CLIENT_ERROR, one after it is
			// not looked at.
			return append(out[:start], noListAnswer...)
		}
		if cmd.Kind == Gets {
			out = append(out, list.valueCAS...)
		} else {
			out = append(out, list.value...)
		}
	}
	return append(out, endAnswer...)
}
