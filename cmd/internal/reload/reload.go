// Package reload keeps a value parsed from files in step with the files, so
// that a rotated Secret (a certificate and its key, a CA bundle, a token)
// takes effect without a restart. The hook and the agent share it.
package reload

import (
	"fmt"
	"log/slog"
	"os"
	"sync"
)

// Reloading is a value parsed from files (a certificate and its key, a CA
// bundle, a token) that follows the files as they change, so that a
// rotated Secret takes effect without a restart. Each get costs one stat
// per file; the files are read and parsed again only when one of them is
// another file (a Secret volume swaps a symlink), or has another size or
// modification time. No file-watching dependency is needed, and nothing
// runs between calls.
//
// A change that does not parse (say, a certificate updated before its key)
// keeps the last good value and is logged once; the next change is tried
// again.
type Reloading[T any] struct {
	what   string
	paths  []string
	parse  func(contents [][]byte) (T, error)
	logger *slog.Logger

	mu     sync.Mutex
	stamps []os.FileInfo
	value  T
}

// New reads and parses the files once. Failing that is an error: a program
// does not start with credentials it cannot read. what names the value in
// the log.
func New[T any](logger *slog.Logger, what string, parse func(contents [][]byte) (T, error), paths ...string) (*Reloading[T], error) {
	r := &Reloading[T]{what: what, paths: paths, parse: parse, logger: logger}
	stamps, err := r.stat()
	if err != nil {
		return nil, err
	}
	v, err := r.load()
	if err != nil {
		return nil, err
	}
	r.stamps, r.value = stamps, v
	return r, nil
}

// Get returns the value for the files as they are now.
func (r *Reloading[T]) Get() T {
	r.mu.Lock()
	defer r.mu.Unlock()
	stamps, err := r.stat()
	if err != nil || SameFiles(stamps, r.stamps) {
		// A file that cannot be stat'ed (mid-swap, or removed) keeps the
		// last good value.
		return r.value
	}
	// The stamps are taken before reading: if the files change again while
	// they are read, the next get sees newer stamps and reads them again.
	r.stamps = stamps
	v, err := r.load()
	if err != nil {
		r.logger.Warn("reloading "+r.what+" failed; keeping the previous one", "error", err.Error())
		return r.value
	}
	r.value = v
	r.logger.Info("reloaded " + r.what)
	return v
}

func (r *Reloading[T]) stat() ([]os.FileInfo, error) {
	out := make([]os.FileInfo, len(r.paths))
	for i, p := range r.paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		out[i] = fi
	}
	return out, nil
}

func (r *Reloading[T]) load() (T, error) {
	contents := make([][]byte, len(r.paths))
	for i, p := range r.paths {
		b, err := os.ReadFile(p)
		if err != nil {
			var zero T
			return zero, err
		}
		contents[i] = b
	}
	v, err := r.parse(contents)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("%s (%v): %w", r.what, r.paths, err)
	}
	return v, nil
}

// SameFiles reports whether every file is the same one, unchanged: the
// same file (a Secret volume swaps a symlink to a new one), with the same
// size and modification time.
func SameFiles(a, b []os.FileInfo) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !os.SameFile(a[i], b[i]) || a[i].Size() != b[i].Size() || !a[i].ModTime().Equal(b[i].ModTime()) {
			return false
		}
	}
	return true
}
