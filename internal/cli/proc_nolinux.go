//go:build !linux

package cli

// Elsewhere orphans go to init, and a zombie of the group delays the end
// of a lost run until init reaps it, or until --grace has passed.
func adoptOrphans() {}

func reapOrphans(int) {}
