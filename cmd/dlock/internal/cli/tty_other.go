//go:build !linux

package cli

import (
	"os"
	"os/exec"
)

// terminal: handing the terminal to COMMAND is implemented on Linux only;
// elsewhere COMMAND runs outside the terminal's foreground group.
type terminal struct{}

func openTerminal() *terminal                      { return nil }
func (*terminal) inForeground() bool               { return false }
func (*terminal) startInForeground(*exec.Cmd) bool { return false }
func (*terminal) give(int)                         {}
func (*terminal) gaveTo(int)                       {}
func (*terminal) reclaim()                         {}
func (*terminal) restore()                         {}
func (*terminal) close()                           {}
func ignoreTTOU() func()                           { return func() {} }

// notifyChildStops returns a channel that never receives: stops of
// COMMAND are not watched here.
func notifyChildStops() chan os.Signal { return make(chan os.Signal) }

func commandStopped(int) bool { return false }

func commandExited(int) bool { return false }
