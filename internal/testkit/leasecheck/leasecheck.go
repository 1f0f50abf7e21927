// Package leasecheck holds what the tests of dlock's Clients share, in the
// root package and in the drivers' packages: Clients on a Redis server
// started by redisserver, and the checks made of the leases they hand out
// (acquired on a goroutine, received, not yet granted, queued).
//
// It imports the root package, so only external test packages (package
// dlock_test, redisdriver_test) can use it; a package's internal tests
// cannot.
package leasecheck

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/dlockio/dlock"
)

// Context returns a context that ends after d, or when the test ends.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// QuietLogger returns a logger that discards everything, for Clients whose
// log the test does not read.
func QuietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// Got(t)(l, err) fails the test on err and returns l.
func Got(t testing.TB) func(*dlock.Lease, error) *dlock.Lease {
	return func(l *dlock.Lease, err error) *dlock.Lease {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
}

// Unlock unlocks l, failing the test on error.
func Unlock(t testing.TB, l *dlock.Lease) {
	t.Helper()
	if err := l.Unlock(context.Background()); err != nil {
		t.Fatalf("unlock %q (token %d): %v", l.Key(), l.Token(), err)
	}
}

// Acquired runs acquire on a goroutine and returns a channel that yields
// its lease (nil and the test failed on error).
func Acquired(t testing.TB, acquire func() (*dlock.Lease, error)) <-chan *dlock.Lease {
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

// Receive returns the lease ch yields, failing the test if it yields none
// within 10 s; what names the acquisition in the failure.
func Receive(t testing.TB, ch <-chan *dlock.Lease, what string) *dlock.Lease {
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

// NotYet fails the test if ch has already yielded a lease.
func NotYet(t testing.TB, ch <-chan *dlock.Lease, what string) {
	t.Helper()
	select {
	case l := <-ch:
		t.Fatalf("%s acquired too early (token %d)", what, l.Token())
	default:
	}
}

// WaitInQueue waits until name has n waiters queued, as the store reports
// to c, and fails the test if that takes more than 10 s.
func WaitInQueue(t testing.TB, c *dlock.Client, name string, n int) {
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

// WaitDone fails the test if the lease has not ended within d.
func WaitDone(t testing.TB, l *dlock.Lease, d time.Duration) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(d):
		t.Fatalf("lease %q still held after %v", l.Key(), d)
	}
}
