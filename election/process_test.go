package election_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/election"
	"github.com/dlockio/dlock/fence/redisfence"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/internal/testkit/workerproc"
	"github.com/dlockio/dlock/redisdriver"
)

// workerEnv carries a candidate process's configuration.
const workerEnv = "ELECTION_TEST_WORKER"

type workerConfig struct {
	Name  string        `json:"name"`
	Redis string        `json:"redis"`
	TTL   time.Duration `json:"ttl"`
}

// Candidate events.
const (
	evLead    = "lead"    // won a term (Tok)
	evTry     = "try"     // about to write under the term: its context had not ended
	evAct     = "act"     // a fenced write under the term was accepted (V: the counter)
	evRefused = "refused" // a fenced write under the term was refused
	evEnded   = "ended"   // the term's context ended (Err: its cause)
)

// runWorker is a candidate process: it runs for leadership until killed,
// and while leading increments a fenced counter under its term every few
// milliseconds — checking its context before each write, as a leader
// should.
func runWorker(raw string) int {
	var cfg workerConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	emit := workerproc.Emitter(cfg.Name)
	locker, err := redisdriver.Open("redis://"+cfg.Redis, dlock.WithLogger(quiet()), dlock.WithDefaultTTL(cfg.TTL))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer locker.Close()
	rdb, err := redisdriver.ParseURL("redis://" + cfg.Redis)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer rdb.Close()
	guard, err := redisfence.New(rdb)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	e, err := election.New(locker, "leader", election.WithIdentity(cfg.Name), election.WithRetryDelay(50*time.Millisecond))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	err = e.Run(context.Background(), func(ctx context.Context, term uint64) error {
		emit(workerproc.Event{K: evLead, Tok: term})
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			if ctx.Err() != nil {
				emit(workerproc.Event{K: evEnded, Tok: term, Err: context.Cause(ctx).Error()})
				return nil
			}
			emit(workerproc.Event{K: evTry, Tok: term})
			if v, err := guard.IncrBy(context.WithoutCancel(ctx), "work", term, 1); err == nil {
				emit(workerproc.Event{K: evAct, Tok: term, V: v})
			} else {
				emit(workerproc.Event{K: evRefused, Tok: term, Err: err.Error()})
			}
			select {
			case <-ctx.Done():
			case <-t.C:
			}
		}
	})
	fmt.Fprintln(os.Stderr, "run:", err)
	return 1
}

// Real processes on a real redis-server: the leader is frozen (SIGSTOP)
// past its TTL; another process wins with a higher term; the frozen one,
// resumed, finds its context ended before it writes again — not one write
// of its old term is even attempted after it wakes (a write in flight when
// it froze may still report after).  Then the new leader is
// killed (SIGKILL) and the first wins again, with a term higher still.
func TestProcessLeaderPausedThenKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	srv := redisserver.Start(t)
	h := workerproc.New(t, workerEnv)
	cfg := func(name string) workerConfig {
		return workerConfig{Name: name, Redis: srv.Addr(), TTL: 500 * time.Millisecond}
	}
	isLead := func(w string) func(workerproc.Event) bool {
		return func(e workerproc.Event) bool { return e.W == w && e.K == evLead }
	}
	const wait = 10 * time.Second
	h.Spawn("a", cfg("a"))
	first, i, ok := h.WaitFor(0, wait, isLead("a"))
	if !ok {
		t.Fatal("a never led")
	}
	if _, _, ok := h.WaitFor(i, wait, func(e workerproc.Event) bool { return e.W == "a" && e.K == evAct }); !ok {
		t.Fatal("a never acted")
	}
	h.Spawn("b", cfg("b"))
	h.Signal("a", syscall.SIGSTOP)
	second, _, ok := h.WaitFor(i, wait, isLead("b"))
	if !ok {
		t.Fatal("b never led while a was frozen")
	}
	if second.Tok <= first.Tok {
		t.Errorf("b's term %d not above a's %d", second.Tok, first.Tok)
	}
	resumed := len(h.Events())
	h.Signal("a", syscall.SIGCONT)
	ended, _, ok := h.WaitFor(resumed, wait, func(e workerproc.Event) bool { return e.W == "a" && e.K == evEnded && e.Tok == first.Tok })
	if !ok {
		t.Fatal("a's first term never ended after it resumed")
	}
	t.Logf("a's first term ended with: %s", ended.Err)

	h.Signal("b", syscall.SIGKILL)
	third, _, ok := h.WaitFor(resumed, wait, isLead("a"))
	if !ok {
		t.Fatal("a never led again after b was killed")
	}
	if third.Tok <= second.Tok {
		t.Errorf("a's new term %d not above b's %d", third.Tok, second.Tok)
	}
	if _, _, ok := h.WaitFor(resumed, wait, func(e workerproc.Event) bool { return e.W == "a" && e.K == evAct && e.Tok == third.Tok }); !ok {
		t.Fatal("a never acted in its new term")
	}
	for _, e := range h.Events()[resumed:] {
		if e.W == "a" && e.Tok == first.Tok && e.K == evTry {
			t.Errorf("a tried to write under its old term %d after resuming: %+v", first.Tok, e)
		}
	}
	// The fenced counter's history, in the counter's own order: accepted
	// writes never go back a term. (A write of the killed process can be
	// missing: accepted, not reported.)
	byValue := map[int64]uint64{}
	for _, e := range h.Events() {
		if e.K == evAct {
			byValue[e.V] = e.Tok
		}
	}
	var last uint64
	for _, v := range slices.Sorted(maps.Keys(byValue)) {
		tok := byValue[v]
		if tok < last {
			t.Errorf("write %d under term %d accepted after one under %d", v, tok, last)
		}
		last = max(last, tok)
	}
}
