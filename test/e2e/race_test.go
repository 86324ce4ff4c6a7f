//go:build race

package e2e

// raceEnabled says the tests run with the race detector, so the hook is
// built with it too.
const raceEnabled = true
