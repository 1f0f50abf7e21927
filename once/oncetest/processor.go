package oncetest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/memdriver"
	"github.com/dlockio/dlock/once"
)

// processor returns a Processor on the subtest's store, with locks from
// an in-memory driver (the lock backend is not what this suite checks).
func (e *env) processor(locks *dlock.Client, opts ...once.Option) *once.Processor {
	e.t.Helper()
	if locks == nil {
		locks = e.locks()
	}
	p, err := once.New(locks, e.s, opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *env) locks() *dlock.Client {
	e.t.Helper()
	c, err := dlock.New(memdriver.New(), dlock.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	return c
}

// Concurrent duplicates run the function once: with the default they all
// wait and get the stored result; DuplicatesReplay answers a running
// duplicate with ErrInProgress, a completed one with the result;
// DuplicatesReject answers both with errors.
func testProcessorDuplicates(t *testing.T, h Harness) {
	e := newEnv(t, h)
	locks := e.locks()
	p := e.processor(locks)
	k := e.key("k")
	var runs atomic.Int64
	release := make(chan struct{})
	entered := make(chan struct{})
	fn := func(ctx context.Context, token uint64) ([]byte, error) {
		if runs.Add(1) == 1 {
			close(entered)
		}
		<-release
		return []byte("shipped"), nil
	}
	const n = 8
	results := make([]once.Result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	wg.Go(func() { results[0], errs[0] = p.Do(e.ctx(), k, []byte("order"), fn) })
	<-entered
	for i := 1; i < n; i++ {
		wg.Go(func() { results[i], errs[i] = p.Do(e.ctx(), k, []byte("order"), fn) })
	}

	// While the first runs, non-waiting processors see it in progress.
	replay := e.processor(locks, once.WithDuplicates(once.DuplicatesReplay))
	if _, err := replay.Do(e.ctx(), k, []byte("order"), fn); !errors.Is(err, once.ErrInProgress) {
		t.Errorf("DuplicatesReplay while running: %v, want ErrInProgress", err)
	}
	reject := e.processor(locks, once.WithDuplicates(once.DuplicatesReject))
	if _, err := reject.Do(e.ctx(), k, []byte("order"), fn); !errors.Is(err, once.ErrInProgress) {
		t.Errorf("DuplicatesReject while running: %v, want ErrInProgress", err)
	}
	close(release)
	wg.Wait()
	fresh := 0
	for i := range n {
		if errs[i] != nil || string(results[i].Value) != "shipped" {
			t.Errorf("delivery %d: %q, %v", i, results[i].Value, errs[i])
		}
		if !results[i].Replayed {
			fresh++
		}
	}
	if got := runs.Load(); got != 1 || fresh != 1 {
		t.Fatalf("function ran %d times, %d results not replayed; want 1 and 1", got, fresh)
	}
	if r, err := replay.Do(e.ctx(), k, []byte("order"), fn); err != nil || !r.Replayed || string(r.Value) != "shipped" {
		t.Errorf("DuplicatesReplay after completion: %+v, %v", r, err)
	}
	if r, err := reject.Do(e.ctx(), k, []byte("order"), fn); !errors.Is(err, once.ErrAlreadyCompleted) || string(r.Value) != "shipped" {
		t.Errorf("DuplicatesReject after completion: %+v, %v, want ErrAlreadyCompleted with the stored value", r, err)
	}
	if runs.Load() != 1 {
		t.Fatalf("function ran %d times", runs.Load())
	}
}

// A key reused with another payload is refused without running anything.
func testProcessorMismatch(t *testing.T, h Harness) {
	e := newEnv(t, h)
	p := e.processor(nil)
	k := e.key("k")
	ok := func(context.Context, uint64) ([]byte, error) { return []byte("r"), nil }
	if _, err := p.Do(e.ctx(), k, []byte("amount=10"), ok); err != nil {
		t.Fatal(err)
	}
	ran := false
	_, err := p.Do(e.ctx(), k, []byte("amount=1000"), func(context.Context, uint64) ([]byte, error) { ran = true; return nil, nil })
	if !errors.Is(err, once.ErrPayloadMismatch) || ran {
		t.Fatalf("reused key, other payload: %v (ran: %v), want ErrPayloadMismatch and no run", err, ran)
	}
}

// A failing function leaves a Failed record; the next delivery runs it
// again and completes.
func testProcessorFailure(t *testing.T, h Harness) {
	e := newEnv(t, h)
	p := e.processor(nil)
	k := e.key("k")
	boom := errors.New("payment gateway down")
	if _, err := p.Do(e.ctx(), k, nil, func(context.Context, uint64) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("Do of a failing function: %v, want its error", err)
	}
	rec, found, err := p.Get(e.ctx(), k)
	if err != nil || !found || rec.State != once.Failed {
		t.Fatalf("record after failure: %s found=%v %v", describe(rec), found, err)
	}
	r, err := p.Do(e.ctx(), k, nil, func(context.Context, uint64) ([]byte, error) { return []byte("paid"), nil })
	if err != nil || r.Replayed || string(r.Value) != "paid" || r.Token <= rec.Token {
		t.Fatalf("retry after failure: %+v, %v (failed token %d)", r, err, rec.Token)
	}
}

// A worker whose lease ends while it works sees its ctx end; a second
// worker takes the key over with a higher token and completes; the first
// worker's late result is refused and the second's stands.
func testProcessorLostLease(t *testing.T, h Harness) {
	e := newEnv(t, h)
	locks := e.locks()
	k := e.key("k")
	slow := e.processor(locks, once.WithLockOptions(dlock.WithTTL(200*time.Millisecond), dlock.WithoutWatchdog()))
	fast := e.processor(locks)
	var first uint64
	expired := make(chan struct{})
	secondDone := make(chan struct{})
	var cause error
	go func() {
		defer close(secondDone)
		<-expired
		r, err := fast.Do(e.ctx(), k, []byte("p"), func(ctx context.Context, token uint64) ([]byte, error) {
			return []byte("second"), nil
		})
		if err != nil || r.Replayed || r.Token <= first {
			t.Errorf("second worker: %+v, %v (first token %d)", r, err, first)
		}
	}()
	_, err := slow.Do(e.ctx(), k, []byte("p"), func(ctx context.Context, token uint64) ([]byte, error) {
		first = token
		<-ctx.Done()
		cause = context.Cause(ctx)
		close(expired)
		<-secondDone
		return []byte("first"), nil
	})
	if !errors.Is(err, once.ErrClaimLost) {
		t.Fatalf("first worker after losing its lease: %v, want ErrClaimLost", err)
	}
	if !errors.Is(cause, dlock.ErrLockLost) {
		t.Errorf("first worker's ctx ended with %v, want dlock.ErrLockLost", cause)
	}
	rec, _, _ := slow.Get(e.ctx(), k)
	if rec.State != once.Completed || string(rec.Result) != "second" {
		t.Fatalf("record = %s, want the second worker's result", describe(rec))
	}
}
