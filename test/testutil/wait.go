package testutil

import (
	"errors"
	"testing"
	"time"
)

// PollInterval is how often Eventually and Poll ask: often enough that a
// wait ends within a few milliseconds of what it waits for, seldom enough
// that a hundred waits at once leave the machine to the processes under
// test.
const PollInterval = 20 * time.Millisecond

// Eventually waits until cond returns nil, asking every PollInterval, and
// fails t once timeout has passed, with cond's last error: cond says what
// is still missing ("the pool file holds ..., want ..."), so that a wait
// that never ends names what never came. cond runs on t's goroutine and
// may fail t itself, when what it waits for can no longer come (the
// process exited). It is the one way the tests wait for something with a
// deadline (test/README.md, "Tests that fail now and then": wait for the
// thing itself, never sleep in its place).
func Eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	EventuallyEvery(t, timeout, PollInterval, cond)
}

// EventuallyEvery is Eventually asking every interval: for a state that
// passes quickly, such as a copy caught in its middle.
func EventuallyEvery(t testing.TB, timeout, interval time.Duration, cond func() error) {
	t.Helper()
	if err := poll(timeout, interval, cond); err != nil {
		t.Fatalf("waited %s: %v", timeout, err)
	}
}

// Poll waits until cond holds, asking every PollInterval, for at most
// timeout, and tells whether it held: for a harness with no test to fail
// (test/kube, test/pod) and for a wait whose end is not a failure (a
// figure measured within a bound, the first of two events).
func Poll(timeout time.Duration, cond func() bool) bool {
	return poll(timeout, PollInterval, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}) == nil
}

var errNotYet = errors.New("not yet")

// poll asks cond at once, then every interval until it returns nil or
// timeout has passed since the start; it returns cond's last error. cond
// is asked once more at the deadline, so that a timeout shorter than the
// interval still gives it a second chance.
func poll(timeout, interval time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return err
		}
		time.Sleep(min(interval, left))
	}
}
