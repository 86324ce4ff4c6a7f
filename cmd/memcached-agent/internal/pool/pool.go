// Package pool writes the pool file of memcached's proxy: the slot table
// of the Memcached the agent follows, rendered as the proxy's route
// configuration (sync/memcached/proxy.lua) reads it (contract.RenderPool,
// where the file's format and proxy.lua's reading rules are), written
// when it changes.
//
// The writer never writes a file proxy.lua would refuse (RenderPool
// refuses the table instead, and the file keeps the last pool), never
// writes an empty pool, and replaces the file atomically, so that the
// proxy never reads half of one: in memcached 1.6.45 a pool with no
// backend crashes the proxy, and a refused file is a pool that did not
// follow the table.
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
