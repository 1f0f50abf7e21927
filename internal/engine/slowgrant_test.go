package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/memdriver"
)

// slowReplies is an in-memory store whose next Acquire or Enqueue is
// answered late, as the first call on a connection dialled through a
// lagging network is: the store has acted, then lateness runs.
type slowReplies struct {
	*memdriver.Driver
	once     sync.Once
	lateness func()
	acquires atomic.Int32
	enqueues atomic.Int32
}

func (d *slowReplies) late() {
	d.once.Do(func() {
		if d.lateness != nil {
			d.lateness()
		}
	})
}

func (d *slowReplies) Acquire(ctx context.Context, req driver.AcquireRequest) (driver.AcquireResult, error) {
	d.acquires.Add(1)
	defer d.late()
	return d.Driver.Acquire(ctx, req)
}

func (d *slowReplies) AcquireAll(ctx context.Context, reqs []driver.AcquireRequest) (driver.AcquireAllResult, error) {
	defer d.late()
	return d.Driver.AcquireAll(ctx, reqs)
}

func (d *slowReplies) Enqueue(ctx context.Context, req driver.QueueRequest) (driver.QueueResult, error) {
	d.enqueues.Add(1)
	defer d.late()
	return d.Driver.Enqueue(ctx, req)
}

const slowTTL = 900 * time.Millisecond

// sleeps returns a lateness of d of real time.
func sleeps(d time.Duration) func() { return func() { time.Sleep(d) } }

// checkFresh fails unless the first renewal of a lease with this deadline
// is still ahead: its validity counts from a prompt request, not from the
// slow one.
func checkFresh(t *testing.T, e *Engine, deadline time.Time) {
	t.Helper()
	if left, want := time.Until(deadline), e.validity(slowTTL)-slowTTL/3; left <= want {
		t.Errorf("lease valid for %v after a slow grant, want more than %v (its first renewal still ahead)", left, want)
	}
}

// A queued grant answered so late that the lease's first renewal is
// already due is asked for again: the lease counts from the second, prompt
// Enqueue, so its renewal is not left a round trip before the deadline.
func TestSlowGrantIsAskedAgain(t *testing.T) {
	drv := &slowReplies{Driver: memdriver.New(), lateness: sleeps(400 * time.Millisecond)}
	e := newTestEngine(t, drv)
	h, err := e.Acquire(context.Background(), Request{Queued: true, Key: "k", TTL: slowTTL, Mode: driver.ModeExclusive, Wait: true, Renew: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.Release(context.Background(), h) }()
	if n := drv.enqueues.Load(); n != 2 {
		t.Errorf("%d Enqueues, want 2: the slow grant asked again once", n)
	}
	checkFresh(t, e, h.Deadline())
}

// The plain lock's slow grant is confirmed by a renewal on the caller's
// ctx, and the lease counts from that renewal.
func TestSlowPlainGrantIsRenewedFirst(t *testing.T) {
	drv := &slowReplies{Driver: memdriver.New(), lateness: sleeps(400 * time.Millisecond)}
	e := newTestEngine(t, drv)
	h, err := e.Acquire(context.Background(), lockReq("k", slowTTL, true, true))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.Release(context.Background(), h) }()
	if n := drv.acquires.Load(); n != 1 {
		t.Errorf("%d Acquires, want 1: the renewal confirmed the grant", n)
	}
	checkFresh(t, e, h.Deadline())
}

// A slow grant that the confirming renewal finds gone (lost while its
// answer was on the way) is not handed out: the next attempt takes the
// lock afresh, with a later token.
func TestSlowPlainGrantFoundGoneIsRetried(t *testing.T) {
	drv := &slowReplies{Driver: memdriver.New()}
	var lost uint64
	drv.lateness = func() {
		tok, ok, err := drv.ForceRelease(context.Background(), "k")
		if err != nil || !ok {
			t.Errorf("force release of the slow grant: %v, %v", ok, err)
		}
		lost = tok
		time.Sleep(400 * time.Millisecond)
	}
	e := newTestEngine(t, drv)
	h, err := e.Acquire(context.Background(), lockReq("k", slowTTL, true, true))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.Release(context.Background(), h) }()
	if n := drv.acquires.Load(); n != 2 {
		t.Errorf("%d Acquires, want 2: the grant found gone was taken again", n)
	}
	if h.Token() <= lost {
		t.Errorf("token %d, want above the lost grant's %d", h.Token(), lost)
	}
	checkFresh(t, e, h.Deadline())
}

// So is a multi-key grant, all its locks in one renewal.
func TestSlowGroupGrantIsRenewedFirst(t *testing.T) {
	drv := &slowReplies{Driver: memdriver.New(), lateness: sleeps(400 * time.Millisecond)}
	e := newTestEngine(t, drv)
	g, err := e.AcquireAll(context.Background(), []driver.AcquireRequest{req("a", slowTTL), req("b", slowTTL)}, true, true)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.ReleaseGroup(context.Background(), g) }()
	checkFresh(t, e, g.Deadline())
}
