package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
)

// The operator's keys on a source, beside contract.DoneKey. None is ever
// copied (contract.ReservedKeyPrefix).
const (
	// LockKey is held (value: the agent's name) by the agent that copies
	// the source, with a TTL it renews while it copies.
	LockKey = contract.ReservedKeyPrefix + "handoff/lock"
	// CopiedKey holds the identity of the last copy that finished, a
	// line break and its last report (JSON), so that the other agent,
	// waiting for the lock, knows it has nothing left to do (a source
	// that stays, Moved or Grown, gets no DoneKey) and can send that
	// report again.
	CopiedKey = contract.ReservedKeyPrefix + "handoff/copied"
	// copiedTTL keeps CopiedKey on a source that stays (Moved, Grown) for
	// a day.
	copiedTTL = 24 * time.Hour
)

// errLockLost ends a copy whose lock another agent holds now (this one
// could not renew it in time).
var errLockLost = errors.New("the copy's lock was lost to another agent")

// ttlToken is a TTL as ms's T takes it: whole seconds, at least one.
func ttlToken(d time.Duration) string {
	return "T" + strconv.FormatInt(max(int64((d+time.Second-1)/time.Second), 1), 10)
}

// tryLock takes the lock if no one holds it (ms in add mode, atomic in
// memcached), and says who holds it otherwise. A lock in this agent's own
// name is a previous run of this agent's (a restarted container keeps its
// Pod's name; one process never runs two copies of a source): it is taken
// back at once rather than waited out.
func tryLock(c *conn, self string, ttl time.Duration) (held bool, holder string, err error) {
	ok, err := c.store(LockKey, []byte(self), "ME "+ttlToken(ttl))
	if err != nil || ok {
		return ok, self, err
	}
	v, _, found, err := c.get(LockKey)
	if err != nil {
		return false, "", err
	}
	if !found {
		// Released between the two: the next try takes it.
		return false, "", nil
	}
	if string(v) == self {
		if err := renewLock(c, self, ttl); err != nil {
			if errors.Is(err, errLockLost) {
				return false, "", nil
			}
			return false, "", err
		}
		return true, self, nil
	}
	return false, string(v), nil
}

// renewLock extends the lock if this agent still holds it: compare and
// swap on its cas, so that a lock taken over meanwhile is never extended.
func renewLock(c *conn, self string, ttl time.Duration) error {
	v, cas, found, err := c.get(LockKey)
	if err != nil {
		return err
	}
	if !found || string(v) != self {
		return errLockLost
	}
	ok, err := c.store(LockKey, []byte(self), fmt.Sprintf("C%d %s", cas, ttlToken(ttl)))
	if err != nil {
		return err
	}
	if !ok {
		return errLockLost
	}
	return nil
}

// unlock deletes the lock if this agent still holds it.
func unlock(c *conn, self string) error {
	v, cas, found, err := c.get(LockKey)
	if err != nil || !found || string(v) != self {
		return err
	}
	return c.deleteCAS(LockKey, cas)
}

// finished tells whether the copy id is done on the source: CopiedKey
// says so, or (leaving, a source that gets the marker) DoneKey is there.
// From CopiedKey it also returns the copy's last report, which an agent
// that finds the copy done sends again: the copier may have died before
// sending it, and the hand-off of a source that stays (Moved, Grown)
// leaves the status only on that report.
func finished(c *conn, id string, leaving bool) (bool, *v1alpha1.HandoffProgress, error) {
	v, _, found, err := c.get(CopiedKey)
	if err != nil {
		return false, nil, err
	}
	if found {
		if got, report, _ := strings.Cut(string(v), "\n"); got == id {
			var p v1alpha1.HandoffProgress
			if json.Unmarshal([]byte(report), &p) != nil || p.State == "" {
				return true, nil, nil
			}
			return true, &p, nil
		}
	}
	if !leaving {
		return false, nil, nil
	}
	_, _, found, err = c.get(contract.DoneKey)
	return found, nil, err
}

// markFinished records the copy id as finished, with its report, and, for
// a leaving source, sets DoneKey, which its preStop waits for.
func markFinished(c *conn, id string, leaving bool, p v1alpha1.HandoffProgress) error {
	report, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if _, err := c.store(CopiedKey, []byte(id+"\n"+string(report)), ttlToken(copiedTTL)); err != nil {
		return err
	}
	if leaving {
		return markDone(c)
	}
	return nil
}

// markDone sets DoneKey, with no TTL: the source is leaving.
func markDone(c *conn) error {
	ok, err := c.store(contract.DoneKey, []byte("1"), "T0")
	if err == nil && !ok {
		err = &protocolError{addr: c.addr, msg: "did not store " + contract.DoneKey}
	}
	return err
}

// withControl runs f on a control connection to addr, dialling again and
// retrying f after a connection failure, up to retries times.
func withControl(ctx context.Context, d Dialer, addr string, timeout time.Duration, retries int, c **conn, f func(*conn) error) error {
	var err error
	for attempt := 0; attempt <= retries; attempt++ {
		if attempt > 0 {
			select {
			case <-time.After(min(200*time.Millisecond<<(attempt-1), 2*time.Second)):
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		if *c == nil {
			if *c, err = dial(ctx, d, addr, timeout, controlBufs); err != nil {
				continue
			}
		}
		if err = f(*c); err == nil || !isRetryable(err) {
			return err
		}
		(*c).close()
		*c = nil
	}
	return err
}
