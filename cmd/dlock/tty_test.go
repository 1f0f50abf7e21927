//go:build linux

package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// openPTY opens a new pseudo-terminal pair: the master, which the test
// reads and types into, and the slave, which becomes dlock's terminal.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { _ = m.Close() })
	unlock := int32(0)
	if err := ioctl(m, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	var n uint32
	if err := ioctl(m, syscall.TIOCGPTN, unsafe.Pointer(&n)); err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.FormatUint(uint64(n), 10), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return m, s
}

func ioctl(f *os.File, req uintptr, arg unsafe.Pointer) error {
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), req, uintptr(arg)); e != 0 {
		return e
	}
	return nil
}

// foreground is the foreground process group of the master's terminal
// (TIOCGPGRP on the master side needs no controlling terminal).
func foreground(t *testing.T, master *os.File) int {
	t.Helper()
	var pgid int32
	if err := ioctl(master, syscall.TIOCGPGRP, unsafe.Pointer(&pgid)); err != nil {
		t.Fatalf("tcgetpgrp: %v", err)
	}
	return int(pgid)
}

// ttyProc is dlock running as the leader of a new session whose
// controlling terminal is a pseudo-terminal, as in a login shell's
// terminal; output is everything written to the terminal.
type ttyProc struct {
	*proc
	master *os.File
	lines  chan string
}

func startOnTTY(t *testing.T, url string, args ...string) *ttyProc {
	t.Helper()
	master, slave := openPTY(t)
	p := &proc{t: t, done: make(chan struct{})}
	p.cmd = exec.Command(dlockBin, args...)
	p.cmd.Env = append(dlockFreeEnviron(), "DLOCK_REDIS="+url)
	p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = slave, slave, slave
	// Setsid and Setctty: the slave (dlock's fd 0) becomes the controlling
	// terminal of dlock's new session, and dlock's group its foreground.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = slave.Close() // dlock and COMMAND have it; EOF on master once they are gone
	go func() {
		_ = p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.code = 128 + int(ws.Signal())
		}
		close(p.done)
	}()
	tp := &ttyProc{proc: p, master: master, lines: make(chan string, 100)}
	go func() {
		defer close(tp.lines)
		r := bufio.NewReader(master)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				tp.lines <- strings.TrimRight(line, "\r\n")
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
			return
		default:
		}
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGCONT)
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return tp
}

// expect returns the submatches of the first terminal line matching re,
// failing after timeout.
func (tp *ttyProc) expect(re string, timeout time.Duration) []string {
	tp.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.After(timeout)
	var seen []string
	for {
		select {
		case line, ok := <-tp.lines:
			if !ok {
				tp.t.Fatalf("terminal closed before a line matching %q; saw %q", re, seen)
			}
			if m := rx.FindStringSubmatch(line); m != nil {
				return m
			}
			seen = append(seen, line)
		case <-deadline:
			tp.t.Fatalf("no line matching %q on the terminal after %v; saw %q", re, timeout, seen)
		}
	}
}

func (tp *ttyProc) typeLine(s string) {
	tp.t.Helper()
	if _, err := io.WriteString(tp.master, s+"\n"); err != nil {
		tp.t.Fatal(err)
	}
}

// readerScript prints its process group, then reads a line from the
// terminal: outside the terminal's foreground group the read would stop
// it with SIGTTIN.
const readerScript = `set -- $(cat /proc/$$/stat); echo "pgid=$5"; IFS= read -r line; echo "read:$line"`

// TestRunGivesCommandTheTerminal: in a terminal, COMMAND's process group
// is the terminal's foreground while it runs, so a COMMAND that reads the
// terminal reads it; afterwards dlock has the terminal back.
func TestRunGivesCommandTheTerminal(t *testing.T) {
	t.Parallel()
	url, rdb := server(t)
	tp := startOnTTY(t, url, "run", "--min-hold", "30s", "tty-read", "--", "sh", "-c", readerScript)
	pgid, _ := strconv.Atoi(tp.expect(`^pgid=(\d+)$`, 10*time.Second)[1])
	if fg := foreground(t, tp.master); fg != pgid {
		t.Errorf("terminal's foreground group %d, want COMMAND's %d", fg, pgid)
	}
	tp.typeLine("hello")
	tp.expect(`^read:hello$`, 10*time.Second)
	// COMMAND is done; during --min-hold dlock holds the lock and should
	// have the terminal again.
	deadline := time.Now().Add(10 * time.Second)
	for foreground(t, tp.master) != tp.cmd.Process.Pid {
		if time.Now().After(deadline) {
			t.Fatalf("foreground group %d after COMMAND ended, want dlock's %d", foreground(t, tp.master), tp.cmd.Process.Pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !lockHeld(t, rdb, "tty-read") {
		t.Fatal("lock not held during --min-hold")
	}
	// dlock has the terminal: Ctrl-C reaches it (and ends the hold).
	if _, err := io.WriteString(tp.master, "\x03"); err != nil {
		t.Fatal(err)
	}
	if code := tp.wait(10 * time.Second); code != 128+int(syscall.SIGINT) {
		t.Fatalf("status %d after Ctrl-C during --min-hold, want %d", code, 128+int(syscall.SIGINT))
	}
}

// TestRunTerminalInterrupt: Ctrl-C typed while COMMAND has the terminal
// reaches COMMAND's group, which dies of it; dlock passes its status on
// and releases the lock.
func TestRunTerminalInterrupt(t *testing.T) {
	t.Parallel()
	url, rdb := server(t)
	tp := startOnTTY(t, url, "run", "tty-int", "--", "sh", "-c", `echo ready; exec sleep 60`)
	tp.expect(`^ready$`, 10*time.Second)
	if _, err := io.WriteString(tp.master, "\x03"); err != nil {
		t.Fatal(err)
	}
	if code := tp.wait(10 * time.Second); code != 128+int(syscall.SIGINT) {
		t.Fatalf("status %d after Ctrl-C, want %d", code, 128+int(syscall.SIGINT))
	}
	if lockHeld(t, rdb, "tty-int") {
		t.Error("lock held after the run")
	}
}

// TestRunTerminalStop: Ctrl-Z typed while COMMAND has the terminal stops
// COMMAND's group (the terminal sends it SIGTSTP) and then dlock, which
// takes the terminal back; SIGCONT, as fg sends it, gives COMMAND the
// terminal again, and its read goes on.
func TestRunTerminalStop(t *testing.T) {
	t.Parallel()
	url, _ := server(t)
	tp := startOnTTY(t, url, "run", "--ttl", "10s", "tty-stop", "--", "sh", "-c", readerScript)
	pgid, _ := strconv.Atoi(tp.expect(`^pgid=(\d+)$`, 10*time.Second)[1])
	if _, err := io.WriteString(tp.master, "\x1a"); err != nil { // Ctrl-Z
		t.Fatal(err)
	}
	waitState(t, pgid, 'T', false, 5*time.Second)
	waitState(t, tp.cmd.Process.Pid, 'T', false, 5*time.Second)
	if fg := foreground(t, tp.master); fg != tp.cmd.Process.Pid {
		t.Errorf("stopped: foreground group %d, want dlock's %d", fg, tp.cmd.Process.Pid)
	}
	if err := tp.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitState(t, pgid, 'T', true, 5*time.Second)
	if fg := foreground(t, tp.master); fg != pgid {
		t.Errorf("resumed: foreground group %d, want COMMAND's %d", fg, pgid)
	}
	tp.typeLine("again")
	tp.expect(`^read:again$`, 10*time.Second)
	if code := tp.wait(10 * time.Second); code != 0 {
		t.Fatalf("status %d, want 0", code)
	}
}

// TestRunInBackgroundOfAShell: started with & from an interactive shell,
// dlock is not in the terminal's foreground and does not take it; COMMAND,
// reading the terminal, is stopped by SIGTTIN, and dlock stops with it (a
// stopped dlock does not renew: the lock is not kept for a command that
// cannot run), as a job of the shell. fg gives dlock the terminal, dlock
// gives it to COMMAND, and the read goes on.
func TestRunInBackgroundOfAShell(t *testing.T) {
	t.Parallel()
	url, _ := server(t)
	master, slave := openPTY(t)
	sh := exec.Command("sh", "-i")
	sh.Env = append(dlockFreeEnviron(), "DLOCK_REDIS="+url, "DLOCK_BIN="+dlockBin, "PS1=$ ", "ENV=")
	sh.Stdin, sh.Stdout, sh.Stderr = slave, slave, slave
	sh.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	_ = slave.Close()
	t.Cleanup(func() {
		_ = syscall.Kill(-sh.Process.Pid, syscall.SIGKILL)
		_ = sh.Wait()
	})
	p := &proc{t: t, cmd: sh, done: make(chan struct{})}
	tp := &ttyProc{proc: p, master: master, lines: make(chan string, 100)}
	go func() {
		defer close(tp.lines)
		r := bufio.NewReader(master)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				tp.lines <- strings.TrimRight(line, "\r\n")
			}
			if err != nil {
				return
			}
		}
	}()
	tp.typeLine(`"$DLOCK_BIN" run --ttl 10s bg-read -- sh -c '` + readerScript + `' &`)
	pgid, _ := strconv.Atoi(tp.expect(`pgid=(\d+)$`, 10*time.Second)[1])
	waitState(t, pgid, 'T', false, 5*time.Second)
	dlockPid := parentPid(t, pgid)
	waitState(t, dlockPid, 'T', false, 5*time.Second)
	// The shell sees the job stopped and gets the terminal back; fg gives
	// it to dlock's group and sends SIGCONT.
	tp.typeLine("fg")
	waitState(t, pgid, 'T', true, 5*time.Second)
	tp.typeLine("hello")
	tp.expect(`read:hello$`, 10*time.Second)
	tp.typeLine("echo status=$?")
	tp.expect(`status=0$`, 10*time.Second)
}

// parentPid is pid's parent, from /proc.
func parentPid(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		t.Fatal(err)
	}
	return ppid
}
