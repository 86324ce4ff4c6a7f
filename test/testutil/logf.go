package testutil

// Logf is where a harness that runs outside a test too (test/kube,
// test/playground) tells of its progress: t.Logf in a test, the terminal
// in the playground, nothing when left nil.
type Logf func(format string, args ...any)

// Printf calls l, if set.
func (l Logf) Printf(format string, args ...any) {
	if l != nil {
		l(format, args...)
	}
}
