// Package follow watches the one Memcached object the agent serves and
// hands every version of it to a Sink: through the API server (a list and
// watch restricted to the object's name, which survives expired watches,
// 410 Gone and API server restarts), or from a file that holds the object
// as kubectl prints it, re-read when it changes. Both decode the object
// with metacontroller.DecodeMemcached, the hook's own decoder, take its
// slot table as the hook does (contract.Ordered), and check here, once,
// that it is the Memcached followed: a Sink is offered nothing else.
package follow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/cmd/internal/reload"
	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/sync/metacontroller"
)

// Sink takes what a follower sees.
type Sink interface {
	// Offer is the Memcached followed as it is now: the one named, in
	// the namespace given (its namespace is set, if the follower was
	// given one).
	Offer(source string, m *v1alpha1.Memcached)
	// Refuse is an object that could not be read or decoded, or that is
	// another one than the Memcached followed: Reason(err) says which.
	Refuse(source string, err error)
}

// Why a follower refuses an object, as the sinks' metrics label it.
const (
	// WrongObject: the object is another Memcached than the one followed.
	WrongObject = "wrong_object"
	// Unreadable: the object could not be read or decoded.
	Unreadable = "unreadable"
)

// Refusal is an object a follower did not offer, and why.
type Refusal struct {
	// Reason is WrongObject or Unreadable.
	Reason string
	Err    error
}

func (r *Refusal) Error() string { return r.Err.Error() }
func (r *Refusal) Unwrap() error { return r.Err }

// Reason is why a follower refused an object: a Refusal's reason, and
// Unreadable for any other error.
func Reason(err error) string {
	if r, ok := errors.AsType[*Refusal](err); ok {
		return r.Reason
	}
	return Unreadable
}

// check tells whether m is the Memcached name in namespace, the one the
// agent follows: a namespace that is empty, given or the object's, is
// anyone's (a file given with --from-file carries its own). An object
// without a namespace takes the one given.
func check(m *v1alpha1.Memcached, name, namespace string) error {
	switch {
	case m.Name != name:
		return &Refusal{Reason: WrongObject, Err: fmt.Errorf("the object is Memcached %q, the agent follows %q", m.Name, name)}
	case namespace != "" && m.Namespace != "" && m.Namespace != namespace:
		return &Refusal{Reason: WrongObject, Err: fmt.Errorf("the object is in namespace %q, the agent follows %q", m.Namespace, namespace)}
	case m.Namespace == "":
		m.Namespace = namespace
	}
	return nil
}

// Errors counts a follower's failures to reach its source (a watch or
// list that failed, a file that cannot be stat'ed), for metrics.
type Errors func(source string)

// Decode reads a Memcached object as `kubectl get memcached NAME -o json`
// or `-o yaml` prints it: JSON as it is, anything else as YAML converted to
// JSON first. Its slot table, and each zone's, is taken as the hook takes
// it: a table whose entries are out of order is none (contract.Ordered). A spec that does
// not decode is no error: the agent reads the status.
func Decode(b []byte) (*v1alpha1.Memcached, error) {
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) == 0 {
		return nil, errors.New("empty")
	}
	if trimmed[0] != '{' {
		j, err := yaml.YAMLToJSON(trimmed)
		if err != nil {
			return nil, fmt.Errorf("YAML: %w", err)
		}
		trimmed = j
	}
	p, err := metacontroller.DecodeMemcached(trimmed)
	if err != nil {
		return nil, err
	}
	m := &p.Memcached
	m.Status.SlotTable = contract.Ordered(m.Status.SlotTable)
	for i := range m.Status.Zones {
		m.Status.Zones[i].SlotTable = contract.Ordered(m.Status.Zones[i].SlotTable)
	}
	return m, nil
}

// File follows the object in path, Memcached name in namespace (empty:
// the file's), until ctx ends, looking every interval
// for a change: another file (a renamed one, or a symlink swapped as a
// kubelet volume does), another size or modification time. The state is
// taken before the file is read, so a change made while it is read is
// read again at the next look. A file that is missing or does not decode
// is reported once per change, and the last good object stays served.
func File(ctx context.Context, path string, interval time.Duration, name, namespace string, sink Sink, errs Errors, logger *slog.Logger) {
	const source = "file"
	var last []os.FileInfo
	statFailed := false
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		fi, err := os.Stat(path)
		switch {
		case err != nil:
			if !statFailed {
				statFailed = true
				last = nil
				errs(source)
				sink.Refuse(source, err)
			}
		case last != nil && reload.SameFiles(last, []os.FileInfo{fi}):
		default:
			statFailed = false
			last = []os.FileInfo{fi}
			b, err := os.ReadFile(path)
			if err != nil {
				errs(source)
				sink.Refuse(source, err)
				break
			}
			m, err := Decode(b)
			if err != nil {
				sink.Refuse(source, fmt.Errorf("%s: %w", path, err))
				break
			}
			if err := check(m, name, namespace); err != nil {
				sink.Refuse(source, err)
				break
			}
			logger.Debug("read the Memcached", "path", path, "resourceVersion", m.ResourceVersion)
			sink.Offer(source, m)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
