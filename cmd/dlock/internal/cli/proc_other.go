//go:build !unix

package cli

import (
	"os"
	"os/exec"
	"os/signal"
)

// Without process groups, signals reach the command itself only.
var (
	sigTERM = os.Interrupt
	sigKILL = os.Kill
)

func notifySignals() chan os.Signal {
	c := make(chan os.Signal, 8)
	signal.Notify(c, os.Interrupt)
	return c
}

func stopSignals(c chan os.Signal) { signal.Stop(c) }

// notifyJobControl returns a channel that never receives: there is no job
// control here.
func notifyJobControl() chan os.Signal { return make(chan os.Signal) }

func isStop(os.Signal) bool { return false }

func stopGroupAndSelf(int) {}

func continueGroup(int) {}

func setProcessGroup(*exec.Cmd) {}

// signalGroup can only reach the command itself here; see setProcessGroup.
func signalGroup(pid int, sig os.Signal) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Signal(sig)
	}
}

// terminateGroup asks the command itself to end.
func terminateGroup(pid int) { signalGroup(pid, sigTERM) }

func groupAlive(int) bool { return false }

func terminatingSignal(*os.ProcessState) (int, bool) { return 0, false }

func signalNumber(os.Signal) int { return 2 }

// watcher would end COMMAND's group if dlock died; there is none here.
type watcher struct{}

func startWatcher() *watcher { return nil }

func (*watcher) watch(int) {}

func (*watcher) stop() {}
