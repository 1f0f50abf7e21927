package cli

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer that a test may read while Main writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestWatchValue(t *testing.T) {
	for _, tc := range []struct {
		in    string
		on    bool
		every time.Duration
		bad   bool
	}{
		{in: "true", on: true, every: defaultWatchEvery}, // the bare flag
		{in: "false"},
		{in: "500ms", on: true, every: 500 * time.Millisecond},
		{in: "1.5", on: true, every: 1500 * time.Millisecond},
		{in: "100ms", on: true, every: minWatchEvery},
		{in: "99ms", bad: true},
		{in: "0", bad: true},
		{in: "-1s", bad: true},
		{in: "soon", bad: true},
	} {
		var w watchValue
		err := w.Set(tc.in)
		if (err != nil) != tc.bad || w.on != tc.on || w.every != tc.every {
			t.Errorf("Set(%q): on %v every %v err %v; want on %v every %v bad %v", tc.in, w.on, w.every, err, tc.on, tc.every, tc.bad)
		}
	}
}

// The caller's context ends a watch like a signal: status 0, one Client
// for every refresh.
func TestStatusWatchEndsWithItsContext(t *testing.T) {
	m := newMemBackend(t)
	opts := Options{Backends: []Backend{m.backend()}}
	var stdout, stderr lockedBuffer
	env := Env{Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() { done <- Main(ctx, []string{"status", "--mem", "m", "--watch=100ms", "k"}, env, opts) }()
	for deadline := time.Now().Add(10 * time.Second); strings.Count(stdout.String(), "--- ") < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than 2 refreshes in 10 s: %q (stderr %q)", stdout.String(), stderr.String())
		}
		select {
		case code := <-done:
			t.Fatalf("watch ended with %d; stdout %q stderr %q", code, stdout.String(), stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != ExitOK || stderr.String() != "" {
			t.Errorf("watch after cancel: status %d stderr %q; want 0 and nothing", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not end with its context")
	}
	if n := len(m.opened()); n != 1 {
		t.Errorf("store opened %d times, want once for the whole watch", n)
	}
	if strings.Count(stdout.String(), `lock "k" is not held`) < 2 {
		t.Errorf("refreshes do not each say the lock is free: %q", stdout.String())
	}
}
