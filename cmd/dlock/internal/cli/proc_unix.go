//go:build unix

package cli

import (
	"errors"
	"fmt"
	"io"
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

// notifyJobControl starts catching SIGTSTP and SIGCONT, which run handles
// itself while COMMAND runs.
func notifyJobControl() chan os.Signal {
	c := make(chan os.Signal, 4)
	signal.Notify(c, syscall.SIGTSTP, syscall.SIGCONT)
	return c
}

// isStop reports whether sig asks dlock to stop (Ctrl-Z).
func isStop(sig os.Signal) bool { return sig == syscall.SIGTSTP }

// stopGroupAndSelf stops COMMAND's group, then dlock itself, as a Ctrl-Z
// stops a job. SIGSTOP, not SIGTSTP, for the group: a member ignoring the
// latter would go on running while dlock, stopped, no longer renews.
func stopGroupAndSelf(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGSTOP)
	_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
}

// continueGroup resumes a stopped group.
func continueGroup(pgid int) { signalGroup(pgid, syscall.SIGCONT) }

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

// watcherScript is the watcher: it reads COMMAND's process group id, then
// (re-executed with the id in its arguments, so that ps shows
// "dlock-watch PGID") waits. A "done" line means dlock has seen the group
// empty; end of input without one means dlock died, and the group gets
// SIGKILL. It ignores the signals that dlock forwards, and lives in a
// group of its own, so that what kills dlock's group does not kill it too.
const watcherScript = `trap '' INT TERM HUP
IFS= read -r pgid || exit 0
exec /bin/sh -c 'trap "" INT TERM HUP
IFS= read -r done
[ "$done" = done ] || kill -s KILL -- "-$1" 2>/dev/null' dlock-watch "$pgid"`

// watcher is a small sh process that kills COMMAND's process group if
// dlock dies before the group has emptied: the parent-death signal only
// reaches COMMAND itself, not the processes it started.
type watcher struct {
	cmd *exec.Cmd
	in  io.WriteCloser
}

// startWatcher starts the watcher, or returns nil if it cannot (no sh).
// It is started before COMMAND, so that it is already running when
// COMMAND is.
func startWatcher() *watcher {
	cmd := exec.Command("/bin/sh", "-c", watcherScript, "dlock-watch")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil
	}
	if err := cmd.Start(); err != nil {
		return nil
	}
	return &watcher{cmd: cmd, in: in}
}

// watch tells the watcher which group to kill if dlock dies.
func (w *watcher) watch(pgid int) {
	if w != nil {
		_, _ = fmt.Fprintf(w.in, "%d\n", pgid)
	}
}

// stop dismisses the watcher; call it once the group is empty.
func (w *watcher) stop() {
	if w == nil {
		return
	}
	_, _ = io.WriteString(w.in, "done\n")
	_ = w.in.Close()
	_ = w.cmd.Wait()
}
