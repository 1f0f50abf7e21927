package cli

import (
	"bytes"
	"context"
	"io"
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

// statusArgs parses status's arguments as status does and returns its
// KEY and --watch.
func statusArgs(args ...string) (string, *watchValue, error) {
	s := &invocation{env: Env{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}}
	s.cmd = findCommand("status")
	s.flags = newFlagSet("status")
	declareOperatorFlags(s.flags, "")
	w := declareWatch(s.flags)
	if err := s.parse(args); err != nil {
		return "", w, err
	}
	key, err := watchKeyArg(s.flags, w, args)
	return key, w, err
}

// TestStatusWatchIntervalAsNextWord: "--watch D KEY" is --watch=D KEY,
// the only reading of two arguments where status takes one KEY; a lone
// argument after --watch is still KEY.
func TestStatusWatchIntervalAsNextWord(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		key   string
		every time.Duration
		bad   string // in the usage error
	}{
		{args: []string{"--watch", "1s", "k"}, key: "k", every: time.Second},
		{args: []string{"--watch", "0.5", "k"}, key: "k", every: 500 * time.Millisecond},
		{args: []string{"--json", "--watch", "2m", "k"}, key: "k", every: 2 * time.Minute},
		{args: []string{"--watch=1s", "k"}, key: "k", every: time.Second},
		{args: []string{"--watch", "5"}, key: "5", every: defaultWatchEvery},
		{args: []string{"--watch", "abc", "k"}, bad: `--watch "abc": not a duration`},
		{args: []string{"--watch", "10ms", "k"}, bad: `--watch "10ms": must be at least 100ms`},
		{args: []string{"--watch=1s", "a", "k"}, bad: "want exactly one KEY, got 2 arguments"},
		{args: []string{"--watch", "--", "1s", "k"}, bad: "want exactly one KEY, got 2 arguments"},
		{args: []string{"1s", "k"}, bad: "want exactly one KEY, got 2 arguments"},
	} {
		key, w, err := statusArgs(tc.args...)
		switch {
		case tc.bad != "":
			if exitCode(err) != ExitUsage || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("%q: %v; want a usage error with %q", tc.args, err, tc.bad)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case key != tc.key || !w.on || w.every != tc.every:
			t.Errorf("%q: key %q, watch %v every %v; want %q every %v", tc.args, key, w.on, w.every, tc.key, tc.every)
		}
	}
}

// TestStatusWatchSeparateInterval runs "status --watch 0.1 k": it watches
// k, every 100 ms.
func TestStatusWatchSeparateInterval(t *testing.T) {
	m := newMemBackend(t)
	var stdout, stderr lockedBuffer
	env := Env{Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"status", "--mem", "m", "--watch", "0.1", "k"}, env, Options{Backends: []Backend{m.backend()}})
	}()
	for deadline := time.Now().Add(10 * time.Second); strings.Count(stdout.String(), `lock "k" is not held`) < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than 2 refreshes of k in 10 s: %q (stderr %q)", stdout.String(), stderr.String())
		}
		select {
		case code := <-done:
			t.Fatalf("watch ended with %d; stdout %q stderr %q", code, stdout.String(), stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	if code := <-done; code != ExitOK {
		t.Errorf("watch after cancel: status %d, stderr %q", code, stderr.String())
	}
}
