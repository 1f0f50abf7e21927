package fence_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/fence"
)

func TestMemoryRejectsLowerTokens(t *testing.T) {
	ctx := context.Background()
	g := fence.NewMemory()
	var writes []fence.Token
	write := func(tok fence.Token) error {
		return g.Apply(ctx, "order:42", tok, func(context.Context) error { writes = append(writes, tok); return nil })
	}
	for _, tok := range []fence.Token{3, 3, 7} {
		if err := write(tok); err != nil {
			t.Fatalf("token %d: %v", tok, err)
		}
	}
	err := write(5)
	var stale *fence.StaleTokenError
	if !errors.Is(err, fence.ErrStaleToken) || !errors.As(err, &stale) ||
		*stale != (fence.StaleTokenError{Resource: "order:42", Token: 5, Highest: 7}) {
		t.Fatalf("token 5 after 7: %v", err)
	}
	if len(writes) != 3 {
		t.Fatalf("writes %v: the stale write ran", writes)
	}
	// Another resource has its own mark.
	if err := g.Advance(ctx, "order:43", 1); err != nil {
		t.Fatal(err)
	}
	if h, _ := g.Highest(ctx, "order:42"); h != 7 {
		t.Fatalf("highest %d, want 7", h)
	}
}

func TestMemoryFailedWriteKeepsMark(t *testing.T) {
	ctx := context.Background()
	g := fence.NewMemory()
	boom := errors.New("boom")
	if err := g.Apply(ctx, "r", 9, func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("write error: %v", err)
	}
	if err := g.Advance(ctx, "r", 2); err != nil {
		t.Fatalf("a failed write must not raise the mark: %v", err)
	}
}

func TestMemoryBadInput(t *testing.T) {
	g := fence.NewMemory()
	noop := func(context.Context) error { return nil }
	//lint:ignore SA1012 a nil context is the bad input under test
	if err := g.Apply(nil, "r", 1, noop); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("nil ctx: %v", err)
	}
	if err := g.Apply(context.Background(), "", 1, noop); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("empty resource: %v", err)
	}
	if err := g.Apply(context.Background(), "r", 1, nil); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("nil write: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	if err := g.Apply(ctx, "r", 1, func(context.Context) error { called = true; return nil }); !errors.Is(err, context.Canceled) || called {
		t.Errorf("done ctx: %v, write called %v", err, called)
	}
}

// TestMemoryWaitHonoursContext: a write waiting behind another on the same
// resource gives up with its ctx; a write to another resource does not wait.
func TestMemoryWaitHonoursContext(t *testing.T) {
	g := fence.NewMemory()
	inside, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- g.Apply(context.Background(), "r", 1, func(context.Context) error {
			close(inside)
			<-release
			return nil
		})
	}()
	<-inside
	if err := g.Advance(context.Background(), "other", 1); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := g.Advance(ctx, "r", 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting write: %v", err)
	}
	// A ctx ended with a cause of its own matches ctx.Err() and the cause.
	caused, stop := context.WithCancelCause(context.Background())
	stop(dlock.ErrLockLost)
	if err := g.Advance(caused, "r", 2); !errors.Is(err, context.Canceled) || !errors.Is(err, dlock.ErrLockLost) {
		t.Errorf("ctx cancelled with a cause: %v, want it to match context.Canceled and the cause", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestMemoryRace: concurrent read-modify-writes through the guard, tokens
// interleaved: every accepted write saw the value left by the previous
// accepted one (none lost), and accepted tokens never go down.
func TestMemoryRace(t *testing.T) {
	ctx := context.Background()
	g := fence.NewMemory()
	var (
		counter  int // written only inside Apply
		last     fence.Token
		wg       sync.WaitGroup
		mu       sync.Mutex
		accepted int
	)
	const workers, per = 8, 200
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				tok := fence.Token(i*workers + (w*5)%workers)
				err := g.Apply(ctx, "counter", tok, func(context.Context) error {
					if tok < last {
						t.Errorf("token %d accepted after %d", tok, last)
					}
					last = tok
					counter++
					return nil
				})
				if err != nil && !errors.Is(err, fence.ErrStaleToken) {
					t.Error(err)
				}
				if err == nil {
					mu.Lock()
					accepted++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if counter != accepted || accepted == workers*per {
		t.Fatalf("counter %d, accepted %d of %d: want equal, and some refused", counter, accepted, workers*per)
	}
}
