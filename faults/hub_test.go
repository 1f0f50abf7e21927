package faults

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dlockio/dlock/internal/testkit/workerproc"
)

// hub collects the events of every worker of a run, in arrival order, and
// lets the harness wait for the event that triggers its next fault.
type hub struct {
	log  workerproc.Log[event]
	live atomic.Int64 // worker processes not yet reaped
}

func newHub() *hub { return &hub{} }

func (h *hub) add(e event) { h.log.Add(e) }

func (h *hub) started() { h.live.Add(1) }

// exited records a reaped worker.
func (h *hub) exited(e event) {
	h.live.Add(-1) // before the event, which wakes waitFor to look at live
	h.log.Add(e)
}

func (h *hub) snapshot() []event { return h.log.Events() }

// waitFor returns the first event at index from or later that matches, and
// the index after it. It gives up after timeout, or once no worker is left
// to produce one.
func (h *hub) waitFor(from int, timeout time.Duration, match func(event) bool) (event, int, bool) {
	return h.log.WaitFor(from, timeout, match, func() bool { return h.live.Load() == 0 })
}

// running reports how many worker processes have not been reaped.
func (h *hub) running() int { return int(h.live.Load()) }

// proc is one worker process.
type proc struct {
	name   string
	cmd    *exec.Cmd
	stderr string // path of its stderr log
	done   chan struct{}
	killed atomic.Bool
	err    error // from Wait; read after done
}

// startWorker starts a worker process that reports to h. The process is
// killed and reaped when t ends, whatever state it is in.
func startWorker(t *testing.T, h *hub, dir string, cfg workerConfig) *proc {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{name: cfg.Name, done: make(chan struct{}), stderr: filepath.Join(dir, cfg.Name+".stderr")}
	errFile, err := os.Create(p.stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer errFile.Close()
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = append(os.Environ(), workerEnv+"="+string(raw))
	p.cmd.Stderr = errFile // a file is inherited directly: no copying goroutine
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h.started()
	go p.read(h, out)
	t.Cleanup(func() {
		p.signal(syscall.SIGKILL)
		<-p.done
	})
	return p
}

// read relays the worker's events until its stdout closes, then reaps it.
func (p *proc) read(h *hub, out io.Reader) {
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			e = event{K: evErr, W: p.name, T: now(), N: fmt.Sprintf("bad event line %q", sc.Text())}
		}
		h.add(e)
	}
	_, _ = io.Copy(io.Discard, out)
	p.err = p.cmd.Wait()
	h.exited(event{K: evExit, W: p.name, T: now()})
	close(p.done)
}

// signal sends sig unless the process has been reaped.
func (p *proc) signal(sig syscall.Signal) {
	select {
	case <-p.done:
		return
	default:
	}
	if sig == syscall.SIGKILL {
		p.killed.Store(true)
	}
	_ = p.cmd.Process.Signal(sig)
}

// stderrTail returns the end of the worker's stderr.
func (p *proc) stderrTail() string {
	b, err := os.ReadFile(p.stderr)
	if err != nil {
		return err.Error()
	}
	const max = 3000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}
