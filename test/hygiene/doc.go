// Package hygiene holds tests of the repository itself, not of the
// operator: nothing built is committed (no file over 1 MiB, no executable
// binary), and .gitignore keeps every build output out of git status. A 13
// MB binary once went in by accident; these tests make the next one fail
// make test instead. And no function of the operator's code (every package
// under sync/ and cmd/, tests and generated code aside) grows past 100
// lines (TestFunctionLength).
package hygiene
