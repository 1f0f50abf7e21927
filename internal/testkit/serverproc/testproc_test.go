//go:build unix

package serverproc

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestKillGroupReachesChildren kills a group whose children have left it
// (setsid, as postgres backends do) and checks that none survives.
func TestKillGroupReachesChildren(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid not installed")
	}
	cmd := exec.Command("sh", "-c", "setsid sleep 60 & setsid sleep 60 & echo ready; wait")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p, err := StartGroup(cmd)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len("ready\n"))
	if _, err := out.Read(buf); err != nil {
		t.Fatal(err)
	}
	var kids []int
	for deadline := time.Now().Add(5 * time.Second); len(kids) < 2; {
		if time.Now().After(deadline) {
			p.Kill()
			t.Fatalf("children of %d: %v, want 2", p.Pid(), kids)
		}
		kids = children(p.Pid())
		time.Sleep(5 * time.Millisecond) // polling /proc: there is no signal to wait on
	}
	p.Kill()
	select {
	case <-p.Done():
	default:
		t.Fatal("Kill returned before the process exited")
	}
	for _, k := range kids {
		if _, state, ok := procStat(k); ok && state != 'Z' {
			t.Errorf("child %d still running (state %c)", k, state)
		}
	}
}

// TestStopKillsAfterTimeout stops a process that ignores the signal.
func TestStopKillsAfterTimeout(t *testing.T) {
	cmd := exec.Command("sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len("ready\n"))
	if _, err := out.Read(buf); err != nil { // the trap is set
		t.Fatal(err)
	}
	p.Stop(syscall.SIGTERM, 100*time.Millisecond)
	select {
	case <-p.Done():
	default:
		t.Fatal("Stop returned before the process exited")
	}
	ws, ok := p.State().Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("process ended with %v, want killed by SIGKILL", p.State())
	}
}
