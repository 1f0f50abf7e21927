//go:build race

package dlock_test

// raceEnabled: the race detector changes allocation counts (counts_test.go).
const raceEnabled = true
