package redisdriver_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/redis/go-redis/v9"
)

// The helpers below serve the tests that drive a Redis deployment through
// a dlock Client (Cluster, Sentinel, the queue keys' lifetime).

// newLocker returns a dlock Client on its own go-redis connection to addr;
// both are closed at the end of the test (the Client first).
func newLocker(t testing.TB, addr string, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	return newLockerOn(t, redisserver.NewClient(t, addr), opts...)
}

// newLockerOn returns a Client using rdb (any UniversalClient, closed at the
// end of the test) through the Redis driver.
func newLockerOn(t testing.TB, rdb redis.UniversalClient, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	t.Cleanup(func() { _ = rdb.Close() })
	drv, err := redisdriver.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]dlock.Option{dlock.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}, opts...)
	c, err := dlock.New(drv, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// isHeld reports whether the store holds the lock for anyone, reading the
// key where the Redis driver keeps a lock with the default prefix.
func isHeld(t testing.TB, rdb *redis.Client, name string) bool {
	t.Helper()
	v, err := rdb.Get(context.Background(), redisdriver.DefaultPrefix+"{"+name+"}").Result()
	if err == redis.Nil {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return v != ""
}

// waitDone fails the test if the lease has not ended within d.
func waitDone(t testing.TB, l *dlock.Lease, d time.Duration) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(d):
		t.Fatalf("lease %q still held after %v", l.Key(), d)
	}
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

// notYet fails the test if ch has already yielded a lease.
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
