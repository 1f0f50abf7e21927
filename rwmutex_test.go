package dlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/memdriver"
)

// newMemClient returns a Client on its own handle of store (nil: a new
// store), closed at the end of the test.
func newMemClient(t testing.TB, store *memdriver.Driver, opts ...dlock.Option) (*dlock.Client, *memdriver.Driver) {
	t.Helper()
	drv := memdriver.New()
	if store != nil {
		drv = store.Connect()
	}
	c, err := dlock.New(drv, append([]dlock.Option{dlock.WithLogger(quietLogger())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, drv
}

// got(t)(l, err) fails the test on err and returns l.
func got(t testing.TB) func(*dlock.Lease, error) *dlock.Lease {
	return func(l *dlock.Lease, err error) *dlock.Lease {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
}

func unlock(t testing.TB, l *dlock.Lease) {
	t.Helper()
	if err := l.Unlock(context.Background()); err != nil {
		t.Fatalf("unlock %q (token %d): %v", l.Key(), l.Token(), err)
	}
}

// acquired runs acquire on a goroutine and returns a channel that yields
// its lease (nil and the test failed on error).
func acquired(t testing.TB, acquire func() (*dlock.Lease, error)) <-chan *dlock.Lease {
	ch := make(chan *dlock.Lease, 1)
	go func() {
		l, err := acquire()
		if err != nil {
			t.Errorf("acquire: %v", err)
		}
		ch <- l
	}()
	return ch
}

func receive(t testing.TB, ch <-chan *dlock.Lease, what string) *dlock.Lease {
	t.Helper()
	select {
	case l := <-ch:
		if l == nil {
			t.Fatalf("%s: not acquired", what)
		}
		return l
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not acquired within 10s", what)
	}
	return nil
}

func notYet(t testing.TB, ch <-chan *dlock.Lease, what string) {
	t.Helper()
	select {
	case l := <-ch:
		t.Fatalf("%s acquired too early (token %d)", what, l.Token())
	default:
	}
}

// waitInQueue waits until name has n waiters queued, as the store reports.
func waitInQueue(t testing.TB, c *dlock.Client, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		q, _, err := c.InspectQueue(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if len(q.Waiters) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q: %d waiters queued, want %d", name, len(q.Waiters), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestRWMutexReadersShareWritersExclude(t *testing.T) {
	c, _ := newMemClient(t, nil)
	ctx := ctxTimeout(t, 10*time.Second)
	m := c.RWMutex("config")
	r1 := got(t)(m.TryRLock(ctx))
	r2 := got(t)(m.RLock(ctx))
	if r1.Err() != nil || r2.Err() != nil || r1.Key() != "config" {
		t.Fatalf("readers: %v %v key %q", r1.Err(), r2.Err(), r1.Key())
	}
	if _, err := m.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock with two readers: %v, want ErrNotAcquired", err)
	}
	unlock(t, r1)
	if _, err := m.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock with one reader left: %v, want ErrNotAcquired", err)
	}
	unlock(t, r2)
	w := got(t)(m.TryLock(ctx))
	if _, err := m.TryRLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryRLock under a writer: %v, want ErrNotAcquired", err)
	}
	if _, err := m.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("second TryLock: %v, want ErrNotAcquired", err)
	}
	unlock(t, w)
	if err := w.Unlock(ctx); err != nil {
		t.Fatalf("second Unlock: %v, want nil", err)
	}
	unlock(t, got(t)(m.TryRLock(ctx)))
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
	ctx := ctxTimeout(t, 20*time.Second)
	m := c.RWMutex("reg")
	var reg fencedRegister

	w1 := got(t)(m.Lock(ctx))
	if !reg.write(w1.Token(), 1) {
		t.Fatal("first write rejected")
	}
	unlock(t, w1)
	r := got(t)(m.RLock(ctx, dlock.WithTTL(100*time.Millisecond), dlock.WithoutWatchdog()))
	if r.Token() < w1.Token() {
		t.Fatalf("reader token %d, want at least the last write's %d", r.Token(), w1.Token())
	}
	if v, ok := reg.read(r.Token()); !ok || v != 1 {
		t.Fatalf("fresh read: %d %v", v, ok)
	}
	// The reader stalls past its TTL; a writer gets in and writes.
	w2 := got(t)(m.Lock(ctx))
	if r.Err() == nil {
		t.Fatal("writer admitted while the read lease is valid")
	}
	if w2.Token() <= r.Token() {
		t.Fatalf("write token %d not above the earlier reader's %d", w2.Token(), r.Token())
	}
	if !reg.write(w2.Token(), 2) {
		t.Fatal("second write rejected")
	}
	unlock(t, w2)
	if _, ok := reg.read(r.Token()); ok {
		t.Fatalf("stale read with token %d accepted after a write with %d", r.Token(), w2.Token())
	}
	r2 := got(t)(m.RLock(ctx))
	if v, ok := reg.read(r2.Token()); !ok || v != 2 {
		t.Fatalf("new reader (token %d): %d %v", r2.Token(), v, ok)
	}
	unlock(t, r2)
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
	ctx := ctxTimeout(t, 10*time.Second)
	m := c.RWMutex("up")
	r := got(t)(m.RLock(ctx))
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
	n := got(t)(m.RLock(derived))
	if n.Token() != r.Token() || r.Holds() != 2 {
		t.Fatalf("nested read: token %d (outer %d), outer holds %d", n.Token(), r.Token(), r.Holds())
	}
	if q, _, _ := c.InspectQueue(ctx, "up"); len(q.Holders) != 1 {
		t.Fatalf("a nested read made %d holders", len(q.Holders))
	}
	unlock(t, n)
	// Another name under the same context is no conflict, and the read
	// lease is still found under what was taken under it.
	other := got(t)(c.RWMutex("other").Lock(derived))
	if _, err := m.Lock(other.Context()); !errors.Is(err, dlock.ErrUpgrade) {
		t.Fatalf("Lock under a lease taken under a read lease: %v, want ErrUpgrade", err)
	}
	unlock(t, other)
	unlock(t, r)
	// Once the read lease is gone, its context is done: the error is that.
	if _, err := m.Lock(derived); errors.Is(err, dlock.ErrUpgrade) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock under a released read lease's context: %v, want context.Canceled", err)
	}
	// Under the write lease, reads and writes nest; a permit is refused.
	w := got(t)(m.Lock(ctx))
	for name, nest := range map[string]func() (*dlock.Lease, error){
		"RLock":       func() (*dlock.Lease, error) { return m.TryRLock(w.Context()) },
		"Lock":        func() (*dlock.Lease, error) { return m.Lock(w.Context()) },
		"Client.Lock": func() (*dlock.Lease, error) { return c.Lock(w.Context(), "up") },
	} {
		l, err := nest()
		if err != nil || l.Token() != w.Token() {
			t.Fatalf("%s under the write lease: %v, want a nested hold with token %d", name, err, w.Token())
		}
		unlock(t, l)
	}
	if _, err := c.Semaphore("up", 3).TryAcquire(w.Context()); !errors.Is(err, dlock.ErrReentry) {
		t.Fatalf("a permit under the write lease: %v, want ErrReentry", err)
	}
	unlock(t, w)
	// Under a permit: another permit is a permit of its own; the lock is
	// refused.
	s := c.Semaphore("up", 2)
	p := got(t)(s.Acquire(ctx))
	p2 := got(t)(s.TryAcquire(p.Context()))
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
	unlock(t, p2)
	unlock(t, p)
}

func TestRWMutexBadInput(t *testing.T) {
	c, _ := newMemClient(t, nil)
	ctx := ctxTimeout(t, 10*time.Second)
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
	ctx := ctxTimeout(t, 10*time.Second)
	m := c.RWMutex("shared-name")
	r := got(t)(m.RLock(ctx))
	if _, err := c.TryLock(ctx, "shared-name"); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("Client.TryLock under a reader: %v, want ErrNotAcquired", err)
	}
	unlock(t, r)
	l := got(t)(c.TryLock(ctx, "shared-name"))
	if _, err := m.TryRLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryRLock under Client.Lock: %v, want ErrNotAcquired", err)
	}
	if _, err := m.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("RWMutex.TryLock under Client.Lock: %v, want ErrNotAcquired", err)
	}
	unlock(t, l)
	w := got(t)(m.Lock(ctx))
	if w.Token() <= l.Token() {
		t.Fatalf("write token %d not above the plain lock's %d", w.Token(), l.Token())
	}
	unlock(t, w)
}
