package confirm

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// Store is where reports go: a key of ConfigMap NAME-agent's data
// (report.Kube), the --report-file (report.File), or the log.
type Store interface {
	Put(ctx context.Context, key, value string) error
	Forget(ctx context.Context, key string) error
}

// Timings of the reports.
const (
	// PutTimeout bounds one write of the report.
	PutTimeout = 10 * time.Second
	// MinRetry and MaxRetry bound the wait before a failed write is tried
	// again (doubling from one to the other).
	MinRetry = time.Second
	MaxRetry = 30 * time.Second
	// ForgetTimeout bounds taking the report out when the agent stops.
	ForgetTimeout = 2 * time.Second
)

// Reporter writes what a Watcher hears under a key of a Store: once the
// proxy first says it loaded a pool, then at each change (a report of no
// pool, contract.ProxyReport with Loaded empty, once the proxy has said
// nothing for Quiet). A write that fails is tried again, later and later.
// When Run's context ends, the key is taken out (best effort: the hook
// ignores the reports of Pods that are gone).
type Reporter struct {
	key     string
	store   Store
	watcher *Watcher
	logger  *slog.Logger
	// failed is told each write that failed, for metrics; may be nil.
	failed func()
}

// NewReporter reports what watcher hears under key (contract.ProxyReportKey
// of the agent's Pod) into store.
func NewReporter(key string, store Store, watcher *Watcher, logger *slog.Logger, failed func()) *Reporter {
	return &Reporter{key: key, store: store, watcher: watcher, logger: logger, failed: failed}
}

// Run reports until ctx ends, then takes the report out.
func (r *Reporter) Run(ctx context.Context) {
	var reported, said string
	known := false
	retry := MinRetry
	var wait <-chan time.Time
	for {
		cur := r.watcher.Current()
		known = known || cur != nil
		if want := Report(cur).Encode(); known && want != reported {
			putCtx, cancel := context.WithTimeout(ctx, PutTimeout)
			err := r.store.Put(putCtx, r.key, want)
			cancel()
			switch {
			case err == nil:
				reported, said, retry, wait = want, "", MinRetry, nil
				r.logger.Info("reported the pool the proxy routes by", "key", r.key, "report", want)
			case ctx.Err() != nil:
			case errors.Is(err, ErrNotAsked):
				// Not a failure: asked again a second later.
				wait = time.After(MinRetry)
			default:
				if r.failed != nil {
					r.failed()
				}
				if msg := err.Error(); msg != said {
					said = msg
					r.logger.Warn("cannot report the pool the proxy routes by; trying again", "key", r.key, "error", msg, "retry", retry.String())
				}
				wait = time.After(retry)
				retry = min(2*retry, MaxRetry)
			}
		}
		select {
		case <-ctx.Done():
			r.forget(reported != "")
			return
		case <-r.watcher.Changed():
		case <-wait:
			wait = nil
		}
	}
}

// forget takes the report out, when one was written.
func (r *Reporter) forget(written bool) {
	if !written {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ForgetTimeout)
	defer cancel()
	if err := r.store.Forget(ctx, r.key); err != nil {
		r.logger.Warn("cannot take the proxy's report out", "key", r.key, "error", err.Error())
		return
	}
	r.logger.Info("took the proxy's report out", "key", r.key)
}

// ErrNotAsked is what an Asked store answers while nobody asks for the
// proxy's word: the Reporter tries again soon, quietly.
var ErrNotAsked = errors.New("nobody asks for the proxy's word")

// Asked is a Store that writes only while Asked says someone waits for
// the proxy's word: a Memcached that hands nothing off (no keepWarm, no
// zones) has no copy to wait for it, and no ConfigMap NAME-agent to hold
// it (the agent's Role does not reach one either), where every write
// would fail and warn.
type Asked struct {
	Store
	Asked func() bool
}

func (a Asked) Put(ctx context.Context, key, value string) error {
	if !a.Asked() {
		return ErrNotAsked
	}
	return a.Store.Put(ctx, key, value)
}

// LogStore is a Store that logs each report: the agent with --from-file
// and no --report-file.
type LogStore struct{ Logger *slog.Logger }

func (l LogStore) Put(_ context.Context, key, value string) error {
	l.Logger.Info("proxy report", "key", key, "report", value)
	return nil
}

func (l LogStore) Forget(_ context.Context, key string) error {
	l.Logger.Info("proxy report taken out", "key", key)
	return nil
}

// Stores writes to each of several Stores.
type Stores []Store

func (s Stores) Put(ctx context.Context, key, value string) error {
	var errs []error
	for _, st := range s {
		if err := st.Put(ctx, key, value); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s Stores) Forget(ctx context.Context, key string) error {
	var errs []error
	for _, st := range s {
		if err := st.Forget(ctx, key); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
