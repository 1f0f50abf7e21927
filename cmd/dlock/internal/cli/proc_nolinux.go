//go:build !linux

package cli

import "os/exec"

// Elsewhere orphans go to init, and a zombie of the group delays the end
// of a lost run until init reaps it, or until --grace has passed.
func adoptOrphans() {}

func reapOrphans(int) {}

// killWithParent has no parent-death signal to use here; the watcher
// (on Unix) is all that ends COMMAND if dlock dies.
func killWithParent(*exec.Cmd) {}
