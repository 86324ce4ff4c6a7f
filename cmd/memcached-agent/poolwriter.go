package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/example/memcached-operator/cmd/memcached-agent/internal/pool"
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
