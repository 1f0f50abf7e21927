package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/dlockio/dlock"
)

const runUsage = `Usage: dlock run [--ttl D] [--wait D] [--grace D] [--meta TEXT] KEY -- COMMAND [ARGS...]

Acquires the lock KEY, runs COMMAND with DLOCK_KEY and DLOCK_TOKEN (the
fencing token, decimal) added to its environment, keeps the lock renewed
while COMMAND runs, and releases it when COMMAND exits.

Flags may come before or after KEY, but all before the "--"; everything
after the "--" is COMMAND. Without "--", flags must precede KEY.

COMMAND runs in its own process group. SIGINT, SIGTERM and SIGHUP sent to
dlock are forwarded to that group. When COMMAND exits, whatever it left
running in the group (a job started with &) gets SIGTERM, and SIGKILL
after --grace; the lock is released only once the group is empty. A
process that leaves the group (setsid, setpgid) is not followed.
(Being outside the terminal's foreground group, COMMAND cannot read from a
terminal; Ctrl-C still reaches it through dlock.) A signal that arrives
while dlock waits for the lock ends the wait with status 128+N.

If the lock is lost while COMMAND runs (it expired during a network outage,
or an operator ran 'dlock unlock --force'), the whole group gets SIGTERM at
once and SIGKILL after --grace, and dlock exits 76.

If dlock itself dies (SIGKILL, an OOM kill, a crash) while COMMAND runs,
COMMAND's group is killed too: on Linux the kernel sends COMMAND SIGKILL
(a parent-death signal), and on every Unix a small /bin/sh watcher, in a
process group of its own, sends the whole group SIGKILL. The lock is then
not released; it expires after --ttl.

Ctrl-Z (SIGTSTP) stops COMMAND's group with SIGSTOP, then dlock. Stopped,
dlock does not renew, so the lock may expire, but nothing of COMMAND runs.
On SIGCONT (fg, bg) COMMAND resumes if the lock is still held; if it was
lost, the group is ended as for any lost lock. Not covered: SIGSTOP sent to
dlock alone, and a COMMAND stopped by SIGTTIN for reading the terminal
(dlock keeps the lock): give such a COMMAND stdin from elsewhere.

Exit status: COMMAND's own (128+N if it died by signal N) when it ran to the
end under the lock; 64 usage error; 69 Redis unreachable; 75 not acquired
within --wait; 76 lock lost while COMMAND ran; 126/127 COMMAND could not be
executed / was not found.
`

// runGrace is the default time between SIGTERM and SIGKILL after a loss.
const runGrace = 5 * time.Second

// releaseTimeout bounds the final Unlock: a store that does not answer
// only delays others until the TTL runs out.
const releaseTimeout = 5 * time.Second

func runCommand(ctx context.Context, s *invocation, args []string) error {
	fs := s.flagSet(runUsage)
	ttl := fs.Duration("ttl", dlock.DefaultTTL, "lock time-to-live; renewed every TTL/3 while COMMAND runs, it bounds how long a crashed dlock blocks others")
	var wait optionalDuration
	fs.Var(&wait, "wait", "give up after waiting this `long` for the lock (default: wait forever; 0: one attempt)")
	grace := fs.Duration("grace", runGrace, "time between SIGTERM and SIGKILL to COMMAND's process group, after a lost lock or to what COMMAND left running")
	meta := fs.String("meta", "", "free text stored with the lock for operators (default: the command line)")
	verbose := fs.Bool("v", false, "log renewal failures to stderr")
	key, argv, err := s.parseRunArgs(fs, args)
	if err != nil {
		return err
	}
	if *ttl <= 0 {
		return usageErrorf("--ttl must be positive, got %v", *ttl)
	}
	if *grace < 0 || wait.d < 0 {
		return usageErrorf("--grace and --wait must not be negative")
	}
	if !flagGiven(fs, "meta") {
		*meta = defaultMeta(argv)
	}
	level := slog.LevelError + 1 // the lost-lock warning is reported once, as the exit message
	if *verbose {
		level = slog.LevelWarn
	}
	logger := slog.New(slog.NewTextHandler(s.env.Stderr, &slog.HandlerOptions{Level: level}))
	// A TTL below the store's minimum fails here, a name the store cannot
	// take just below: usage errors, found before any round trip.
	client, err := s.openClient(dlock.WithDefaultTTL(*ttl), dlock.WithLogger(logger), dlock.WithOwnerMeta(*meta))
	if errors.Is(err, dlock.ErrInvalidTTL) {
		return usageErrorf("--ttl %v: %s", *ttl, strings.TrimPrefix(err.Error(), "dlock: "))
	}
	if err != nil {
		return err
	}
	defer func() { _ = client.Close() }()
	if err := checkKey(client, key); err != nil {
		return err
	}

	sigs := notifySignals()
	defer stopSignals(sigs)

	lease, err := acquire(ctx, client, key, *ttl, wait, sigs)
	if err != nil {
		return describeAcquireError(ctx, client, key, wait, err)
	}
	return supervise(s.env, lease, argv, *grace, sigs)
}

// parseRunArgs splits run's arguments into flags, KEY and COMMAND.
//
// With a "--", everything before it is flags and exactly one KEY, in any
// order, and everything after it is COMMAND. Without one, flags come
// first, then KEY, then COMMAND; a COMMAND that starts with "-" is then a
// usage error, as it is most likely a flag given after KEY. Either way a
// flag is never taken for COMMAND, nor the first word of COMMAND for KEY.
func (s *invocation) parseRunArgs(fs *flag.FlagSet, args []string) (key string, argv []string, err error) {
	head, tail, dashed := splitAtTerminator(fs, args)
	var pos []string
	for {
		if err := s.parse(fs, head); err != nil {
			return "", nil, err
		}
		rest := fs.Args()
		if !dashed {
			pos = rest
			break
		}
		if len(rest) == 0 {
			break
		}
		pos = append(pos, rest[0])
		head = rest[1:]
	}
	if len(pos) == 0 {
		return "", nil, usageErrorf("missing KEY (see dlock run --help)")
	}
	key = pos[0]
	if dashed {
		if len(pos) > 1 {
			return "", nil, usageErrorf("unexpected argument %q before -- (one KEY; see dlock run --help)", pos[1])
		}
		argv = tail
	} else {
		argv = pos[1:]
		if len(argv) > 0 && strings.HasPrefix(argv[0], "-") {
			return "", nil, usageErrorf("%q after KEY: flags after KEY need a -- before COMMAND (see dlock run --help)", argv[0])
		}
	}
	if len(argv) == 0 {
		return "", nil, usageErrorf("missing COMMAND after KEY (see dlock run --help)")
	}
	return key, argv, nil
}

// splitAtTerminator finds the first "--" in args that is not the value of
// a flag, and returns what comes before and after it.
func splitAtTerminator(fs *flag.FlagSet, args []string) (head, tail []string, found bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return args[:i], args[i+1:], true
		}
		if len(a) < 2 || a[0] != '-' {
			continue
		}
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil && !isBoolFlag(f) {
			i++ // the next argument is this flag's value
		}
	}
	return args, nil, false
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// optionalDuration is a duration flag that remembers whether it was given.
type optionalDuration struct {
	d   time.Duration
	set bool
}

func (o *optionalDuration) String() string {
	if !o.set {
		return ""
	}
	return o.d.String()
}

func (o *optionalDuration) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return errors.New("invalid duration")
	}
	o.d, o.set = d, true
	return nil
}

func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

func defaultMeta(argv []string) string {
	m := "dlock run: " + strings.Join(argv, " ")
	if len(m) > 200 {
		m = m[:197] + "..."
	}
	return m
}

// signalError is the cause of a wait cut short by a signal.
type signalError struct{ sig os.Signal }

func (e signalError) Error() string { return fmt.Sprintf("interrupted by %v", e.sig) }

// acquire takes the lock, giving up after wait (one attempt for 0) or when
// a signal arrives.
func acquire(ctx context.Context, c *dlock.Client, key string, ttl time.Duration, wait optionalDuration, sigs <-chan os.Signal) (*dlock.Lease, error) {
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
			r.lease, r.err = c.TryLock(ctx, key, dlock.WithTTL(ttl))
		case wait.set:
			wctx, wcancel := context.WithTimeout(ctx, wait.d)
			r.lease, r.err = c.Lock(wctx, key, dlock.WithTTL(ttl))
			wcancel()
		default:
			r.lease, r.err = c.Lock(ctx, key, dlock.WithTTL(ttl))
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

func describeAcquireError(ctx context.Context, c *dlock.Client, key string, wait optionalDuration, err error) error {
	var se signalError
	switch {
	case errors.As(err, &se):
		return &exitError{code: 128 + signalNumber(se.sig), err: fmt.Errorf("%v while waiting for lock %q", se.sig, key)}
	case errors.Is(err, dlock.ErrNotAcquired), wait.set && errors.Is(err, context.DeadlineExceeded):
		why := "held by another owner"
		if wait.d > 0 {
			why = "still held after " + wait.d.String()
		}
		return &exitError{code: ExitNotAcquired, err: fmt.Errorf("lock %q not acquired: %s%s", key, why, holderSummary(ctx, c, key))}
	}
	return err
}

// supervise runs argv under lease and decides the exit status.
func supervise(env Env, lease *dlock.Lease, argv []string, grace time.Duration, sigs <-chan os.Signal) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = env.Stdin, env.Stdout, env.Stderr
	cmd.Env = append(os.Environ(),
		"DLOCK_KEY="+lease.Key(),
		"DLOCK_TOKEN="+strconv.FormatUint(lease.Token(), 10))
	setProcessGroup(cmd)
	killWithParent(cmd)
	// Adopt the command's orphans from the start: a member left behind by
	// an exiting shell is then dlock's to reap once it has been ended.
	adoptOrphans()
	watch := startWatcher()
	jobs := notifyJobControl()
	defer stopSignals(jobs)
	if err := cmd.Start(); err != nil {
		watch.stop()
		releaseLease(lease)
		code := ExitCannotExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = ExitNotFound
		}
		return &exitError{code: code, err: fmt.Errorf("cannot run %s: %w", argv[0], err)}
	}
	pgid := cmd.Process.Pid
	watch.watch(pgid)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	leaseDone := lease.Done()
	var kill *time.Timer
	var killC <-chan time.Time
	var killAt time.Time
	var waitErr error
	defer func() {
		if kill != nil {
			kill.Stop()
		}
	}()
loop:
	for {
		select {
		case sig := <-sigs:
			signalGroup(pgid, sig)
		case sig := <-jobs:
			switch {
			case isStop(sig):
				// Stopped, dlock cannot renew: the lock may expire, but
				// COMMAND is stopped too and cannot work unlocked.
				stopGroupAndSelf(pgid)
			case lease.Err() == nil && time.Now().Before(lease.Deadline()):
				// Resumed: COMMAND resumes only if the lock is still ours.
				// If not, the loss below ends it.
				continueGroup(pgid)
			}
		case <-leaseDone:
			// The lock is gone: another holder may start any moment, so
			// the command must stop now, not when it is done.
			leaseDone = nil
			terminateGroup(pgid)
			killAt = time.Now().Add(grace)
			kill = time.NewTimer(grace)
			killC = kill.C
		case <-killC:
			killC = nil
			signalGroup(pgid, sigKILL)
		case waitErr = <-exited:
			break loop
		}
	}
	status, statusErr := exitStatus(cmd, waitErr)
	// Whatever COMMAND left running in its group (a job started with &, a
	// daemon that did not leave the group) must not outlive the lock: it
	// gets SIGTERM now and SIGKILL after grace, and the lock is released
	// only once the group is empty.
	reapOrphans(pgid)
	if groupAlive(pgid) {
		if killAt.IsZero() {
			if lease.Err() == nil {
				fmt.Fprintf(env.Stderr, "dlock run: warning: %s exited, leaving processes in its group; ending them before releasing %q\n", argv[0], lease.Key())
			}
			terminateGroup(pgid)
			killAt = time.Now().Add(grace)
		}
		reapGroup(pgid, killAt)
	}
	watch.stop()
	if statusErr != nil {
		releaseLease(lease)
		return statusErr
	}
	if lease.Err() != nil {
		// Lost, possibly just as the command exited.
		return lostError(lease, argv[0])
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	switch err := lease.Unlock(ctx); {
	case errors.Is(err, dlock.ErrNotHeld):
		return &exitError{code: ExitLockLost, err: fmt.Errorf("lock %q (token %d) was lost before %s finished (found at release)",
			lease.Key(), lease.Token(), argv[0])}
	case err != nil:
		fmt.Fprintf(env.Stderr, "dlock run: warning: releasing %q failed; it expires within its TTL: %v\n", lease.Key(), err)
	}
	if status != 0 {
		return &exitError{code: status, quiet: true}
	}
	return nil
}

// reapGroup waits until the process group is empty, killing it at killAt.
// Polling is the only portable way to see a group empty out once its
// leader has been reaped. SIGKILL cannot be ignored, so the wait ends
// soon after killAt unless a member is stuck in the kernel; the lock must
// not be given up while one is.
func reapGroup(pgid int, killAt time.Time) {
	killed := false
	for reapOrphans(pgid); groupAlive(pgid); reapOrphans(pgid) {
		if !killed && !time.Now().Before(killAt) {
			signalGroup(pgid, sigKILL)
			killed = true
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func lostError(lease *dlock.Lease, name string) error {
	return &exitError{code: ExitLockLost, err: fmt.Errorf("lock %q (token %d) was lost while %s ran; its process group was terminated",
		lease.Key(), lease.Token(), name)}
}

// exitStatus converts cmd's end into a shell-style status.
func exitStatus(cmd *exec.Cmd, waitErr error) (int, error) {
	var ee *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &ee) {
		return 0, fmt.Errorf("waiting for the command: %w", waitErr)
	}
	if sig, ok := terminatingSignal(cmd.ProcessState); ok {
		return 128 + sig, nil
	}
	return cmd.ProcessState.ExitCode(), nil
}

func releaseLease(l *dlock.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	_ = l.Unlock(ctx)
}
