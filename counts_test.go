package dlock_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/memdriver"
)

// The hot path's counts guard. Speed on a shared machine drifts; counts do
// not, so CI fails when one of these exceeds its budget, and a change that
// needs a higher budget says why in its commit. Each budget is the count
// measured when it was set (go test -run Counts -v . prints them, with the
// commands by name): Redis commands exactly, allocations plus two, as a
// background goroutine (a timer, go-redis's pool) may add one to a run.
// docs/benchmarks.md has what they were before the hot path was made
// cheaper, and what each count consists of.
//
// Allocations are counted without the race detector, which changes them
// (sync.Pool drops items at random under it): scripts/test runs this test
// a second time without -race, and under -race only the store's counts
// and the goroutines are checked.

// countedPath is one Lock+Unlock cycle of a primitive.
type countedPath struct {
	name string
	// setup runs once on the Client and returns the cycle to count.
	setup func(t *testing.T, c *dlock.Client) func(ctx context.Context) error
	// storeCmds budgets Redis commands per cycle, top level and those the
	// scripts run (INFO commandstats counts both); allocs budgets heap
	// allocations per cycle in the whole process.
	storeCmds, allocs float64
}

var countedPaths = []countedPath{
	{name: "fair", storeCmds: 7, allocs: 71, setup: func(t *testing.T, c *dlock.Client) func(context.Context) error {
		return lockCycle(c, "counted-fair")
	}},
	{name: "plain", storeCmds: 7, allocs: 72, setup: func(t *testing.T, c *dlock.Client) func(context.Context) error {
		return lockCycle(c, "counted-plain", dlock.WithoutFIFO())
	}},
	{name: "reentrant", storeCmds: 0, allocs: 7, setup: func(t *testing.T, c *dlock.Client) func(context.Context) error {
		outer, err := c.Lock(context.Background(), "counted-reentrant")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = outer.Unlock(context.Background()) })
		cycle := leaseCycle(func(context.Context) (*dlock.Lease, error) { return c.Lock(outer.Context(), "counted-reentrant") })
		return func(context.Context) error { return cycle(outer.Context()) }
	}},
	{name: "rwmutex-read", storeCmds: 44, allocs: 69, setup: func(t *testing.T, c *dlock.Client) func(context.Context) error {
		m := c.RWMutex("counted-rw")
		return leaseCycle(func(ctx context.Context) (*dlock.Lease, error) { return m.RLock(ctx) })
	}},
	{name: "rwmutex-write", storeCmds: 30, allocs: 71, setup: func(t *testing.T, c *dlock.Client) func(context.Context) error {
		m := c.RWMutex("counted-rw")
		return leaseCycle(func(ctx context.Context) (*dlock.Lease, error) { return m.Lock(ctx) })
	}},
	{name: "semaphore", storeCmds: 45, allocs: 69, setup: func(t *testing.T, c *dlock.Client) func(context.Context) error {
		s := c.Semaphore("counted-sem", 3)
		return leaseCycle(func(ctx context.Context) (*dlock.Lease, error) { return s.Acquire(ctx) })
	}},
	{name: "lockall", storeCmds: 12, allocs: 107, setup: func(t *testing.T, c *dlock.Client) func(context.Context) error {
		keys := []string{"counted-all-a", "counted-all-b"}
		return func(ctx context.Context) error {
			m, err := c.LockAll(ctx, keys)
			if err != nil {
				return err
			}
			return m.Unlock(ctx)
		}
	}},
}

// lockCycle is a Lock+Unlock of key, as a service makes it: with a
// context that can be cancelled.
func lockCycle(c *dlock.Client, key string, opts ...dlock.LockOption) func(context.Context) error {
	opts = append([]dlock.LockOption{dlock.WithTTL(10 * time.Second)}, opts...)
	return leaseCycle(func(ctx context.Context) (*dlock.Lease, error) { return c.Lock(ctx, key, opts...) })
}

// leaseCycle is a cycle of acquire and the Unlock of the lease it returns.
func leaseCycle(acquire func(context.Context) (*dlock.Lease, error)) func(context.Context) error {
	return func(ctx context.Context) error {
		l, err := acquire(ctx)
		if err != nil {
			return err
		}
		return l.Unlock(ctx)
	}
}

func TestCountsPerCycle(t *testing.T) {
	srv := redisserver.Start(t)
	admin := redisserver.NewClient(t, srv.Addr())
	c := newLocker(t, srv.Addr())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 200
	for _, p := range countedPaths {
		t.Run(p.name, func(t *testing.T) {
			cycle := p.setup(t, c)
			run := func() {
				if err := cycle(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for range 20 { // warm up: scripts cached, connections dialed
				run()
			}
			before := commandCalls(t, admin)
			for range n {
				run()
			}
			cmds, by := commandsPerCycle(before, commandCalls(t, admin), n)
			t.Logf("%s: %.2f Redis commands per cycle (budget %.0f): %s", p.name, cmds, p.storeCmds, by)
			if cmds > p.storeCmds {
				t.Errorf("%s: %.2f Redis commands per cycle, over the budget of %.0f", p.name, cmds, p.storeCmds)
			}
			if raceEnabled {
				return
			}
			allocs := testing.AllocsPerRun(n, run)
			t.Logf("%s: %.1f allocations per cycle (budget %.0f)", p.name, allocs, p.allocs)
			if allocs > p.allocs {
				t.Errorf("%s: %.1f allocations per cycle, over the budget of %.0f", p.name, allocs, p.allocs)
			}
		})
	}
}

// commandsPerCycle is the commands the server ran between the
// commandCalls snapshots before and after (INFO excluded), per cycle of n,
// in total and by command.
func commandsPerCycle(before, after map[string]int, n int) (float64, string) {
	total, by := 0, []string{}
	for name, calls := range after {
		if d := calls - before[name]; d > 0 && name != "info" {
			total += d
			by = append(by, fmt.Sprintf("%s %.2f", name, float64(d)/float64(n)))
		}
	}
	slices.Sort(by)
	return float64(total) / float64(n), strings.Join(by, ", ")
}

// TestGoroutinesPerIdleClient counts the goroutines a Client keeps while
// it holds nothing: right after New, and after a burst of cycles from
// many goroutines (driver calls run on goroutines the engine keeps a while
// for the next call).
func TestGoroutinesPerIdleClient(t *testing.T) {
	const (
		budgetNew   = 3              // the renewer, the releaser and the grant listener
		budgetBurst = budgetNew + 16 // and callers kept for the next call (engine/callers.go)
	)
	srv := redisserver.Start(t)
	rdb := redisserver.NewClient(t, srv.Addr())
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	base := runtime.NumGoroutine()
	c := newLockerOn(t, rdb, nil)
	afterNew := runtime.NumGoroutine() - base
	t.Logf("after New: %d goroutines (budget %d)", afterNew, budgetNew)
	if afterNew > budgetNew {
		t.Errorf("an idle Client keeps %d goroutines, over the budget of %d", afterNew, budgetNew)
	}
	done := make(chan error)
	for i := range 16 {
		go func() {
			done <- lockCycle(c, "idle-"+strconv.Itoa(i))(context.Background())
		}()
	}
	for range 16 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	afterBurst := runtime.NumGoroutine() - base
	t.Logf("after 16 concurrent cycles: %d goroutines (budget %d)", afterBurst, budgetBurst)
	if afterBurst > budgetBurst {
		t.Errorf("a Client idle after a burst keeps %d goroutines, over the budget of %d", afterBurst, budgetBurst)
	}
}

// A lease's Context is asked for on every piece of work done under it: for
// a Lease, a nested Lease and a MultiLease it costs no allocation.
func TestLeaseContextAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	c, err := dlock.New(memdriver.New())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	l, err := c.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	nested, err := c.Lock(l.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.LockAll(ctx, []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	for name, get := range map[string]func() context.Context{"Lease": l.Context, "MultiLease": m.Context} {
		if n := testing.AllocsPerRun(100, func() { _ = get() }); n != 0 {
			t.Errorf("%s.Context: %v allocations, want 0", name, n)
		}
	}
	if nested.Context().Err() != nil || l.Context().Err() != nil || m.Context().Err() != nil {
		t.Fatal("a held lease's context reports an error")
	}
}
