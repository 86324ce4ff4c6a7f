// Package follow watches the one Memcached object the agent serves and
// hands every version of it to a Sink: through the API server (a list and
// watch restricted to the object's name, which survives expired watches,
// 410 Gone and API server restarts), or from a file that holds the object
// as kubectl prints it, re-read when it changes. Both decode the object
// with metacontroller.DecodeMemcached, the hook's own decoder.
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
	"github.com/example/memcached-operator/sync/metacontroller"
)

// Sink takes what a follower sees.
type Sink interface {
	// Offer is a Memcached object as it is now.
	Offer(source string, m *metacontroller.Parent)
	// Refuse is an object that could not be read or decoded.
	Refuse(source string, err error)
}

// Errors counts a follower's failures to reach its source (a watch or
// list that failed, a file that cannot be stat'ed), for metrics.
type Errors func(source string)

// Decode reads a Memcached object as `kubectl get memcached NAME -o json`
// or `-o yaml` prints it: JSON as it is, anything else as YAML converted to
// JSON first.
func Decode(b []byte) (*metacontroller.Parent, error) {
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
	return metacontroller.DecodeMemcached(trimmed)
}

// File follows the object in path until ctx ends, looking every interval
// for a change: another file (a renamed one, or a symlink swapped as a
// kubelet volume does), another size or modification time. The state is
// taken before the file is read, so a change made while it is read is
// read again at the next look. A file that is missing or does not decode
// is reported once per change, and the last good object stays served.
func File(ctx context.Context, path string, interval time.Duration, sink Sink, errs Errors, logger *slog.Logger) {
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
