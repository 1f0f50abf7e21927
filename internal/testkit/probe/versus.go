package probe

import "testing"

// Versus runs an A/B benchmark of two paths, 0 and 1: one warm-up block of
// each, then for every round of b.Loop a block of each, in alternating
// order, so that both see the same machine noise. block runs one block of
// path p and adds what it measured to the caller's totals; reset clears
// them after the warm-up. It returns the number of rounds.
func Versus(b *testing.B, block func(p int), reset func()) int {
	block(0)
	block(1)
	reset()
	rounds := 0
	for b.Loop() {
		first := rounds % 2
		block(first)
		block(1 - first)
		rounds++
	}
	return rounds
}
