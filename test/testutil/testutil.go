// Package testutil holds what the tests of several packages share: the
// calls a real Metacontroller made (Captures), JSON helpers, sync requests
// built from a Memcached or grown to any number of Pods, golden files,
// throw-away certificate authorities, the real programs a test needs (or a
// skip, failing under CI) and benchmark lines for the figures tests
// measure. It is imported by tests and the test harnesses only.
package testutil

import (
	"path/filepath"
	"runtime"
)

// Root is the repository's root directory, wherever the test runs from.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}
