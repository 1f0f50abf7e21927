package memdriver_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/memdriver"
)

var errDown = errors.New("store down")

func TestFaultBeforeChangesNothing(t *testing.T) {
	f := newFixture(t)
	f.d.SetFault(func(context.Context, string) error { return errDown })
	_, err := f.d.Acquire(f.ctx, driver.AcquireRequest{Key: "k", ID: "a", TTL: time.Second})
	if !errors.Is(err, errDown) {
		t.Fatalf("Acquire under a fault: %v, want the fault's error", err)
	}
	f.d.SetFault(nil)
	if res := f.acquire("k", "b", time.Second); !res.Acquired || res.Token != 1 {
		t.Fatalf("after a failed Acquire: %+v, want acquired with the first token", res)
	}
}

func TestFaultAfterLosesReply(t *testing.T) {
	f := newFixture(t)
	f.d.SetFaultAfter(func(context.Context, string) error { return errDown })
	_, err := f.d.Acquire(f.ctx, driver.AcquireRequest{Key: "k", ID: "a", TTL: time.Second})
	if !errors.Is(err, errDown) {
		t.Fatalf("Acquire with a lost reply: %v, want the fault's error", err)
	}
	_, err = f.d.Release(f.ctx, []driver.ReleaseRequest{{Key: "k", ID: "a"}})
	if !errors.Is(err, errDown) {
		t.Fatalf("Release with a lost reply: %v, want the fault's error", err)
	}
	f.d.SetFaultAfter(nil)
	if got := f.release("k", "a"); got != driver.AlreadyReleased {
		t.Fatalf("retried release = %v, want AlreadyReleased (the first one was applied)", got)
	}
	if res := f.acquire("k", "b", time.Second); !res.Acquired || res.Token != 2 {
		t.Fatalf("next Acquire: %+v, want acquired with token 2 (the lost one used 1)", res)
	}
}

func TestFaultAfterRetryGetsSameToken(t *testing.T) {
	f := newFixture(t)
	var once sync.Once
	f.d.SetFaultAfter(func(_ context.Context, op string) error {
		err := error(nil)
		once.Do(func() { err = errDown })
		return err
	})
	req := driver.AcquireRequest{Key: "k", ID: "a", TTL: time.Second}
	if _, err := f.d.Acquire(f.ctx, req); !errors.Is(err, errDown) {
		t.Fatalf("first try: %v, want the fault's error", err)
	}
	res, err := f.d.Acquire(f.ctx, req)
	if err != nil || !res.Acquired || res.Token != 1 {
		t.Fatalf("retry: %+v, %v; want acquired with token 1", res, err)
	}
}

func TestSlowFaultHonoursContext(t *testing.T) {
	f := newFixture(t)
	f.d.SetFault(func(ctx context.Context, _ string) error {
		<-ctx.Done()
		return nil // the store answers, but too late
	})
	ctx, cancel := context.WithTimeout(f.ctx, 20*time.Millisecond)
	defer cancel()
	_, err := f.d.Acquire(ctx, driver.AcquireRequest{Key: "k", ID: "a", TTL: time.Second})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire on a stalled store: %v, want context.DeadlineExceeded", err)
	}
	f.d.SetFault(nil)
	if res := f.acquire("k", "b", time.Second); !res.Acquired {
		t.Fatal("the stalled Acquire took the lock")
	}
}

func TestDoneContext(t *testing.T) {
	f := newFixture(t)
	called := false
	f.d.SetFault(func(context.Context, string) error { called = true; return nil })
	ctx, cancel := context.WithCancel(f.ctx)
	cancel()
	if _, err := f.d.Acquire(ctx, driver.AcquireRequest{Key: "k", ID: "a", TTL: time.Second}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with a cancelled ctx: %v", err)
	}
	if called {
		t.Error("the fault hook was called for a ctx already done")
	}
}

func TestFaultOps(t *testing.T) {
	f := newFixture(t)
	var mu sync.Mutex
	var before, after []string
	record := func(to *[]string) memdriver.Fault {
		return func(_ context.Context, op string) error {
			mu.Lock()
			*to = append(*to, op)
			mu.Unlock()
			return nil
		}
	}
	f.d.SetFault(record(&before))
	f.d.SetFaultAfter(record(&after))
	f.acquire("k", "a", time.Second)
	f.renew("k", "a", time.Second)
	f.release("k", "a")
	w, err := f.d.Watch(func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(f.ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if err := w.Remove(f.ctx, "k"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	f.d.Inspect(f.ctx, "k")
	f.d.List(f.ctx, "")
	f.d.ForceRelease(f.ctx, "k")
	f.d.Capabilities()
	want := []string{
		memdriver.OpAcquire, memdriver.OpRenew, memdriver.OpRelease, memdriver.OpWatch, memdriver.OpWatchAdd,
		memdriver.OpWatchRemove, memdriver.OpInspect, memdriver.OpList, memdriver.OpForceRelease,
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(before, want) || !slices.Equal(after, want) {
		t.Errorf("ops seen before %q and after %q, want %q for both", before, after, want)
	}
}

func TestFaultAfterWatchClosesWatcher(t *testing.T) {
	f := newFixture(t)
	f.d.SetFaultAfter(func(context.Context, string) error { return errDown })
	if w, err := f.d.Watch(func(string) {}); !errors.Is(err, errDown) || w != nil {
		t.Fatalf("Watch with a lost reply: %v, %v; want no Watcher and the fault's error", w, err)
	}
	// goleak in TestMain checks that its goroutine is gone.
}

func TestFaultPerHandle(t *testing.T) {
	f := newFixture(t)
	other := f.d.Connect()
	defer other.Close()
	other.SetFault(func(context.Context, string) error { return errDown })
	if _, err := other.Acquire(f.ctx, driver.AcquireRequest{Key: "k", ID: "a", TTL: time.Second}); !errors.Is(err, errDown) {
		t.Fatalf("faulted handle: %v", err)
	}
	if res := f.acquire("k", "b", time.Second); !res.Acquired {
		t.Fatal("a fault on one handle affected another")
	}
}
