//go:build unix

package cli

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

var (
	sigTERM os.Signal = syscall.SIGTERM
	sigKILL os.Signal = syscall.SIGKILL
)

// notifySignals starts catching the signals that run forwards. Catching
// them from the start also covers the wait for the lock.
func notifySignals() chan os.Signal {
	c := make(chan os.Signal, 8)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	return c
}

func stopSignals(c chan os.Signal) { signal.Stop(c) }

// setProcessGroup puts the command in a new process group (its pid is the
// group id), so that signals reach the processes it starts as well, e.g.
// the children of a shell.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

func signalGroup(pgid int, sig os.Signal) {
	if s, ok := sig.(syscall.Signal); ok {
		_ = syscall.Kill(-pgid, s) // ESRCH: the group is already empty
	}
}

// terminateGroup asks every process in the group to end: SIGTERM, and
// SIGCONT so that a stopped member can act on it.
func terminateGroup(pgid int) {
	signalGroup(pgid, sigTERM)
	signalGroup(pgid, syscall.SIGCONT)
}

// groupAlive reports whether any process is left in the group.
func groupAlive(pgid int) bool {
	err := syscall.Kill(-pgid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func terminatingSignal(ps *os.ProcessState) (int, bool) {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return 0, false
	}
	return int(ws.Signal()), true
}

func signalNumber(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return 0
}
