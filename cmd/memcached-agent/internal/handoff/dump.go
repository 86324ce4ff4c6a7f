package handoff

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/example/memcached-operator/sync/contract"
)

// dumpKey is a key as lru_crawler mgdump lists it: as memcached's text
// protocol takes it, base64 when the key is binary (b).
type dumpKey struct {
	key    string
	binary bool
}

// errBusy is the crawler answering BUSY (another crawl runs, memcached's
// own included) or "ERROR locked try again later" (the hash table was
// being expanded): worth trying again shortly.
var errBusy = errors.New("the LRU crawler is busy")

// refusedError is a memcached that will not dump its keys: trying again
// would not help, and the message says why.
type refusedError struct{ addr, answer string }

func (e *refusedError) Error() string { return e.addr + " refused to list its keys: " + e.answer }

// startDump asks for every key of the source on c, and reads the first
// answer: since memcached 1.6.43 the dump begins with OK.
func startDump(c *conn) error {
	c.w.WriteString("lru_crawler mgdump hash\r\n")
	if err := c.flush(); err != nil {
		return err
	}
	l, err := c.line()
	if err != nil {
		return err
	}
	switch answer := string(l); {
	case answer == "OK":
		return nil
	case strings.HasPrefix(answer, "BUSY"):
		return errBusy
	case strings.HasPrefix(answer, "ERROR") || strings.HasPrefix(answer, "CLIENT_ERROR"):
		// "ERROR key dump not allowed" (-X), "CLIENT_ERROR lru crawler
		// disabled" (-o no_lru_crawler), or a memcached before 1.6.19.
		return &refusedError{addr: c.addr, answer: answer}
	default:
		return &protocolError{addr: c.addr, msg: fmt.Sprintf("lru_crawler mgdump answered %q", answer)}
	}
}

// readDump reads the dump's "mg <key>[ b]" lines up to its EN and sends
// them in batches of at most batch keys, leaving out the operator's own
// keys (counted in reserved). memcached writes the dump as fast as it is
// read, holding its crawler (and hash table expansion) meanwhile, so the
// batches queue up to the channel's capacity and no further.
func readDump(ctx context.Context, c *conn, batch int, out chan<- []dumpKey, reserved func()) error {
	keys := make([]dumpKey, 0, batch)
	send := func() error {
		if len(keys) == 0 {
			return nil
		}
		select {
		case out <- keys:
			keys = make([]dumpKey, 0, batch)
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	for {
		l, err := c.line()
		if err != nil {
			return err
		}
		switch {
		case bytes.Equal(l, []byte("EN")):
			return send()
		case bytes.HasPrefix(l, []byte("mg ")):
			k, err := parseDumpLine(l)
			if err != nil {
				return &protocolError{addr: c.addr, msg: err.Error()}
			}
			if k.reserved() {
				reserved()
				continue
			}
			keys = append(keys, k)
			if len(keys) == batch {
				if err := send(); err != nil {
					return err
				}
			}
		case bytes.HasPrefix(l, []byte("ERROR locked")):
			return errBusy
		default:
			return &protocolError{addr: c.addr, msg: fmt.Sprintf("the key dump holds %q", l)}
		}
	}
}

// parseDumpLine reads one "mg <key>[ b]" line of the dump.
func parseDumpLine(l []byte) (dumpKey, error) {
	rest, ok := bytes.CutPrefix(l, []byte("mg "))
	if !ok {
		return dumpKey{}, fmt.Errorf("a key dump line %q", l)
	}
	f := strings.Split(string(rest), " ")
	switch {
	case len(f) == 1 && f[0] != "":
		return dumpKey{key: f[0]}, nil
	case len(f) == 2 && f[0] != "" && f[1] == "b":
		return dumpKey{key: f[0], binary: true}, nil
	}
	return dumpKey{}, fmt.Errorf("a key dump line %q", l)
}

// reserved tells whether the key is the operator's own (the lock, the
// markers): never copied.
func (k dumpKey) reserved() bool {
	if !k.binary {
		return strings.HasPrefix(k.key, contract.ReservedKeyPrefix)
	}
	raw, err := base64.StdEncoding.DecodeString(k.key)
	return err == nil && strings.HasPrefix(string(raw), contract.ReservedKeyPrefix)
}
