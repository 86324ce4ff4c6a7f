package program

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// Stop is the graceful stop both programs make when their context ends
// (SIGTERM, see Main): they keep serving for Delay with /readyz failing
// (Stopping is true), so that the Service sends nothing new their way
// before they stop accepting, then give what is in flight Timeout to
// finish.
type Stop struct {
	Delay, Timeout time.Duration

	stopping atomic.Bool
}

// Stopping reports whether the stop has begun: /readyz fails from then on.
func (s *Stop) Stopping() bool { return s.stopping.Load() }

// Wait returns at once the error of a server that failed (received on
// failed) or, when ctx ends, stops gracefully: Stopping becomes true and
// begin, when not nil, is called; after Delay, shutdown is called with a
// context that ends Timeout later, and Wait returns what it returned
// (nil after a clean stop). A server that fails during the delay ends it.
func (s *Stop) Wait(ctx context.Context, logger *slog.Logger, failed <-chan error, begin func(), shutdown func(context.Context) error) error {
	select {
	case err := <-failed:
		return err
	case <-ctx.Done():
	}
	s.stopping.Store(true)
	if begin != nil {
		begin()
	}
	logger.Info("shutting down: /readyz fails from now on", "delay", s.Delay.String())
	select {
	case <-time.After(s.Delay):
	case err := <-failed:
		return err
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), s.Timeout)
	defer cancel()
	if err := shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	logger.Info("stopped")
	return nil
}
