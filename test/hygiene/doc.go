// Package hygiene holds tests of the repository itself, not of the
// operator: nothing built is committed (no file over 1 MiB, no executable
// binary), and .gitignore keeps every build output out of git status. A 13
// MB binary once went in by accident; these tests make the next one fail
// make test instead. And no function of the packages a hand-off runs
// through (sync/slots, sync/memcached, the agent's internal/handoff) grows
// past 100 lines (TestFunctionLength).
package hygiene
