// Package pool writes the pool file of memcached's proxy: the slot tables
// of the Memcached the agent follows (a pool a zone; without zones the one
// zone ""), rendered as the proxy's route configuration
// (sync/memcached/proxy.lua) reads them (contract.RenderPool, where the
// file's format and proxy.lua's reading rules are), written when they
// change.
//
// The writer never writes a file proxy.lua would refuse (RenderPool
// refuses the tables instead, and the file keeps the last pool), never
// writes an empty pool, and replaces the file atomically, so that the
// proxy never reads half of one: in memcached 1.6.45 a pool with no
// backend crashes the proxy, and a refused file is a pool that did not
// follow the tables.
//
// The bytes are those the writer wrote when the hook still chose one of
// two route configurations (without zones, with zones), for either kind
// of Memcached: a proxy running an earlier operator's configuration reads
// what this writer writes. The agent and its proxy share a Pod, and roll
// together, in any case.
package pool

import (
	"github.com/example/memcached-operator/cmd/memcached-agent/internal/follow"
	"github.com/example/memcached-operator/sync/contract"
)

// Reasons a slot table is refused (never written), as metrics label them:
// those of contract.RenderPool, and the follower's.
const (
	BadSlots     = contract.BadSlots
	TooManySlots = contract.TooManySlots
	BadAddress   = contract.BadAddress
	BadVersion   = contract.BadVersion
	BadZone      = contract.BadZone
	WrongObject  = follow.WrongObject
	Unreadable   = follow.Unreadable
)

// Reasons are every refusal reason, for metrics that show each from the
// start.
var Reasons = []string{BadSlots, TooManySlots, BadAddress, BadVersion, BadZone, WrongObject, Unreadable}
