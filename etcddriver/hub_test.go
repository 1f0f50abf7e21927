package etcddriver

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlockio/dlock/internal/testkit/workerproc"
)

// hub collects the events of every worker of a fault test.
type hub struct{ log workerproc.Log[event] }

func newHub() *hub { return &hub{} }

func (h *hub) add(e event) { h.log.Add(e) }

func (h *hub) snapshot() []event { return h.log.Events() }

// waitFor waits up to timeout for an event at index from or later that
// matches, and returns it with the index after it.
func (h *hub) waitFor(from int, timeout time.Duration, match func(event) bool) (event, int, bool) {
	return h.log.WaitFor(from, timeout, match, nil)
}

// proc is one worker process.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

func startWorker(t *testing.T, h *hub, cfg workerConfig) *proc {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), workerEnv+"="+string(raw))
	cmd.Stderr = &strings.Builder{}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{name: cfg.Name, cmd: cmd, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var e event
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				h.add(e)
			}
		}
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.signal(syscall.SIGCONT); p.kill() })
	return p
}

func (p *proc) signal(sig syscall.Signal) { _ = p.cmd.Process.Signal(sig) }

func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}
