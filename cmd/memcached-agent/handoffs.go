package main

import (
	"context"
	"log/slog"
	"sync/atomic"

	"k8s.io/client-go/rest"

	"github.com/example/memcached-operator/cmd/memcached-agent/internal/confirm"
	"github.com/example/memcached-operator/cmd/memcached-agent/internal/handoff"
	"github.com/example/memcached-operator/cmd/memcached-agent/internal/report"
	"github.com/example/memcached-operator/sync/api/v1alpha1"
)

// handoffSink is the agent's hand-off role: it gives the handoff.Runner the
// copies the Memcached's status.handoffs asks for, and has their progress
// reported into ConfigMap NAME-agent and Events (through the API server),
// the --report-file, or with neither into the log. Stop ends the copies,
// releasing their locks.
type handoffSink struct {
	runner *handoff.Runner
	kube   *report.Kube
	file   *report.File
	// handsOff is what the last Memcached offered says (spec.HandsOff):
	// only then is the proxy's word reported (proxyStore).
	handsOff atomic.Bool
}

// newHandoffSink reports through restConfig when it is set (the agent follows
// the API server), into --report-file when it is set.
func newHandoffSink(cfg *config, restConfig *rest.Config, logger *slog.Logger, m *metrics) (*handoffSink, error) {
	c := &handoffSink{}
	var reporters report.Both
	if restConfig != nil {
		var err error
		if c.kube, err = report.NewKube(restConfig, cfg.namespace, cfg.memcached, cfg.self); err != nil {
			return nil, err
		}
		reporters = append(reporters, c.kube)
	}
	if cfg.reportFile != "" {
		c.file = report.NewFile(cfg.reportFile, logger)
		reporters = append(reporters, c.file)
	}
	if len(reporters) == 0 {
		// --from-file without --report-file: the log says it all.
		reporters = append(reporters, logReporter{logger})
	}
	c.runner = handoff.New(handoff.Options{Self: cfg.self, LockTTL: cfg.handoffLockTTL, ClientMove: cfg.clientMove}, reporters, m, logger.With("component", "handoff"))
	return c, nil
}

// Offer hands the hand-offs of the Memcached followed to the runner
// (follow.Sink; the follower offers that object alone).
func (c *handoffSink) Offer(_ string, m *v1alpha1.Memcached) {
	if c.kube != nil {
		c.kube.SetUID(m.UID)
	}
	c.handsOff.Store(m.Spec.HandsOff())
	c.runner.UpdateClients(clientsOf(m))
	c.runner.UpdateZones(m.Status.Handoffs, m.Status.Tables())
}

// clientsOf is what the Memcached says of its clients: which of them
// confirm a switch (the proxies, status.slotTable.proxyVersion), which
// get a clock, and each zone's table versions.
func clientsOf(m *v1alpha1.Memcached) handoff.Clients {
	c := handoff.Clients{Proxies: m.Spec.ProxyOn(), Clock: m.Spec.ClockClients(),
		Versions: map[string]int64{}, ProxyVersions: map[string]int64{}}
	if len(m.Status.Zones) == 0 {
		c.Versions[""], c.ProxyVersions[""] = m.Status.SlotTable.Version, m.Status.SlotTable.ProxyVersion
	}
	for _, z := range m.Status.Zones {
		c.Versions[z.Name], c.ProxyVersions[z.Name] = z.SlotTable.Version, z.SlotTable.ProxyVersion
	}
	return c
}

// Refuse does nothing: a status that cannot be read leaves the copies as
// they are (follow.Sink).
func (c *handoffSink) Refuse(string, error) {}

// proxyStore is where the report of the proxy beside the agent goes: where
// the hand-offs' progress goes (ConfigMap NAME-agent, the --report-file),
// or the log with neither.
func (c *handoffSink) proxyStore(logger *slog.Logger) confirm.Store {
	var stores confirm.Stores
	if c.kube != nil {
		stores = append(stores, c.kube)
	}
	if c.file != nil {
		stores = append(stores, c.file)
	}
	var store confirm.Store = stores
	if len(stores) == 0 {
		store = confirm.LogStore{Logger: logger}
	}
	return confirm.Asked{Store: store, Asked: c.handsOff.Load}
}

// Stop ends every copy and waits for them.
func (c *handoffSink) Stop() { c.runner.Stop() }

// logReporter reports hand-offs into the log alone.
type logReporter struct{ logger *slog.Logger }

func (l logReporter) Report(_ context.Context, key string, p v1alpha1.HandoffProgress) error {
	l.logger.Info("hand-off progress", "key", key, "state", p.State, "items", p.Items, "bytes", p.Bytes, "skipped", p.Skipped, "seconds", p.Seconds, "message", p.Message)
	return nil
}

func (l logReporter) Forget(context.Context, string) error { return nil }

func (l logReporter) Event(_ context.Context, warning bool, reason, message string) error {
	level := slog.LevelInfo
	if warning {
		level = slog.LevelWarn
	}
	l.logger.Log(context.Background(), level, "event", "reason", reason, "message", message)
	return nil
}
