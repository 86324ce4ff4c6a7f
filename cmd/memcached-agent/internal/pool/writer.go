package pool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/example/memcached-operator/cmd/internal/program"
	"github.com/example/memcached-operator/cmd/memcached-agent/internal/follow"
	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
)

// Mode is the pool file's: the proxy runs as another user (the official
// image's memcached is uid 11211, the agent 65532), and a file it cannot
// read is a pool it keeps out of date (os.CreateTemp makes 0600 files).
const Mode fs.FileMode = 0o644

// RetryInterval is how often a pool that could not be written is tried
// again.
const RetryInterval = time.Second

// Observer is told what the writer does, for metrics.
type Observer interface {
	// PoolWritten is a pool now in the file (written, or found there).
	PoolWritten(p *contract.Pool, wrote bool)
	// PoolRefused is a slot table that was not written, by reason.
	PoolRefused(reason string)
	// PoolWriteFailed is a write that failed (it is tried again).
	PoolWriteFailed()
}

// Written is the pool the file holds.
type Written struct {
	Version     int64
	Slots, Down int
	At          time.Time
}

// Writer writes the pool file from every Memcached a follower offers
// (follow.Sink), when its content changes. Offer and Refuse are called
// from the follower's goroutine; Run retries a write that failed; Current
// may be called from any goroutine.
type Writer struct {
	path     string
	logger   *slog.Logger
	observer Observer
	now      func() time.Time

	current atomic.Pointer[Written]

	mu sync.Mutex
	// written is the content the file holds, as this writer last wrote
	// or found it; nil before.
	written []byte
	// pending is a pool not yet in the file (its write failed).
	pending *contract.Pool
	// lastProblem is the last problem logged, so that each is logged once
	// until something is written.
	lastProblem string
}

// New returns a Writer of the pool file path.
func New(path string, logger *slog.Logger, observer Observer, now func() time.Time) *Writer {
	return &Writer{path: path, logger: logger, observer: observer, now: now}
}

// Path is the pool file.
func (w *Writer) Path() string { return w.path }

// Current returns what the file holds, or nil before a pool is in it.
func (w *Writer) Current() *Written { return w.current.Load() }

// Offer writes the pool of m's slot tables (contract.PoolZones: with
// zones, status.zones, else the one zone "" of status.slotTable), unless
// the file holds it already. A table that cannot be written is refused:
// the file keeps the last pool, and the proxy with it.
func (w *Writer) Offer(source string, m *v1alpha1.Memcached) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p, err := contract.RenderPool(contract.PoolZones(&m.Status))
	if err != nil {
		e, ok := errors.AsType[*contract.PoolError](err)
		if !ok {
			e = &contract.PoolError{Reason: BadSlots, Msg: err.Error()}
		}
		w.refuse(source, e.Reason, e.Msg)
		return
	}
	w.pending = p
	w.flush()
}

// Refuse records that the source could not read the object at all, or
// refused it as another one (follow.Reason).
func (w *Writer) Refuse(source string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.refuse(source, follow.Reason(err), err.Error())
}

// Run tries again, every RetryInterval until ctx ends, a write that
// failed.
func (w *Writer) Run(ctx context.Context) {
	program.Every(ctx, RetryInterval, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.pending != nil {
			w.flush()
		}
		return true
	})
}

// flush puts w.pending in the file, unless it is there already; on
// success pending is cleared. w.mu is held.
func (w *Writer) flush() {
	p := w.pending
	if w.written != nil && bytes.Equal(w.written, p.Content) {
		w.pending = nil
		return
	}
	wrote := true
	if w.written == nil && holds(w.path, p.Content) {
		// A restarted agent finds its pool in the emptyDir: the proxy
		// has it already.
		wrote = false
	} else if err := writeAtomic(w.path, p.Content); err != nil {
		if w.observer != nil {
			w.observer.PoolWriteFailed()
		}
		w.problem("cannot write the pool file; trying again", "path", w.path, "error", err.Error(), "version", p.Version)
		return
	}
	w.written, w.pending, w.lastProblem = p.Content, nil, ""
	w.current.Store(&Written{Version: p.Version, Slots: p.Slots, Down: p.Down, At: w.now()})
	if w.observer != nil {
		w.observer.PoolWritten(p, wrote)
	}
	msg := "wrote the pool"
	if !wrote {
		msg = "the pool file already holds the pool"
	}
	w.logger.Info(msg, "path", w.path, "version", p.Version, "slots", p.Slots, "down", p.Down)
}

func (w *Writer) refuse(source, reason, problem string) {
	if w.observer != nil {
		w.observer.PoolRefused(reason)
	}
	attrs := []any{"source", source, "reason", reason, "problem", problem}
	if cur := w.current.Load(); cur != nil {
		attrs = append(attrs, "pool_version", cur.Version, "pool_slots", cur.Slots)
	} else {
		attrs = append(attrs, "pool", "none yet: the proxy fails every request")
	}
	w.problem("slot table refused; the pool file keeps the last pool", attrs...)
}

// problem logs a warning once until another problem or a write.
func (w *Writer) problem(msg string, attrs ...any) {
	key := fmt.Sprint(msg, attrs)
	if key == w.lastProblem {
		return
	}
	w.lastProblem = key
	w.logger.Warn(msg, attrs...)
}

// holds tells whether path is a regular file with content and Mode.
func holds(path string, content []byte) bool {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != Mode || fi.Size() != int64(len(content)) {
		return false
	}
	b, err := os.ReadFile(path)
	return err == nil && bytes.Equal(b, content)
}

// writeAtomic replaces path with content: a new file in the same directory
// (a rename does not cross file systems), made readable by all, synced,
// then renamed over path, and the directory synced. A reader sees the old
// file or the new one, never part of one; a crash leaves at worst a
// temporary file, which the next write does not trip on.
func writeAtomic(path string, content []byte) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(content); err != nil {
		return err
	}
	if err = f.Chmod(Mode); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	if d, derr := os.Open(dir); derr == nil {
		// Best effort: the rename is what readers need; the sync makes
		// it survive a crash of the node.
		_ = d.Sync()
		d.Close()
	}
	return nil
}
