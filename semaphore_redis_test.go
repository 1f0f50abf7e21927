package dlock_test

// The semaphore against a real redis-server. A "dead" client is one whose
// proxy black-holes its traffic: it neither renews nor releases, as a killed
// process; the kill -9 and SIGSTOP cases with real processes are in the
// faults package.

import (
	"errors"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
)

func TestRedisSemaphoreServesInArrivalOrder(t *testing.T) {
	srv := redisserver.Start(t)
	semaphoreServesInArrivalOrder(t, leasecheck.NewLocker(t, srv.Addr()))
}

// A dead permit holder's permit comes back within one TTL, and N+1
// holders never coexist meanwhile.
func TestRedisSemaphoreDeadHolderReclaimed(t *testing.T) {
	const ttl, liveTTL = 400 * time.Millisecond, 3 * time.Second
	srv := redisserver.Start(t)
	px := redisserver.NewProxy(t, srv.Addr())
	dead, live := leasecheck.NewLocker(t, px.Addr()), leasecheck.NewLocker(t, srv.Addr())
	// Runs before the dead Client's Close, which then need not time out.
	t.Cleanup(func() { px.Blackhole(false); px.CloseAll() })
	ctx := leasecheck.Context(t, 20*time.Second)
	const name = "pool"
	p1 := leasecheck.Got(t)(dead.Semaphore(name, 2).Acquire(ctx, dlock.WithTTL(ttl)))
	p2 := leasecheck.Got(t)(live.Semaphore(name, 2).Acquire(ctx, dlock.WithTTL(liveTTL)))
	if p1.ID() == p2.ID() {
		t.Fatalf("two permits share id %q", p1.ID())
	}
	if _, err := live.Semaphore(name, 2).TryAcquire(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("third permit of 2: %v", err)
	}
	px.Blackhole(true)
	died := time.Now()
	p3, err := live.Semaphore(name, 2).Acquire(ctx, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(died)
	if took > ttl+300*time.Millisecond {
		t.Fatalf("permit reclaimed %v after its holder died, TTL %v", took, ttl)
	}
	if p1.Err() == nil {
		t.Fatal("a third permit was granted while the dead holder's lease was still valid")
	}
	if p2.Err() != nil {
		t.Fatalf("the live permit ended: %v", p2.Err())
	}
	t.Logf("reclaimed after %v (TTL %v)", took, ttl)
	leasecheck.Unlock(t, p2)
	leasecheck.Unlock(t, p3)
	q, ok, err := live.InspectQueue(ctx, name)
	if err != nil || ok {
		t.Fatalf("after every release: %+v ok=%v err=%v, want nothing left", q, ok, err)
	}
}

// A Redis restart that loses no acknowledged write keeps every permit:
// N+1 holders never coexist, and the holders' renewals keep working. Two
// such restarts: SIGKILL with an append-only file synced on every write,
// and a clean shutdown (SIGTERM) with one synced every second, which
// Redis flushes before it exits.
func TestRedisSemaphoreSurvivesRestart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fsync string
		stop  func(*redisserver.Server)
	}{
		{"kill-fsync-always", "always", (*redisserver.Server).Kill},
		{"shutdown-fsync-everysec", "everysec", (*redisserver.Server).Stop},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const ttl = 1500 * time.Millisecond
			srv := redisserver.Start(t, redisserver.WithArgs("--appendonly", "yes", "--appendfsync", tc.fsync))
			a, b := leasecheck.NewLocker(t, srv.Addr()), leasecheck.NewLocker(t, srv.Addr())
			ctx := leasecheck.Context(t, 30*time.Second)
			const name = "restart-pool"
			var held []*dlock.Lease
			for range 3 {
				held = append(held, leasecheck.Got(t)(a.Semaphore(name, 3).Acquire(ctx, dlock.WithTTL(ttl))))
			}
			tc.stop(srv)
			srv.Restart()
			for range 3 { // several renewal rounds after the restart
				if _, err := b.Semaphore(name, 3).TryAcquire(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
					t.Fatalf("after the restart, a fourth of 3 permits: %v", err)
				}
				time.Sleep(ttl / 3)
			}
			for _, l := range held {
				if l.Err() != nil {
					t.Fatalf("a permit was lost across the restart: %v", l.Err())
				}
				leasecheck.Unlock(t, l)
			}
			leasecheck.Unlock(t, leasecheck.Got(t)(b.Semaphore(name, 3).TryAcquire(ctx)))
		})
	}
}

// A semaphore's N is the name's while its permits are held: a handle with
// another N is refused, by TryAcquire and by Acquire at once, and gets in
// with its N once the name is idle.
func TestSemaphoreLimitIsTheNames(t *testing.T) {
	for name, cs := range queueClients(t) {
		t.Run(name, func(t *testing.T) {
			ctx := leasecheck.Context(t, 10*time.Second)
			one, many := cs[0].Semaphore("sem", 1), cs[1].Semaphore("sem", 100)
			p, err := one.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if l, err := many.TryAcquire(ctx); !errors.Is(err, dlock.ErrLimitMismatch) || !errors.Is(err, dlock.ErrInvalidArgument) {
				t.Fatalf("TryAcquire with N=100 while a permit of N=1 is held: %v, %v; want ErrLimitMismatch", l, err)
			}
			if l, err := many.Acquire(ctx); !errors.Is(err, dlock.ErrLimitMismatch) {
				t.Fatalf("Acquire with N=100 while a permit of N=1 is held: %v, %v; want ErrLimitMismatch", l, err)
			}
			if err := p.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			q, err := many.Acquire(ctx)
			if err != nil {
				t.Fatalf("Acquire with N=100 once the name is idle: %v", err)
			}
			if l, err := one.TryAcquire(ctx); !errors.Is(err, dlock.ErrLimitMismatch) {
				t.Fatalf("TryAcquire with N=1 under the new N=100: %v, %v; want ErrLimitMismatch", l, err)
			}
			_ = q.Unlock(ctx)
		})
	}
}
