package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/dlockio/dlock"
)

// supervisor runs COMMAND under a lease.
type supervisor struct {
	env       Env
	lease     *dlock.Lease
	argv      []string
	grace     time.Duration
	sigs      <-chan os.Signal
	holdUntil time.Time // --min-hold: release no earlier than this
	abandoned bool      // the lease was left to expire in the store; do not Close
	// lateSig arrived after COMMAND had exited, before dlock saw it exit:
	// forwarded to what is left of the group, and it also ends --min-hold.
	lateSig os.Signal
	ttl     time.Duration
	// dropEnv are the variables COMMAND does not inherit: the store's
	// address and credentials are dlock's (see storeVariables).
	dropEnv []string
}

// run runs argv under the lease and decides the exit status.
func (sv *supervisor) run() error {
	env, lease, argv, grace, sigs := sv.env, sv.lease, sv.argv, sv.grace, sv.sigs
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = env.Stdin, env.Stdout, env.Stderr
	cmd.Env = append(withoutVariables(os.Environ(), sv.dropEnv),
		"DLOCK_KEY="+lease.Key(),
		"DLOCK_TOKEN="+strconv.FormatUint(lease.Token(), 10))
	setProcessGroup(cmd)
	killWithParent(cmd)
	// In a terminal's foreground, COMMAND's group takes the terminal as it
	// starts, so that it can read it and gets Ctrl-C and Ctrl-Z itself.
	term := openTerminal()
	defer term.close()
	inForeground := term.startInForeground(cmd)
	// Adopt the command's orphans from the start: a member left behind by
	// an exiting shell is then dlock's to reap once it has been ended.
	adoptOrphans()
	watch := startWatcher()
	jobs := notifyJobControl()
	defer stopSignals(jobs)
	chld := notifyChildStops()
	defer stopSignals(chld)
	err := cmd.Start()
	if term != nil {
		defer ignoreTTOU()()
	}
	if err != nil {
		if inForeground { // the child took the terminal before its exec failed
			term.restore()
		}
		watch.stop()
		releaseLease(lease)
		code := ExitCannotExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = ExitNotFound
		}
		return &exitError{code: code, err: fmt.Errorf("cannot run %s: %w", argv[0], err)}
	}
	pgid := cmd.Process.Pid
	if inForeground {
		term.gaveTo(pgid)
	}
	watch.watch(pgid)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	leaseDone := lease.Done()
	var kill *time.Timer
	var killC <-chan time.Time
	var killAt time.Time
	var waitErr error
	// stoppedByDlock: dlock stopped the group itself (Ctrl-Z) and resumes
	// it on SIGCONT. giveUp: COMMAND was stopped by something else and no
	// terminal can bring it back; it is ended (givenUp) if still stopped a
	// TTL later.
	stoppedByDlock, givenUp := false, false
	var giveUp *time.Timer
	var giveUpC <-chan time.Time
	stopGiveUp := func() {
		if giveUp != nil {
			giveUp.Stop()
			giveUp, giveUpC = nil, nil
		}
	}
	defer func() {
		if kill != nil {
			kill.Stop()
		}
		stopGiveUp()
	}()
	stopAll := func() {
		// Stopped, dlock cannot renew: the lock may expire, but COMMAND
		// is stopped too and cannot work unlocked.
		stoppedByDlock = true
		stopGiveUp()
		term.reclaim()
		stopGroupAndSelf(pgid)
	}
loop:
	for {
		select {
		case sig := <-sigs:
			signalGroup(pgid, sig)
			if commandExited(pgid) {
				sv.lateSig = sig
			}
		case sig := <-jobs:
			switch {
			case isStop(sig):
				stopAll()
			case lease.Err() == nil && time.Now().Before(lease.Deadline()):
				// Resumed: COMMAND resumes only if the lock is still ours
				// (if not, the loss below ends it), with the terminal if
				// dlock was resumed in the foreground (fg).
				stoppedByDlock = false
				term.give(pgid)
				continueGroup(pgid)
			}
		case <-chld:
			switch {
			case stoppedByDlock || !killAt.IsZero() || giveUpC != nil && commandStopped(pgid):
				// Ours, already being ended, or already counted.
			case !commandStopped(pgid):
				stopGiveUp() // continued by whoever stopped it
			case term != nil:
				// Stopped by the terminal (Ctrl-Z reaches COMMAND's group
				// when it has the terminal; SIGTTIN after bg) or by a
				// signal: as a job of the terminal, dlock stops with it,
				// so the shell sees the job stopped and fg resumes both.
				stopAll()
			default:
				// No terminal, so no job control to resume it: a stopped
				// COMMAND cannot run, and dlock does not hold a lock for
				// it for longer than a TTL.
				giveUp = time.NewTimer(sv.ttl)
				giveUpC = giveUp.C
			}
		case <-giveUpC:
			giveUp, giveUpC = nil, nil
			if commandStopped(pgid) && killAt.IsZero() {
				givenUp = true
				terminateGroup(pgid)
				killAt = time.Now().Add(grace)
				kill = time.NewTimer(grace)
				killC = kill.C
			}
		case <-leaseDone:
			// The lock is gone: another holder may start any moment, so
			// the command must stop now, not when it is done.
			leaseDone = nil
			stopGiveUp()
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
	term.reclaim()
	if statusErr != nil {
		releaseLease(lease)
		return statusErr
	}
	if lease.Err() != nil {
		// Lost, possibly just as the command exited.
		return lostError(lease, argv[0])
	}
	if givenUp {
		releaseLease(lease)
		return &exitError{code: ExitLockLost, err: fmt.Errorf(
			"%s stayed stopped for %v with no terminal to resume it: its process group was terminated and lock %q (token %d) released",
			argv[0], sv.ttl, lease.Key(), lease.Token())}
	}
	if err := sv.minHold(status); err != nil {
		return err
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

// minHold keeps the lock, renewed, until holdUntil (--min-hold), after
// COMMAND and its group have ended with status. A signal ends the hold
// without releasing: the lock then stays in the store until its TTL runs
// out, as if dlock had been killed, so that stopping dlock does not open
// the window to a second run at once. A lock lost meanwhile is reported
// in one warning line; COMMAND's status stands.
func (sv *supervisor) minHold(status int) error {
	left := time.Until(sv.holdUntil)
	if left <= 0 {
		return nil
	}
	if sv.lateSig != nil {
		return sv.abandon(sv.lateSig)
	}
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-sv.lease.Done():
		fmt.Fprintf(sv.env.Stderr, "dlock run: warning: lock %q (token %d) was lost during --min-hold, %v before its end: %v\n",
			sv.lease.Key(), sv.lease.Token(), time.Until(sv.holdUntil).Round(time.Millisecond), sv.lease.Err())
		if status != 0 {
			return &exitError{code: status, quiet: true}
		}
		return nil
	case sig := <-sv.sigs:
		return sv.abandon(sig)
	}
}

// abandon ends --min-hold on sig without releasing.
func (sv *supervisor) abandon(sig os.Signal) error {
	sv.abandoned = true
	return &exitError{code: 128 + signalNumber(sig), err: fmt.Errorf(
		"%v during --min-hold: lock %q (token %d) left in place; it expires within its TTL (%v), not released",
		sig, sv.lease.Key(), sv.lease.Token(), sv.lease.TTL())}
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
