//go:build linux

package cli

import (
	"os/exec"
	"syscall"
)

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from <linux/prctl.h>.
const prSetChildSubreaper = 36

// adoptOrphans makes processes orphaned from now on (the command's
// children, once a terminated shell is gone) children of dlock rather than
// of init. dlock can then reap them itself the moment they die, instead of
// seeing their zombies in the group until an init gets round to it — or
// forever, where no init reaps (dlock as PID 1 in a container).
func adoptOrphans() {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
}

// reapOrphans collects adopted children of process group pgid that have
// exited. It must only run after the command itself has been waited for,
// or it could take the command's exit status from os/exec.
func reapOrphans(pgid int) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-pgid, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// killWithParent has the kernel send COMMAND SIGKILL when dlock dies, by
// whatever signal or crash. (The kernel ties this to the thread that
// started COMMAND; the Go runtime does not end its threads.) It reaches
// COMMAND only, not its children: those are the watcher's.
func killWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
