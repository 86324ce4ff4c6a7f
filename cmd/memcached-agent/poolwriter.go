package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/example/memcached-operator/cmd/memcached-agent/internal/confirm"
	"github.com/example/memcached-operator/cmd/memcached-agent/internal/pool"
	"github.com/example/memcached-operator/sync/contract"
)

// poolWriter is the proxy's pool: beside a proxy, it writes the slot
// table of every status it is offered into --pool-file, which the proxy
// reads (see internal/pool). Run writes until its context ends.
type poolWriter struct {
	*pool.Writer
}

// newPoolWriter writes into --pool-file, whose directory (the volume the
// proxy reads) must exist.
func newPoolWriter(cfg *config, logger *slog.Logger, m *metrics) (*poolWriter, error) {
	if fi, err := os.Stat(filepath.Dir(cfg.poolFile)); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("--pool-file %s: its directory must exist (the volume the proxy reads)", cfg.poolFile)
	}
	return &poolWriter{pool.New(cfg.poolFile, logger.With("component", "pool"), m, time.Now)}, nil
}

// proxyConfirm is the proxy's word on the pool it routes by (see
// internal/confirm): beside the pool writer (--pool-file, --proxy-addr),
// it watches the proxy's announcements, which /readyz waits for, and
// reports them under contract.ProxyReportKey of the agent's Pod. start
// and stop run and end both; stop takes the report out, and may be
// called more than once, or on nil.
type proxyConfirm struct {
	*confirm.Watcher
	reporter *confirm.Reporter

	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

func newProxyConfirm(cfg *config, store confirm.Store, logger *slog.Logger, m *metrics) *proxyConfirm {
	logger = logger.With("component", "proxy")
	w := confirm.NewWatcher(cfg.proxyAddr, logger, m, time.Now)
	return &proxyConfirm{Watcher: w, reporter: confirm.NewReporter(contract.ProxyReportKey(cfg.self), store, w, logger, m.proxyReportFailed)}
}

func (p *proxyConfirm) start() {
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.wg.Go(func() { p.Run(ctx) })
	p.wg.Go(func() { p.reporter.Run(ctx) })
}

func (p *proxyConfirm) stop() {
	if p == nil {
		return
	}
	p.once.Do(func() {
		if p.cancel != nil {
			p.cancel()
		}
		p.wg.Wait()
	})
}

// addr is the proxy's address, "" for nil: for the log.
func (p *proxyConfirm) addr() string {
	if p == nil {
		return ""
	}
	return p.Addr()
}
