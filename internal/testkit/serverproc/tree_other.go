//go:build !unix

package serverproc

import "os/exec"

// setGroup does nothing where there are no process groups.
func setGroup(*exec.Cmd) {}

// killTree kills the process alone where there are no process groups.
func (p *Process) killTree() {
	_ = p.cmd.Process.Kill()
	<-p.done
}
