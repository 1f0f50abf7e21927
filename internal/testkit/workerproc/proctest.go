// Package workerproc runs worker processes for fault tests: the test binary
// itself, re-executed with a configuration in an environment variable (its
// TestMain runs the worker instead of the tests), so the harness can freeze
// it with SIGSTOP and kill it with SIGKILL like a real service. Workers
// report what they do as JSON lines on stdout (Emitter); the harness waits
// for those events (WaitFor) to time its faults, and may hold a worker
// until it writes a line to the worker's standard input (Send).
package workerproc

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Event is one line a worker reports. K says what happened; the other
// fields are the worker's to fill.
type Event struct {
	K    string `json:"k"`
	W    string `json:"w"`             // the worker's name, set by Emitter
	I    int    `json:"i"`             // iteration
	Tok  uint64 `json:"tok,omitempty"` // fencing token
	V    int64  `json:"v,omitempty"`
	Lost bool   `json:"lost,omitempty"` // the worker's lease had ended
	Err  string `json:"err,omitempty"`
	// Key names what the event is about (a job, an order), Replayed says
	// that a result was an earlier one's.
	Key      string `json:"key,omitempty"`
	Replayed bool   `json:"replayed,omitempty"`
}

// Emitter returns the function a worker reports with: one JSON line per
// event on stdout, tagged with name.
func Emitter(name string) func(Event) {
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout) // unbuffered: one write per line
	return func(e Event) {
		e.W = name
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(e)
	}
}

// Harness starts workers and collects their events. Its methods belong on
// the test's goroutine.
type Harness struct {
	t   testing.TB
	env string

	log     Log[Event]
	mu      sync.Mutex
	procs   map[string]*proc
	spawned int
	readers sync.WaitGroup
}

type proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // closed once the process is reaped
}

// New returns a Harness whose workers get their configuration in the
// environment variable env. Every worker still running when the test ends
// is killed.
func New(t testing.TB, env string) *Harness {
	h := &Harness{t: t, env: env, procs: map[string]*proc{}}
	t.Cleanup(h.KillAll)
	return h
}

// NextName returns a fresh worker name: w1, w2, ...
func (h *Harness) NextName() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.spawned++
	return fmt.Sprintf("w%d", h.spawned)
}

// Spawn starts a worker named name with cfg (JSON-encoded into the
// environment variable).
func (h *Harness) Spawn(name string, cfg any) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), h.env+"="+string(raw))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		h.t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		h.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	p := &proc{cmd: cmd, stdin: in, done: make(chan struct{})}
	h.mu.Lock()
	h.procs[name] = p
	h.mu.Unlock()
	h.readers.Go(func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var e Event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				h.t.Errorf("worker %s printed %q", name, sc.Text())
				continue
			}
			h.log.Add(e)
		}
		_ = cmd.Wait()
		close(p.done)
	})
}

// WaitFor returns the first event at index from or later that matches, and
// the index after it; ok is false when timeout passes first.
func (h *Harness) WaitFor(from int, timeout time.Duration, match func(Event) bool) (e Event, next int, ok bool) {
	return h.log.WaitFor(from, timeout, match, nil)
}

// Events returns every event so far, in arrival order.
func (h *Harness) Events() []Event { return h.log.Events() }

// Signal sends sig to worker name (nothing if it has exited); for SIGKILL
// it waits until the process is reaped.
func (h *Harness) Signal(name string, sig syscall.Signal) {
	h.mu.Lock()
	p := h.procs[name]
	h.mu.Unlock()
	if p == nil {
		h.t.Fatalf("workerproc: no worker %q", name)
		return
	}
	// A worker that has already exited is not an error: the harness may
	// react to an event after the worker went on and finished.
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		h.t.Errorf("workerproc: signal %v to %s: %v", sig, name, err)
	}
	if sig == syscall.SIGKILL {
		<-p.done
	}
}

// Send writes line and a newline to worker name's standard input: a
// worker can wait for it to let the harness choose when it goes on.
func (h *Harness) Send(name, line string) {
	h.mu.Lock()
	p := h.procs[name]
	h.mu.Unlock()
	if p == nil {
		h.t.Fatalf("workerproc: no worker %q", name)
		return
	}
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		h.t.Errorf("workerproc: writing to %s: %v", name, err)
	}
}

// Await waits for every worker to exit and their output to be read; after
// timeout it fails the test and kills them.
func (h *Harness) Await(timeout time.Duration) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for _, p := range h.snapshot() {
		select {
		case <-p.done:
		case <-deadline.C:
			h.t.Error("workerproc: workers did not finish in time")
			h.KillAll()
			return
		}
	}
	h.readers.Wait()
}

// KillAll kills every worker (resuming stopped ones first, so that they
// can die) and waits for them.
func (h *Harness) KillAll() {
	for _, p := range h.snapshot() {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	h.readers.Wait()
}

func (h *Harness) snapshot() []*proc {
	h.mu.Lock()
	defer h.mu.Unlock()
	ps := make([]*proc, 0, len(h.procs))
	for _, p := range h.procs {
		ps = append(ps, p)
	}
	return ps
}
