//go:build unix

package serverproc

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// reapTimeout bounds how long killTree waits for the children to be gone.
const reapTimeout = 10 * time.Second

func setGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// killTree kills the process, its group and its children with SIGKILL, as
// a crash would, and waits until they are all gone. Children may put
// themselves in process groups of their own (postgres backends call
// setsid), so a signal to the group would miss them: the process is frozen
// first, so it forks no new one, its children are found in /proc, and all
// are killed at once.
func (p *Process) killTree() {
	pid := p.cmd.Process.Pid
	_ = syscall.Kill(pid, syscall.SIGSTOP)
	kids := children(pid)
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for _, k := range kids {
		_ = syscall.Kill(k, syscall.SIGKILL)
	}
	<-p.done
	waitGone(kids, reapTimeout)
}

// children returns the pids whose parent is pid, from /proc (Linux; empty
// elsewhere, where only the process group is killed).
func children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var kids []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, _, ok := procStat(child); ok && ppid == pid {
			kids = append(kids, child)
		}
	}
	return kids
}

// procStat returns a process's parent pid and state from /proc/PID/stat.
func procStat(pid int) (ppid int, state byte, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 2 || len(f[0]) != 1 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, f[0][0], err == nil
}

// waitGone waits until every pid has exited (gone, or a zombie waiting for
// its new parent to reap it), at most timeout.
func waitGone(pids []int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for _, pid := range pids {
		for {
			_, state, ok := procStat(pid)
			if !ok || state == 'Z' || time.Now().After(deadline) {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
}
