// Package serverproc runs the server processes that test helpers own
// (redis-server, postgres): it starts one, reaps it, stops or kills it and
// waits for it, and finds the free loopback ports and log tails the helpers
// need around that.
package serverproc

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Process is one started server process. Its methods are safe to call from
// any goroutine and to repeat.
type Process struct {
	cmd   *exec.Cmd
	done  chan struct{} // closed once cmd.Wait has returned
	group bool          // leader of its own process group: Kill ends its children too
}

// Start starts cmd and reaps it when it exits.
func Start(cmd *exec.Cmd) (*Process, error) {
	return start(cmd, false)
}

// StartGroup starts cmd as the leader of a process group of its own, for a
// server that forks workers: Kill then kills those too, as a crash of the
// whole server would.
func StartGroup(cmd *exec.Cmd) (*Process, error) {
	setGroup(cmd)
	return start(cmd, true)
}

func start(cmd *exec.Cmd, group bool) (*Process, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, done: make(chan struct{}), group: group}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid returns the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done returns a channel closed once the process has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// State returns how the process exited; call it only after Done is closed.
func (p *Process) State() *os.ProcessState { return p.cmd.ProcessState }

// Kill sends SIGKILL and waits for the process to exit; a group started by
// StartGroup is killed whole (see killTree).
func (p *Process) Kill() {
	if p.group {
		p.killTree()
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Stop sends sig and waits up to timeout for the process to exit before
// killing it (Kill).
func (p *Process) Stop(sig os.Signal, timeout time.Duration) {
	_ = p.cmd.Process.Signal(sig)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		p.Kill()
	}
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	addr, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.New("listener address is not TCP")
	}
	return addr.Port, nil
}

// LogTail returns the last n lines of the file at path.
func LogTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(reading log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
