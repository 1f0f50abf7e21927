package dlock_test

// The read-write lock against a real redis-server. A "dead" client is one
// whose proxy black-holes its traffic: it neither renews nor releases, as a
// killed process; the kill -9 and SIGSTOP cases with real processes are in
// the faults package.

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
)

// A writer gets in under a steady stream of readers, and no reader that
// arrived after it was queued overtakes it.
func TestRedisRWMutexNoWriterStarvation(t *testing.T) {
	srv := redisserver.Start(t)
	readers, writer := leasecheck.NewLocker(t, srv.Addr()), leasecheck.NewLocker(t, srv.Addr())
	ctx := leasecheck.Context(t, 30*time.Second)
	const name = "catalog"

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads atomic.Int64
	type grant struct {
		called time.Time
		token  uint64
	}
	var mu sync.Mutex
	var grants []grant
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := readers.RWMutex(name)
			for {
				select {
				case <-stop:
					return
				default:
				}
				called := time.Now()
				r, err := m.RLock(ctx)
				if err != nil {
					t.Errorf("reader: %v", err)
					return
				}
				mu.Lock()
				grants = append(grants, grant{called, r.Token()})
				mu.Unlock()
				reads.Add(1)
				time.Sleep(5 * time.Millisecond) // the reader's work
				if err := r.Unlock(ctx); err != nil {
					t.Errorf("reader unlock: %v", err)
					return
				}
			}
		}()
	}
	// The readers overlap all the time from here on.
	for reads.Load() < 50 {
		select {
		case <-ctx.Done():
			t.Fatal("readers did not get going")
		case <-time.After(time.Millisecond):
		}
	}
	queuedBy := make(chan time.Time, 1)
	granted := make(chan struct{})
	var watchers sync.WaitGroup
	watchers.Add(1)
	go func() {
		defer watchers.Done()
		// The moment the store shows the writer queued: every reader that
		// called RLock after it must come after the writer.
		for {
			q, _, err := writer.InspectQueue(ctx, name)
			if err != nil {
				t.Error(err)
				return
			}
			for _, w := range q.Waiters {
				if w.Mode == driver.ModeExclusive {
					queuedBy <- time.Now()
					return
				}
			}
			select {
			case <-granted:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	start := time.Now()
	w, err := writer.RWMutex(name).Lock(ctx)
	close(granted)
	watchers.Wait()
	if err != nil {
		t.Fatal(err)
	}
	waited := time.Since(start)
	before := reads.Load()
	time.Sleep(20 * time.Millisecond) // hold the write lock while readers keep asking
	if reads.Load() != before {
		t.Fatalf("%d reads granted while the write lock was held", reads.Load()-before)
	}
	leasecheck.Unlock(t, w)
	close(stop)
	wg.Wait()
	if waited > 2*time.Second {
		t.Fatalf("writer waited %v under a stream of 5 ms readers", waited)
	}
	var queuedAt time.Time
	select {
	case queuedAt = <-queuedBy:
	default:
		t.Log("the writer was granted before InspectQueue saw it queued")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, g := range grants {
		if !queuedAt.IsZero() && g.called.After(queuedAt) && g.token < w.Token() {
			t.Fatalf("a reader that called RLock after the writer was queued got token %d, below the writer's %d: it overtook the writer", g.token, w.Token())
		}
	}
	t.Logf("writer waited %v; %d reads in all", waited, reads.Load())
}

// A dead reader's share is reclaimed within one TTL; the other reader's
// lease is untouched, and the writer enters once that one is released.
func TestRedisRWMutexDeadReaderReclaimed(t *testing.T) {
	const ttl, liveTTL = 400 * time.Millisecond, 3 * time.Second
	srv := redisserver.Start(t)
	px := redisserver.NewProxy(t, srv.Addr())
	dead, live, writer := leasecheck.NewLocker(t, px.Addr()), leasecheck.NewLocker(t, srv.Addr()), leasecheck.NewLocker(t, srv.Addr())
	// Runs before the dead Client's Close, which then need not time out.
	t.Cleanup(func() { px.Blackhole(false); px.CloseAll() })
	ctx := leasecheck.Context(t, 20*time.Second)
	const name = "dead-reader"

	rd := leasecheck.Got(t)(dead.RWMutex(name).RLock(ctx, dlock.WithTTL(ttl)))
	// A longer TTL for the live reader, so that a loaded machine's late
	// renewal cannot pass for the reclaim being wrong.
	rl := leasecheck.Got(t)(live.RWMutex(name).RLock(ctx, dlock.WithTTL(liveTTL)))
	px.Blackhole(true)
	died := time.Now()
	for {
		q, _, err := writer.InspectQueue(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if len(q.Holders) == 1 {
			if q.Holders[0].Token != rl.Token() || q.Holders[0].Mode != driver.ModeShared {
				t.Fatalf("left holder %+v, want the live reader", q.Holders[0])
			}
			break
		}
		if time.Since(died) > ttl+300*time.Millisecond {
			t.Fatalf("dead reader still holds %v after it died (TTL %v): %+v", time.Since(died), ttl, q.Holders)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if rl.Err() != nil {
		t.Fatalf("live reader ended with the dead one: %v", rl.Err())
	}
	leasecheck.WaitDone(t, rd, ttl)
	if !errors.Is(rd.Err(), dlock.ErrLockLost) {
		t.Fatalf("dead reader's lease: %v, want ErrLockLost", rd.Err())
	}
	wch := leasecheck.Acquired(t, func() (*dlock.Lease, error) { return writer.RWMutex(name).Lock(ctx) })
	leasecheck.NotYet(t, wch, "writer while a reader holds")
	leasecheck.Unlock(t, rl)
	leasecheck.Unlock(t, leasecheck.Receive(t, wch, "writer"))
}
