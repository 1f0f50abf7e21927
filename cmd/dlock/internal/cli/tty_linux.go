//go:build linux

package cli

import (
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"unsafe"
)

// terminal is dlock's controlling terminal, which run hands to COMMAND's
// process group while dlock is in the foreground: a COMMAND that reads
// the terminal is then not stopped by SIGTTIN, and Ctrl-C and Ctrl-Z
// reach it as they would without dlock.
type terminal struct {
	f    *os.File
	self int // dlock's own process group
	gave int // the group it handed the terminal to; 0 for none
}

// openTerminal returns the controlling terminal, or nil if there is none
// (cron, systemd, a detached session).
func openTerminal() *terminal {
	f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return nil
	}
	return &terminal{f: f, self: syscall.Getpgrp()}
}

// foregroundGroup is the terminal's foreground process group, or -1.
func (t *terminal) foregroundGroup() int {
	var pgid int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, t.f.Fd(), syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&pgid))); e != 0 {
		return -1
	}
	return int(pgid)
}

// inForeground reports whether dlock's group has the terminal (dlock was
// started, or brought back with fg, in the foreground).
func (t *terminal) inForeground() bool { return t != nil && t.foregroundGroup() == t.self }

// setForeground makes the terminal's foreground group pgid. From the
// background this raises SIGTTOU, which dlock ignores while COMMAND runs
// (see ignoreTTOU).
func (t *terminal) setForeground(pgid int) bool {
	p := int32(pgid)
	_, _, e := syscall.Syscall(syscall.SYS_IOCTL, t.f.Fd(), syscall.TIOCSPGRP, uintptr(unsafe.Pointer(&p)))
	return e == 0
}

// startInForeground has cmd's new process group take the terminal as it
// starts, before COMMAND runs, if dlock has it now.
func (t *terminal) startInForeground(cmd *exec.Cmd) bool {
	if !t.inForeground() {
		return false
	}
	cmd.SysProcAttr.Foreground = true
	cmd.SysProcAttr.Ctty = int(t.f.Fd())
	return true
}

// give hands the terminal to COMMAND's group pgid, if dlock has it.
func (t *terminal) give(pgid int) {
	if t.inForeground() && t.setForeground(pgid) {
		t.gave = pgid
	}
}

// gaveTo records that the terminal went to pgid as it started.
func (t *terminal) gaveTo(pgid int) { t.gave = pgid }

// reclaim takes the terminal back from COMMAND's group, if that group
// still has it: not from a shell that took it meanwhile (after a stop).
func (t *terminal) reclaim() {
	if t == nil || t.gave == 0 {
		return
	}
	if t.foregroundGroup() == t.gave {
		t.setForeground(t.self)
	}
	t.gave = 0
}

// restore takes the terminal back unconditionally: after a COMMAND that
// took it as it started failed to exec.
func (t *terminal) restore() {
	t.setForeground(t.self)
	t.gave = 0
}

func (t *terminal) close() {
	if t != nil {
		_ = t.f.Close()
	}
}

// ignoreTTOU keeps dlock from being stopped by SIGTTOU while COMMAND has
// the terminal: when it takes the terminal back, and when it writes a
// warning with "stty tostop" set. Called only after COMMAND has started,
// as an ignored signal stays ignored across exec. The returned function
// restores the default.
func ignoreTTOU() func() {
	signal.Ignore(syscall.SIGTTOU)
	return func() { signal.Reset(syscall.SIGTTOU) }
}

// notifyChildStops starts catching SIGCHLD, which tells dlock that a child
// stopped, continued or exited; commandStopped says which.
func notifyChildStops() chan os.Signal {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGCHLD)
	return c
}

// waitid(2) constants not in package syscall.
const (
	pPID      = 1
	wStopped  = 0x2
	wNoWait   = 0x1000000
	cldStoped = 5 // CLD_STOPPED
)

// commandExited reports whether process pid, a child of dlock, has exited
// (a zombie os/exec has not reaped yet). WNOWAIT leaves it to Wait.
func commandExited(pid int) bool {
	var info [128]byte
	_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])),
		syscall.WEXITED|syscall.WNOHANG|wNoWait, 0, 0)
	return e == 0 && *(*int32)(unsafe.Pointer(&info[0])) == int32(syscall.SIGCHLD)
}

// commandStopped reports whether process pid, a child of dlock, is
// stopped now. WNOWAIT leaves its status for os/exec's Wait.
func commandStopped(pid int) bool {
	var info [128]byte // siginfo_t: si_signo at 0, si_code at 8
	_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])),
		wStopped|syscall.WNOHANG|wNoWait, 0, 0)
	if e != 0 {
		return false
	}
	signo := *(*int32)(unsafe.Pointer(&info[0]))
	code := *(*int32)(unsafe.Pointer(&info[8]))
	return signo == int32(syscall.SIGCHLD) && code == cldStoped
}
