package memdriver_test

import (
	"sync"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
)

// watchAll opens a Watcher on d that records every notification; it is
// closed when the test ends.
func watchAll(t *testing.T, d driver.Driver) (driver.Watcher, <-chan string) {
	t.Helper()
	got := make(chan string, 10)
	w, err := d.Watch(func(key string) { got <- key })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w, got
}

func TestNotifications(t *testing.T) {
	f := newFixture(t)
	w, got := watchAll(t, f.d)
	for _, k := range []string{"expired", "released", "forced"} {
		if err := w.Add(f.ctx, k); err != nil {
			t.Fatal(err)
		}
		f.acquire(k, "a", time.Second)
	}
	f.c.Advance(time.Second) // expires all three: no notification
	for _, k := range []string{"released", "forced"} {
		f.acquire(k, "b", time.Second)
	}
	f.release("released", "b")
	if _, _, err := f.d.ForceRelease(f.ctx, "forced"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"released", "forced"} {
		select {
		case k := <-got:
			if k != want {
				t.Fatalf("notification for %q, want %q (expiry must not notify)", k, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no notification for %q", want)
		}
	}
}

func TestSlowCallbackDoesNotBlockRelease(t *testing.T) {
	f := newFixture(t)
	unblock := make(chan struct{})
	var mu sync.Mutex
	var keys []string
	w, err := f.d.Watch(func(key string) {
		<-unblock
		mu.Lock()
		keys = append(keys, key)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(f.ctx, "k"); err != nil {
		t.Fatal(err)
	}
	const n = 1000
	for i := range n {
		id := string(rune('a' + i%26))
		f.acquire("k", id, time.Second)
		f.release("k", id)
	}
	close(unblock)
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		got := len(keys)
		mu.Unlock()
		if got == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d notifications delivered", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCloseWaitsForCallback(t *testing.T) {
	f := newFixture(t)
	entered, unblock := make(chan struct{}), make(chan struct{})
	w, err := f.d.Watch(func(string) { close(entered); <-unblock })
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(f.ctx, "k"); err != nil {
		t.Fatal(err)
	}
	f.acquire("k", "a", time.Second)
	f.release("k", "a")
	<-entered
	f.acquire("k", "a", time.Second)
	f.release("k", "a") // queued behind the blocked callback; dropped by Close
	closed := make(chan struct{})
	go func() { w.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a callback was running")
	case <-time.After(20 * time.Millisecond):
	}
	close(unblock)
	<-closed // the second notification would panic on close(entered)
}

func TestAddRemoveCounted(t *testing.T) {
	f := newFixture(t)
	w, got := watchAll(t, f.d)
	for range 2 {
		if err := w.Add(f.ctx, "k"); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Remove(f.ctx, "k"); err != nil {
		t.Fatal(err)
	}
	f.acquire("k", "a", time.Second)
	f.release("k", "a")
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("two Adds, one Remove: key no longer followed")
	}
	if err := w.Remove(f.ctx, "k"); err != nil {
		t.Fatal(err)
	}
	f.acquire("k", "a", time.Second)
	f.release("k", "a")
	// Delivery is in order from one goroutine, so once a later followed
	// key arrives, a notification for k would have arrived before it.
	if err := w.Add(f.ctx, "sentinel"); err != nil {
		t.Fatal(err)
	}
	f.acquire("sentinel", "a", time.Second)
	f.release("sentinel", "a")
	if k := <-got; k != "sentinel" {
		t.Fatalf("notification for %q after its last Remove", k)
	}
}
