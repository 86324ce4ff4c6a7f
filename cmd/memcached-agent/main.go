// Command memcached-agent is the data plane beside one Memcached. It
// follows the Memcached's status (through the API server, or from a file)
// and does up to three jobs with it, each a small type that run wires as
// the flags ask:
//
//   - endpoint (--listen): serves the server list to memcached clients
//     that speak ElastiCache Auto Discovery, answering "config get
//     cluster" and "get AmazonElastiCache:cluster" in memcached's text
//     protocol;
//   - poolWriter (--pool-file): writes the slot table as the pool of
//     memcached's proxy (internal/pool), beside each proxy of the proxy
//     tier, which runs it with no endpoint (--listen=);
//   - handoffSink (always; idle until status.handoffs names work for it):
//     has internal/handoff copy the items of a memcached Pod that leaves,
//     moves or loses keys to added slots to the Pods that take its keys,
//     and reports how far it got.
//
// The hook runs two agents per Memcached with spec.discovery or
// spec.rollout.keepWarm; see README.md.
package main

import "github.com/example/memcached-operator/cmd/internal/program"

func main() { program.Main("memcached-agent", run) }
