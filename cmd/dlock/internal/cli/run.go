package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/dlockio/dlock"
)

// runGrace is the default time between SIGTERM and SIGKILL after a loss.
const runGrace = 5 * time.Second

// attemptTimeout bounds the one attempt of --wait 0 (and the look at the
// holder after a bounded wait): a store that has not answered by then is
// reported unreachable (69), so that "dlock run -n" ends within a second
// even when a server accepts connections and never answers.
const attemptTimeout = 500 * time.Millisecond

// unresponsiveCloseWait is how long dlock waits for Close after the store
// did not answer an acquisition: what the attempt may have taken expires
// with its TTL, and Close would retry its release for seconds.
const unresponsiveCloseWait = 100 * time.Millisecond

// releaseTimeout bounds the final Unlock: a store that does not answer
// only delays others until the TTL runs out.
const releaseTimeout = 5 * time.Second

func runCommand(ctx context.Context, s *invocation, o *runOptions, args []string) error {
	if err := s.flags.applyEnv(s.env.Getenv); err != nil {
		return err
	}
	key, argv, err := s.parseRunArgs(o, args)
	if err != nil {
		return err
	}
	if !s.flags.given("meta") {
		*o.meta = defaultMeta(argv)
	}
	level := slog.LevelError + 1 // the lost-lock warning is reported once, as the exit message
	if *o.verbose {
		level = slog.LevelWarn
	}
	logger := slog.New(slog.NewTextHandler(s.env.Stderr, &slog.HandlerOptions{Level: level}))
	loss := newLossWatch()
	var obs dlock.Observer = loss
	if o.metricsAddr != nil && *o.metricsAddr != "" {
		// Served until runCommand returns: after the Client's Close (the
		// deferred calls run in reverse), so the release is counted.
		mobs, stop, err := s.startMetrics(*o.metricsAddr)
		if err != nil {
			return err
		}
		defer stop()
		if mobs != nil {
			obs = teeObserver{mobs, loss}
		}
	}
	opts := []dlock.Option{dlock.WithLogger(logger), dlock.WithOwnerMeta(*o.meta), dlock.WithObserver(obs)}
	// Without --ttl (or DLOCK_TTL) the lock has the Client's default TTL:
	// dlock.DefaultTTL, or the longest the store takes when that is
	// shorter (ZooKeeper's sessions bound it: zkdriver.Open).
	var lockOpts []dlock.LockOption
	if s.flags.given("ttl") {
		opts = append(opts, dlock.WithDefaultTTL(*o.ttl))
		lockOpts = append(lockOpts, dlock.WithTTL(*o.ttl))
	}
	// A TTL below the store's minimum fails here, a name the store cannot
	// take just below: usage errors, found before any round trip.
	client, err := s.openClient(opts...)
	if errors.Is(err, dlock.ErrInvalidTTL) {
		return s.flags.badValue("ttl", fmt.Sprint(*o.ttl), ttlRefusal(err, *o.ttl))
	}
	if err != nil {
		return err
	}
	abandoned, unresponsive := false, false
	defer func() {
		switch {
		case abandoned:
			// An abandoned lease (a signal during --min-hold) must stay
			// in the store until its TTL runs out: Close would release
			// it. The process exits right after Main returns.
		case unresponsive:
			// Close would try, for seconds, to release what an
			// unanswered attempt may have taken from a store that is
			// failing; that expires with its TTL anyway.
			closeWithin(client, unresponsiveCloseWait)
		default:
			_ = client.Close()
		}
	}()
	if err := checkKey(client, key); err != nil {
		return err
	}
	if err := o.kind.check(); err != nil {
		return err
	}

	sigs := notifySignals()
	defer stopSignals(sigs)

	lease, err := acquire(ctx, client, o.kind, key, *o.wait, sigs, lockOpts...)
	if err != nil {
		err = s.badDatabase(s.describeAcquireError(ctx, client, key, o, err))
		unresponsive = errors.Is(err, dlock.ErrBackend)
		return err
	}
	sv := &supervisor{env: s.env, lease: lease, argv: argv, grace: *o.grace, sigs: sigs,
		holdUntil: time.Now().Add(*o.minHold), ttl: lease.TTL(), dropEnv: s.storeVariables(), loss: loss}
	err = sv.run()
	abandoned = sv.abandoned
	return err
}

// ttlRefusal is why the store refused the TTL d, from the library's
// error, which speaks of the Client's default TTL (the option dlock sets
// from --ttl): "below the store's minimum 20ms".
func ttlRefusal(err error, d time.Duration) string {
	why := strings.TrimPrefix(err.Error(), dlock.ErrInvalidTTL.Error()+": ")
	why = strings.TrimPrefix(why, "default TTL "+d.String()+" ")
	why = strings.TrimPrefix(why, "is ")
	return strings.Replace(why, "below the minimum", "below the store's minimum", 1)
}

// signalError is the cause of a wait cut short by a signal.
type signalError struct{ sig os.Signal }

func (e signalError) Error() string { return fmt.Sprintf("interrupted by %v", e.sig) }

// acquire takes the lock (or the read lease or permit kind asks for),
// giving up after wait (one attempt for 0) or when a signal arrives.
func acquire(ctx context.Context, c *dlock.Client, kind leaseKind, key string, wait optionalDuration, sigs <-chan os.Signal, opts ...dlock.LockOption) (*dlock.Lease, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	type result struct {
		lease *dlock.Lease
		err   error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		switch {
		case wait.set && wait.d == 0:
			// The user did not ask to wait: a store that accepts the
			// connection but does not answer is reported as promptly.
			actx, acancel := context.WithTimeout(ctx, attemptTimeout)
			r.lease, r.err = kind.take(actx, c, key, true, opts...)
			acancel()
		case wait.set:
			wctx, wcancel := context.WithTimeout(ctx, wait.d)
			r.lease, r.err = kind.take(wctx, c, key, false, opts...)
			wcancel()
		default:
			r.lease, r.err = kind.take(ctx, c, key, false, opts...)
		}
		done <- r
	}()
	select {
	case r := <-done:
		return r.lease, r.err
	case sig := <-sigs:
		cancel(signalError{sig})
		r := <-done
		if r.lease != nil { // acquired as the signal came: give it back
			releaseLease(r.lease)
		}
		return nil, signalError{sig}
	}
}

// describeAcquireError turns a failed acquisition into its status: the
// conflict status (75, or -E) for a lock held by someone else, 69 for a
// store that did not answer, 128+N for a signal.
func (s *invocation) describeAcquireError(ctx context.Context, c *dlock.Client, key string, o *runOptions, err error) error {
	wait := *o.wait
	conflict := func(why string) error {
		return &exitError{code: *o.conflictExit, quiet: *o.quiet, err: fmt.Errorf("lock %q not acquired: %s", key, why)}
	}
	var se signalError
	switch {
	case errors.As(err, &se):
		return &exitError{code: 128 + signalNumber(se.sig), err: fmt.Errorf("%v while waiting for lock %q", se.sig, key)}
	case errors.Is(err, dlock.ErrNotAcquired):
		return conflict(o.kind.busy() + holderSummary(ctx, c, key))
	case wait.set && wait.d == 0 && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return noAnswer(attemptTimeout)
	case wait.set && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		// Busy all along, or a store that never answered: ask it.
		pctx, cancel := context.WithTimeout(ctx, attemptTimeout)
		defer cancel()
		info, held, ierr := c.Inspect(pctx, key)
		if ierr != nil {
			return noAnswer(wait.d)
		}
		why := "still held after " + wait.d.String()
		if held {
			why += describeHolder(info)
		}
		return conflict(why)
	}
	return err
}

// noAnswerError is a store that accepted the connection but did not
// answer within a bound: a backend failure (69).
type noAnswerError struct{ within time.Duration }

func (e noAnswerError) Error() string {
	return fmt.Sprintf("no answer from the store within %v (backend failure)", e.within)
}

func (e noAnswerError) Unwrap() error { return dlock.ErrBackend }

func noAnswer(within time.Duration) error { return noAnswerError{within} }

// closeWithin closes c, waiting at most d; Close goes on in the background
// (bounded by the Client's own limits) if the process does not exit first.
func closeWithin(c *dlock.Client, d time.Duration) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Close()
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}
