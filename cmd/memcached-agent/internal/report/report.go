// Package report tells where the agent's hand-off copies got: into the
// data of the Memcached's ConfigMap NAME-agent, one JSON
// v1alpha1.HandoffProgress a hand-off, keyed by contract.ReportKey (the
// hook carries it into status.handoffs), and as Events on the Memcached;
// or, without an API server, into a file that holds the same data. The
// agent beside a proxy reports there too what its proxy loaded
// (contract.ProxyReport, under contract.ProxyReportKey: Put).
package report

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sync"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
)

// File keeps the reports in a file, as a JSON object holding what the
// ConfigMap's data would (report key to the progress as a JSON string),
// written whole and renamed into place, so that a reader never sees half
// of it. Events go to the log.
type File struct {
	path   string
	logger *slog.Logger

	mu   sync.Mutex
	data map[string]string
}

// NewFile reports into path, keeping what a file already there holds.
func NewFile(path string, logger *slog.Logger) *File {
	f := &File{path: path, logger: logger, data: map[string]string{}}
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &f.data); err != nil {
			logger.Warn("the report file does not hold a JSON object of strings; starting afresh", "path", path, "error", err)
			f.data = map[string]string{}
		}
	}
	return f
}

// Report sets a hand-off's progress, under its report key.
func (f *File) Report(_ context.Context, key string, p v1alpha1.HandoffProgress) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.data[key] = string(b)
	return f.write()
}

// Put sets a key to value: a proxy's report (contract.ProxyReport, under
// contract.ProxyReportKey), as Kube.Put.
func (f *File) Put(_ context.Context, key, value string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.data[key] = value
	return f.write()
}

// Forget removes a hand-off's progress, or a proxy's report.
func (f *File) Forget(_ context.Context, key string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.data[key]; !ok {
		return nil
	}
	delete(f.data, key)
	return f.write()
}

// Event logs what an Event would say.
func (f *File) Event(_ context.Context, warning bool, reason, message string) error {
	level := slog.LevelInfo
	if warning {
		level = slog.LevelWarn
	}
	f.logger.Log(context.Background(), level, "event", "reason", reason, "message", message)
	return nil
}

// write replaces the file; f.mu is held. encoding/json sorts the keys:
// the same reports make the same bytes.
func (f *File) write() error {
	b, err := json.MarshalIndent(maps.Clone(f.data), "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.path), "."+filepath.Base(f.path)+".*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(append(b, '\n'))
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), f.path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("replacing %s: %w", f.path, err)
	}
	return nil
}

// Reporter is what the hand-offs report to (handoff.Reporter), each
// hand-off under its contract.ReportKey.
type Reporter interface {
	Report(ctx context.Context, key string, p v1alpha1.HandoffProgress) error
	Forget(ctx context.Context, key string) error
	Event(ctx context.Context, warning bool, reason, message string) error
}

// Both reports to each of several Reporters.
type Both []Reporter

func (b Both) Report(ctx context.Context, key string, p v1alpha1.HandoffProgress) error {
	var errs []error
	for _, r := range b {
		errs = append(errs, r.Report(ctx, key, p))
	}
	return errors.Join(errs...)
}

func (b Both) Forget(ctx context.Context, key string) error {
	var errs []error
	for _, r := range b {
		errs = append(errs, r.Forget(ctx, key))
	}
	return errors.Join(errs...)
}

func (b Both) Event(ctx context.Context, warning bool, reason, message string) error {
	var errs []error
	for _, r := range b {
		errs = append(errs, r.Event(ctx, warning, reason, message))
	}
	return errors.Join(errs...)
}
