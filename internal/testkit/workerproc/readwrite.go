package workerproc

import (
	"syscall"
	"time"
)

// The fenced read-modify-write protocol that the fence fault tests' workers
// follow, one iteration after another (Event.I):
//
//	read   the worker read the resource; a pause lands before its write
//	commit the write was accepted; Lost says whether the lease had ended
//	stale  the write was refused as stale; Lost as above
//	err    a call failed (the store restarting, say); the iteration is retried
//	done   all iterations attempted

// Kind returns a matcher for events of kind k.
func Kind(k string) func(Event) bool {
	return func(e Event) bool { return e.K == k }
}

// Iterate is a worker's loop: it runs step for iteration i until step
// reports the iteration ended (accepted or refused), emitting err for each
// failed attempt and pausing a moment (the store may be restarting), and
// gives up after 20 attempts per iteration; it emits done at the end.
func Iterate(emit func(Event), iters int, step func(i int) (ended bool, err error)) {
	for i, attempts := 0, 0; i < iters && attempts < 20*iters; attempts++ {
		ended, err := step(i)
		if err != nil {
			emit(Event{K: "err", I: i, Err: err.Error()})
			time.Sleep(20 * time.Millisecond) // retry backoff, not synchronisation
		}
		if ended {
			i++
		}
	}
	emit(Event{K: "done"})
}

// PauseAfterRead stops a worker right after its read (SIGSTOP), for as long
// as it takes another worker to commit, then lets it write (SIGCONT), until
// faults pauses took effect. It returns how many of the paused writes came
// after a rival's commit and how many of those were refused as stale. A
// pause lands only if the stop arrives before the worker's write (a loaded
// machine may be slower than the work), so it tries up to 3*faults times.
// It fails the test when no rival commits or the paused worker never
// finishes its write within patience.
func (h *Harness) PauseAfterRead(faults int, patience time.Duration) (effective, refused int) {
	h.t.Helper()
	from := 0
	for tries := 0; effective < faults && tries < 3*faults; tries++ {
		read, next, ok := h.WaitFor(from, patience, Kind("read"))
		if !ok {
			break // the workers are done; the caller checks what landed
		}
		h.Signal(read.W, syscall.SIGSTOP)
		_, rival, ok := h.WaitFor(next, patience, func(e Event) bool { return e.K == "commit" && e.W != read.W })
		h.Signal(read.W, syscall.SIGCONT)
		if !ok {
			h.t.Fatalf("no other worker committed while %s was stopped", read.W)
		}
		out, after, ok := h.WaitFor(next, patience, func(e Event) bool {
			return e.W == read.W && e.I == read.I && (e.K == "stale" || e.K == "commit" || e.K == "err")
		})
		if !ok {
			h.t.Fatalf("%s never finished its write after the pause", read.W)
		}
		if after > rival { // the paused write came after the rival's commit
			effective++
			if out.K == "stale" {
				refused++
			}
		}
		from = after
	}
	return effective, refused
}

// Reports counts what the workers reported, against what the store holds.
type Reports struct {
	Acked        int // commits reported
	AckedMissing int // reported commits the store does not hold
	Refused      int // writes refused as stale
	RefusedLost  int // of which by a holder that knew its lease had ended
}

// Tally counts the workers' commit and stale reports so far; stored says
// whether the store holds worker's write of iteration i.
func (h *Harness) Tally(stored func(worker string, i int) bool) Reports {
	var r Reports
	for _, e := range h.Events() {
		switch e.K {
		case "commit":
			r.Acked++
			if !stored(e.W, e.I) {
				r.AckedMissing++
			}
		case "stale":
			r.Refused++
			if e.Lost {
				r.RefusedLost++
			}
		}
	}
	return r
}
