package dlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
)

func TestRWMutexReadersShareWritersExclude(t *testing.T) {
	c, _ := newMemClient(t, nil)
	ctx := leasecheck.Context(t, 10*time.Second)
	m := c.RWMutex("config")
	r1 := leasecheck.Got(t)(m.TryRLock(ctx))
	r2 := leasecheck.Got(t)(m.RLock(ctx))
	if r1.Err() != nil || r2.Err() != nil || r1.Key() != "config" {
		t.Fatalf("readers: %v %v key %q", r1.Err(), r2.Err(), r1.Key())
	}
	if _, err := m.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock with two readers: %v, want ErrNotAcquired", err)
	}
	leasecheck.Unlock(t, r1)
	if _, err := m.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock with one reader left: %v, want ErrNotAcquired", err)
	}
	leasecheck.Unlock(t, r2)
	w := leasecheck.Got(t)(m.TryLock(ctx))
	if _, err := m.TryRLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryRLock under a writer: %v, want ErrNotAcquired", err)
	}
	if _, err := m.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("second TryLock: %v, want ErrNotAcquired", err)
	}
	leasecheck.Unlock(t, w)
	if err := w.Unlock(ctx); err != nil {
		t.Fatalf("second Unlock: %v, want nil", err)
	}
	leasecheck.Unlock(t, leasecheck.Got(t)(m.TryRLock(ctx)))
}

// fencedRegister is a resource that fences readers and writers: it rejects
// a write whose token is below the highest it has seen, and a read whose
// token is below the last write's — the reader's view predates it.
type fencedRegister struct {
	value, lastWrite uint64
}

func (r *fencedRegister) write(token, v uint64) bool {
	if token < r.lastWrite {
		return false
	}
	r.value, r.lastWrite = v, token
	return true
}

func (r *fencedRegister) read(token uint64) (uint64, bool) {
	if token < r.lastWrite {
		return 0, false
	}
	return r.value, true
}

// A reader's token is the last write's token, so a resource can reject a
// read that predates a newer write: the reader was paused (here: its lease
// expired) while a writer came and went.
func TestRWMutexReaderTokenRejectsStaleRead(t *testing.T) {
	c, _ := newMemClient(t, nil)
	ctx := leasecheck.Context(t, 20*time.Second)
	m := c.RWMutex("reg")
	var reg fencedRegister

	w1 := leasecheck.Got(t)(m.Lock(ctx))
	if !reg.write(w1.Token(), 1) {
		t.Fatal("first write rejected")
	}
	leasecheck.Unlock(t, w1)
	r := leasecheck.Got(t)(m.RLock(ctx, dlock.WithTTL(100*time.Millisecond), dlock.WithoutWatchdog()))
	if r.Token() < w1.Token() {
		t.Fatalf("reader token %d, want at least the last write's %d", r.Token(), w1.Token())
	}
	if v, ok := reg.read(r.Token()); !ok || v != 1 {
		t.Fatalf("fresh read: %d %v", v, ok)
	}
	// The reader stalls past its TTL; a writer gets in and writes.
	w2 := leasecheck.Got(t)(m.Lock(ctx))
	if r.Err() == nil {
		t.Fatal("writer admitted while the read lease is valid")
	}
	if w2.Token() <= r.Token() {
		t.Fatalf("write token %d not above the earlier reader's %d", w2.Token(), r.Token())
	}
	if !reg.write(w2.Token(), 2) {
		t.Fatal("second write rejected")
	}
	leasecheck.Unlock(t, w2)
	if _, ok := reg.read(r.Token()); ok {
		t.Fatalf("stale read with token %d accepted after a write with %d", r.Token(), w2.Token())
	}
	r2 := leasecheck.Got(t)(m.RLock(ctx))
	if v, ok := reg.read(r2.Token()); !ok || v != 2 {
		t.Fatalf("new reader (token %d): %d %v", r2.Token(), v, ok)
	}
	leasecheck.Unlock(t, r2)
	if err := r.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("unlock of the expired reader: %v, want ErrNotHeld", err)
	}
}

// Asking for the name again under one of its own leases never waits for
// that lease: an upgrade is refused with ErrUpgrade, a permit under a
// lease (or a lock under a permit) with ErrReentry, and the rest nest like
// any re-entry.
func TestRWMutexNestedRequests(t *testing.T) {
	c, _ := newMemClient(t, nil)
	ctx := leasecheck.Context(t, 10*time.Second)
	m := c.RWMutex("up")
	r := leasecheck.Got(t)(m.RLock(ctx))
	derived, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	for name, try := range map[string]func(context.Context) (*dlock.Lease, error){
		"RWMutex.Lock":    func(ctx context.Context) (*dlock.Lease, error) { return m.Lock(ctx) },
		"RWMutex.TryLock": func(ctx context.Context) (*dlock.Lease, error) { return m.TryLock(ctx) },
		"Client.Lock":     func(ctx context.Context) (*dlock.Lease, error) { return c.Lock(ctx, "up") },
		"Client.TryLock":  func(ctx context.Context) (*dlock.Lease, error) { return c.TryLock(ctx, "up") },
		"second handle":   func(ctx context.Context) (*dlock.Lease, error) { return c.RWMutex("up").Lock(ctx) },
	} {
		for _, under := range []context.Context{r.Context(), derived} {
			if l, err := try(under); !errors.Is(err, dlock.ErrUpgrade) {
				t.Fatalf("%s under a read lease: lease %v, err %v, want ErrUpgrade", name, l, err)
			}
		}
	}
	if _, err := c.Semaphore("up", 3).Acquire(derived); !errors.Is(err, dlock.ErrReentry) {
		t.Fatalf("a permit of the name under a read lease: %v, want ErrReentry", err)
	}
	// A read lease under a read lease nests: same token, no new reader.
	n := leasecheck.Got(t)(m.RLock(derived))
	if n.Token() != r.Token() || r.Holds() != 2 {
		t.Fatalf("nested read: token %d (outer %d), outer holds %d", n.Token(), r.Token(), r.Holds())
	}
	if q, _, _ := c.InspectQueue(ctx, "up"); len(q.Holders) != 1 {
		t.Fatalf("a nested read made %d holders", len(q.Holders))
	}
	leasecheck.Unlock(t, n)
	// Another name under the same context is no conflict, and the read
	// lease is still found under what was taken under it.
	other := leasecheck.Got(t)(c.RWMutex("other").Lock(derived))
	if _, err := m.Lock(other.Context()); !errors.Is(err, dlock.ErrUpgrade) {
		t.Fatalf("Lock under a lease taken under a read lease: %v, want ErrUpgrade", err)
	}
	leasecheck.Unlock(t, other)
	leasecheck.Unlock(t, r)
	// Once the read lease is gone, its context is done: the error is that.
	if _, err := m.Lock(derived); errors.Is(err, dlock.ErrUpgrade) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock under a released read lease's context: %v, want context.Canceled", err)
	}
	// Under the write lease, reads and writes nest; a permit is refused.
	w := leasecheck.Got(t)(m.Lock(ctx))
	for name, nest := range map[string]func() (*dlock.Lease, error){
		"RLock":       func() (*dlock.Lease, error) { return m.TryRLock(w.Context()) },
		"Lock":        func() (*dlock.Lease, error) { return m.Lock(w.Context()) },
		"Client.Lock": func() (*dlock.Lease, error) { return c.Lock(w.Context(), "up") },
	} {
		l, err := nest()
		if err != nil || l.Token() != w.Token() {
			t.Fatalf("%s under the write lease: %v, want a nested hold with token %d", name, err, w.Token())
		}
		leasecheck.Unlock(t, l)
	}
	if _, err := c.Semaphore("up", 3).TryAcquire(w.Context()); !errors.Is(err, dlock.ErrReentry) {
		t.Fatalf("a permit under the write lease: %v, want ErrReentry", err)
	}
	leasecheck.Unlock(t, w)
	// Under a permit: another permit is a permit of its own; the lock is
	// refused.
	s := c.Semaphore("up", 2)
	p := leasecheck.Got(t)(s.Acquire(ctx))
	p2 := leasecheck.Got(t)(s.TryAcquire(p.Context()))
	if p2.ID() == p.ID() {
		t.Fatal("a permit under a permit nested instead of taking a second one")
	}
	if _, err := s.TryAcquire(p2.Context()); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("a third permit of 2: %v, want ErrNotAcquired", err)
	}
	for name, try := range map[string]func() (*dlock.Lease, error){
		"RLock":       func() (*dlock.Lease, error) { return m.RLock(p.Context()) },
		"Client.Lock": func() (*dlock.Lease, error) { return c.Lock(p.Context(), "up") },
	} {
		if _, err := try(); !errors.Is(err, dlock.ErrReentry) {
			t.Fatalf("%s under a permit: %v, want ErrReentry", name, err)
		}
	}
	leasecheck.Unlock(t, p2)
	leasecheck.Unlock(t, p)
}

func TestRWMutexBadInput(t *testing.T) {
	c, _ := newMemClient(t, nil)
	ctx := leasecheck.Context(t, 10*time.Second)
	//lint:ignore SA1012 a nil context is the bad input under test
	if _, err := c.RWMutex("x").RLock(nil); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("nil ctx: %v", err)
	}
	if _, err := c.RWMutex("").Lock(ctx); !errors.Is(err, dlock.ErrInvalidKey) {
		t.Fatalf("empty name: %v", err)
	}
	if _, err := c.RWMutex("x").TryRLock(ctx, dlock.WithTTL(time.Microsecond)); !errors.Is(err, dlock.ErrInvalidTTL) {
		t.Fatalf("tiny TTL: %v", err)
	}
	if _, err := c.RWMutex("x").TryLock(ctx, nil); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("nil option: %v", err)
	}
}

// The write side is Client.Lock's lock: plain and read-write acquisitions
// of one name exclude each other and share one token sequence.
func TestRWMutexWriteSideIsClientLock(t *testing.T) {
	c, _ := newMemClient(t, nil)
	ctx := leasecheck.Context(t, 10*time.Second)
	m := c.RWMutex("shared-name")
	r := leasecheck.Got(t)(m.RLock(ctx))
	if _, err := c.TryLock(ctx, "shared-name"); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("Client.TryLock under a reader: %v, want ErrNotAcquired", err)
	}
	leasecheck.Unlock(t, r)
	l := leasecheck.Got(t)(c.TryLock(ctx, "shared-name"))
	if _, err := m.TryRLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryRLock under Client.Lock: %v, want ErrNotAcquired", err)
	}
	if _, err := m.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("RWMutex.TryLock under Client.Lock: %v, want ErrNotAcquired", err)
	}
	leasecheck.Unlock(t, l)
	w := leasecheck.Got(t)(m.Lock(ctx))
	if w.Token() <= l.Token() {
		t.Fatalf("write token %d not above the plain lock's %d", w.Token(), l.Token())
	}
	leasecheck.Unlock(t, w)
}

// A writer that waits is not overtaken by readers arriving after it, and
// those readers enter together once it is done.
func TestRWMutexWriterIsNotOvertaken(t *testing.T) {
	c, _ := newMemClient(t, nil)
	ctx := leasecheck.Context(t, 20*time.Second)
	m := c.RWMutex("doc")
	r1 := leasecheck.Got(t)(m.RLock(ctx))
	wch := leasecheck.Acquired(t, func() (*dlock.Lease, error) { return m.Lock(ctx) })
	leasecheck.WaitInQueue(t, c, "doc", 1)
	if _, err := m.TryRLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryRLock with a writer queued: %v, want ErrNotAcquired", err)
	}
	r2ch := leasecheck.Acquired(t, func() (*dlock.Lease, error) { return m.RLock(ctx) })
	r3ch := leasecheck.Acquired(t, func() (*dlock.Lease, error) { return m.RLock(ctx) })
	leasecheck.WaitInQueue(t, c, "doc", 3)
	leasecheck.NotYet(t, wch, "writer behind a reader")
	leasecheck.Unlock(t, r1)
	w := leasecheck.Receive(t, wch, "writer")
	leasecheck.NotYet(t, r2ch, "reader behind the writer")
	leasecheck.NotYet(t, r3ch, "reader behind the writer")
	leasecheck.Unlock(t, w)
	r2, r3 := leasecheck.Receive(t, r2ch, "reader 2"), leasecheck.Receive(t, r3ch, "reader 3")
	if r2.Token() < w.Token() || r3.Token() < w.Token() {
		t.Fatalf("readers after write %d: tokens %d %d, want at least the write's", w.Token(), r2.Token(), r3.Token())
	}
	leasecheck.Unlock(t, r2)
	leasecheck.Unlock(t, r3)
}
