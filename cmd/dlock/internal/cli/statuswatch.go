package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/dlockio/dlock"
)

// Refresh intervals of status --watch. The floor keeps a typo (--watch=1ms)
// from turning into a busy loop of round trips against the store.
const (
	defaultWatchEvery = 2 * time.Second
	minWatchEvery     = 100 * time.Millisecond
)

const watchHelp = `
--watch[=D] shows the status again every D (default 2s, at least 100ms)
until dlock gets SIGINT or SIGTERM, then exits 0. "--watch D KEY" is
"--watch=D KEY" ("--watch 5" alone watches the key 5). Each refresh
starts with a line "--- TIME" (RFC 3339, UTC) and shows the lock as above,
or the line lock "KEY" is not held. With --json there is no such line: each refresh is
one JSON object on one line (NDJSON), as above. A refresh that fails (the
store unreachable, or not answering within --timeout) prints its error line
on stderr, as status would, and the watch goes on. --watch is never taken
from the environment.
`

// watchValue is --watch: a switch that may carry its interval
// (--watch=500ms). Bare --watch means every defaultWatchEvery.
type watchValue struct {
	on    bool
	every time.Duration
	bare  bool // the last --watch had no value
}

func (w *watchValue) String() string {
	if w == nil || !w.on {
		return ""
	}
	return w.every.String()
}

func (w *watchValue) Set(v string) error {
	switch v {
	case "true": // the bare flag
		w.on, w.every, w.bare = true, defaultWatchEvery, true
		return nil
	case "false":
		w.on, w.bare = false, false
		return nil
	}
	d, err := parseDuration(v)
	if err != nil {
		return err
	}
	if d < minWatchEvery {
		return fmt.Errorf("must be at least %v", minWatchEvery)
	}
	w.on, w.every, w.bare = true, d, false
	return nil
}

func (w *watchValue) IsBoolFlag() bool { return true }

// declareWatch declares status --watch. It is never read from the
// environment: a DLOCK_WATCH left exported would turn every scripted
// status into one that never returns.
func declareWatch(f *flagSet) *watchValue {
	w := &watchValue{}
	f.add(&flagSpec{name: "watch", usage: "show the status again every D (--watch=D; default 2s) until interrupted; see above",
		env: true, value: w})
	f.noEnv()
	return w
}

// watchKeyArg returns status's KEY. --watch takes its interval as
// --watch=D; "--watch D KEY" is read the same way, since the word after a
// bare --watch followed by KEY has no other reading: status takes one
// KEY, so "status --watch 1s k" was an error, while "status --watch 5"
// still shows the lock 5 every 2s.
func watchKeyArg(f *flagSet, w *watchValue, args []string) (string, error) {
	fs := f.fs
	if fs.NArg() == 2 && w.on && w.bare && len(args) > fs.NArg() {
		if before := args[len(args)-fs.NArg()-1]; before == "--watch" || before == "-watch" {
			if err := w.Set(fs.Arg(0)); err != nil {
				return "", usageErrorf("--watch %q: %v (see dlock status --help)", fs.Arg(0), err)
			}
			return fs.Arg(1), nil
		}
	}
	return keyArg(f, "status")
}

// watchSignals are what end a watch, with status 0.
var watchSignals = []os.Signal{os.Interrupt, syscall.SIGTERM}

// watchStatus shows key's status every interval until ctx ends or dlock is
// signalled. One Client serves every refresh; each refresh is bounded by
// --timeout. A failed refresh is reported and the next one tried, since a
// watch is what one keeps open while a store restarts; only errors that
// no refresh can fix (a bad URL, key or database) end it.
func watchStatus(ctx context.Context, s *invocation, o operatorFlags, every time.Duration, key string) error {
	ctx, stop := signal.NotifyContext(ctx, watchSignals...)
	defer stop()
	c, err := s.openClient()
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	if err := checkKey(c, key); err != nil {
		return err
	}
	var jsonOut func(any) error
	if *o.json {
		enc := json.NewEncoder(s.env.Stdout) // one compact object per line
		jsonOut = func(v any) error {
			if err := enc.Encode(v); err != nil {
				return errors.Join(errors.New("writing JSON"), err)
			}
			return nil
		}
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		if err := s.refreshStatus(ctx, c, *o.timeout, key, jsonOut); err != nil {
			return err
		}
		timer.Reset(every)
	}
}

// refreshStatus is one refresh of a watch; it returns only the errors
// that end the watch.
func (s *invocation) refreshStatus(ctx context.Context, c *dlock.Client, timeout time.Duration, key string, jsonOut func(any) error) error {
	var st lockStatus
	err := s.bounded(ctx, c, timeout, func(ctx context.Context, c *dlock.Client) (err error) {
		st, err = lookStatus(ctx, c, key)
		return err
	})
	if ctx.Err() != nil {
		return nil // interrupted during the look: nothing half-printed
	}
	if jsonOut == nil {
		if _, werr := fmt.Fprintf(s.env.Stdout, "--- %s\n", time.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00")); werr != nil {
			return werr
		}
	}
	if err != nil {
		if exitCode(err) == ExitUsage {
			return err
		}
		s.report(err)
		return nil
	}
	err = s.writeStatus(st, jsonOut)
	var ee *exitError
	if errors.As(err, &ee) && ee.code == ExitNotHeld {
		if jsonOut == nil {
			_, err = fmt.Fprintln(s.env.Stdout, ee.err)
			return err
		}
		return nil
	}
	return err
}
