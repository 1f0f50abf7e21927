package dlock_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
)

// Many workers, each with its own connection and Client, fight for one key
// with critical sections that often outlast the TTL. The watchdog must keep
// every holder's lock alive, nobody may enter while another is inside, and
// tokens must increase in the order workers entered. Both ways of
// waiting: the store's queue (Lock's default on Redis) and the plain one.
func TestStressMutualExclusion(t *testing.T) {
	t.Run("fifo", func(t *testing.T) { stressMutualExclusion(t) })
	t.Run("plain", func(t *testing.T) { stressMutualExclusion(t, dlock.WithoutFIFO()) })
}

func stressMutualExclusion(t *testing.T, opts ...dlock.LockOption) {
	srv := redisserver.Start(t)
	const (
		workers = 8
		rounds  = 8
		// Long enough that a renewal delayed by a loaded CI machine under
		// -race still lands inside the validity window.
		ttl = 250 * time.Millisecond
	)
	ctx := leasecheck.Context(t, 2*time.Minute)

	var (
		overlaps atomic.Int32
		mu       sync.Mutex
		inside   = map[*dlock.Lease]bool{} // guarded by mu
		entries  []uint64                  // tokens in the order holders got inside
		wg       sync.WaitGroup
		errs     = make(chan error, workers)
	)
	for w := range workers {
		c := leasecheck.NewLocker(t, srv.Addr())
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range rounds {
				l, err := c.Lock(ctx, "stress", append([]dlock.LockOption{dlock.WithTTL(ttl)}, opts...)...)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				// Another holder still inside is an overlap only if its
				// lease still says it is held: Err reads the clock itself,
				// while its Done may be closed late on a starved machine.
				for other := range inside {
					if other.Err() == nil {
						overlaps.Add(1)
					}
				}
				inside[l] = true
				entries = append(entries, l.Token())
				mu.Unlock()
				// A third of the sections last longer than the TTL.
				work := time.Duration(rng.IntN(int(2 * ttl)))
				select {
				case <-time.After(work):
				case <-l.Done():
					errs <- l.Err()
				}
				mu.Lock()
				delete(inside, l)
				mu.Unlock()
				if err := l.Unlock(context.Background()); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("worker: %v", err)
	}
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d overlapping critical sections", n)
	}
	if len(entries) != workers*rounds {
		t.Fatalf("%d entries, want %d", len(entries), workers*rounds)
	}
	for i := 1; i < len(entries); i++ {
		if entries[i] <= entries[i-1] {
			t.Fatalf("entry %d has token %d after %d", i, entries[i], entries[i-1])
		}
	}
}
