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
	loss    *lossWatch // why the lease was lost
}

// run runs argv under the lease and decides the exit status.
func (sv *supervisor) run() error {
	cmd := sv.command()
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
		releaseLease(sv.lease)
		code := ExitCannotExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = ExitNotFound
		}
		return &exitError{code: code, err: fmt.Errorf("cannot run %s: %w", sv.argv[0], err)}
	}
	g := &supervision{sv: sv, term: term, pgid: cmd.Process.Pid, leaseDone: sv.lease.Done()}
	defer g.stopTimers()
	if inForeground {
		term.gaveTo(g.pgid)
	}
	watch.watch(g.pgid)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	waitErr := g.loop(jobs, chld, exited)
	status, statusErr := exitStatus(cmd, waitErr)
	g.endLeftovers()
	watch.stop()
	term.reclaim()
	return g.finish(status, statusErr)
}

// command is COMMAND, to be started in a process group of its own, with
// the lease's key and token in its environment and not the store's
// variables.
func (sv *supervisor) command() *exec.Cmd {
	cmd := exec.Command(sv.argv[0], sv.argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = sv.env.Stdin, sv.env.Stdout, sv.env.Stderr
	cmd.Env = append(withoutVariables(os.Environ(), sv.dropEnv),
		"DLOCK_KEY="+sv.lease.Key(),
		"DLOCK_TOKEN="+strconv.FormatUint(sv.lease.Token(), 10))
	setProcessGroup(cmd)
	killWithParent(cmd)
	return cmd
}

// supervision is the state of a running COMMAND's process group, which
// run's event loop moves on one event at a time: each case of loop is one
// of the methods below.
type supervision struct {
	sv        *supervisor
	term      *terminal
	pgid      int
	leaseDone <-chan struct{} // nil once the loss was handled
	// The group is being ended (killAt set): SIGTERM was sent, SIGKILL
	// follows when killC fires.
	kill   *time.Timer
	killC  <-chan time.Time
	killAt time.Time
	// stoppedByDlock: dlock stopped the group itself (Ctrl-Z) and resumes
	// it on SIGCONT.
	stoppedByDlock bool
	// giveUp runs while COMMAND is stopped by something else and no
	// terminal can bring it back; it is ended (givenUp) if still stopped
	// a TTL later.
	giveUp  *time.Timer
	giveUpC <-chan time.Time
	givenUp bool
}

// loop handles events until COMMAND exits, and returns what Wait said.
func (g *supervision) loop(jobs, chld <-chan os.Signal, exited <-chan error) error {
	for {
		select {
		case sig := <-g.sv.sigs:
			g.forward(sig)
		case sig := <-jobs:
			g.jobControl(sig)
		case <-chld:
			g.childStateChanged()
		case <-g.giveUpC:
			g.giveUpDue()
		case <-g.leaseDone:
			g.leaseLost()
		case <-g.killC:
			g.killC = nil
			signalGroup(g.pgid, sigKILL)
		case err := <-exited:
			return err
		}
	}
}

// forward passes a signal for dlock on to COMMAND's group.
func (g *supervision) forward(sig os.Signal) {
	signalGroup(g.pgid, sig)
	if commandExited(g.pgid) {
		g.sv.lateSig = sig
	}
}

// jobControl is dlock itself being stopped (Ctrl-Z) or continued (fg, bg).
func (g *supervision) jobControl(sig os.Signal) {
	lease := g.sv.lease
	switch {
	case isStop(sig):
		g.stopAll()
	case lease.Err() == nil && time.Now().Before(lease.Deadline()):
		// Resumed: COMMAND resumes only if the lock is still ours (if
		// not, the loss ends it), with the terminal if dlock was resumed
		// in the foreground (fg).
		g.stoppedByDlock = false
		g.term.give(g.pgid)
		continueGroup(g.pgid)
	}
}

// childStateChanged is COMMAND stopped or continued by someone else.
func (g *supervision) childStateChanged() {
	switch {
	case g.stoppedByDlock || !g.killAt.IsZero() || g.giveUpC != nil && commandStopped(g.pgid):
		// Ours, already being ended, or already counted.
	case !commandStopped(g.pgid):
		g.stopGiveUp() // continued by whoever stopped it
	case g.term != nil:
		// Stopped by the terminal (Ctrl-Z reaches COMMAND's group when it
		// has the terminal; SIGTTIN after bg) or by a signal: as a job of
		// the terminal, dlock stops with it, so the shell sees the job
		// stopped and fg resumes both.
		g.stopAll()
	default:
		// No terminal, so no job control to resume it: a stopped COMMAND
		// cannot run, and dlock does not hold a lock for it for longer
		// than a TTL.
		g.giveUp = time.NewTimer(g.sv.ttl)
		g.giveUpC = g.giveUp.C
	}
}

// giveUpDue ends COMMAND if it is still stopped a TTL after it stopped.
func (g *supervision) giveUpDue() {
	g.giveUp, g.giveUpC = nil, nil
	if commandStopped(g.pgid) && g.killAt.IsZero() {
		g.givenUp = true
		g.terminate()
	}
}

// leaseLost ends COMMAND: another holder may start any moment, so the
// command must stop now, not when it is done.
func (g *supervision) leaseLost() {
	g.leaseDone = nil
	g.stopGiveUp()
	g.terminate()
}

// terminate sends the group SIGTERM, and SIGKILL after the grace period.
func (g *supervision) terminate() {
	terminateGroup(g.pgid)
	g.killAt = time.Now().Add(g.sv.grace)
	g.kill = time.NewTimer(g.sv.grace)
	g.killC = g.kill.C
}

// stopAll stops COMMAND's group and dlock with it. Stopped, dlock cannot
// renew: the lock may expire, but COMMAND is stopped too and cannot work
// unlocked.
func (g *supervision) stopAll() {
	g.stoppedByDlock = true
	g.stopGiveUp()
	g.term.reclaim()
	stopGroupAndSelf(g.pgid)
}

func (g *supervision) stopGiveUp() {
	if g.giveUp != nil {
		g.giveUp.Stop()
		g.giveUp, g.giveUpC = nil, nil
	}
}

func (g *supervision) stopTimers() {
	if g.kill != nil {
		g.kill.Stop()
	}
	g.stopGiveUp()
}

// endLeftovers ends whatever COMMAND left running in its group (a job
// started with &, a daemon that did not leave the group): it must not
// outlive the lock. It gets SIGTERM now and SIGKILL after grace, and the
// lock is released only once the group is empty.
func (g *supervision) endLeftovers() {
	reapOrphans(g.pgid)
	if !groupAlive(g.pgid) {
		return
	}
	if g.killAt.IsZero() {
		if g.sv.lease.Err() == nil {
			fmt.Fprintf(g.sv.env.Stderr, "dlock run: warning: %s exited, leaving processes in its group; ending them before releasing %q\n", g.sv.argv[0], g.sv.lease.Key())
		}
		terminateGroup(g.pgid)
		g.killAt = time.Now().Add(g.sv.grace)
	}
	reapGroup(g.pgid, g.killAt)
}

// finish decides run's result once COMMAND and its group have ended with
// status, and releases the lock unless it was lost.
func (g *supervision) finish(status int, statusErr error) error {
	sv, lease := g.sv, g.sv.lease
	if statusErr != nil {
		releaseLease(lease)
		return statusErr
	}
	if lease.Err() != nil {
		// Lost, possibly just as the command exited.
		return lostError(lease, sv.argv[0], sv.loss.reason())
	}
	if g.givenUp {
		releaseLease(lease)
		return &exitError{code: ExitLockLost, err: fmt.Errorf(
			"%s stayed stopped for %v with no terminal to resume it: its process group was terminated and lock %q (token %d) released",
			sv.argv[0], sv.ttl, lease.Key(), lease.Token())}
	}
	if err := sv.minHold(status); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	switch err := lease.Unlock(ctx); {
	case errors.Is(err, dlock.ErrNotHeld):
		return &exitError{code: ExitLockLost, err: fmt.Errorf("lock %q (token %d) was lost before %s finished (found at release): %s",
			lease.Key(), lease.Token(), sv.argv[0], takenAway)}
	case err != nil:
		fmt.Fprintf(sv.env.Stderr, "dlock run: warning: releasing %q failed; it expires within its TTL: %v\n", lease.Key(), err)
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
		left := time.Until(sv.holdUntil).Round(time.Millisecond)
		fmt.Fprintf(sv.env.Stderr, "dlock run: warning: lock %q (token %d) was lost during --min-hold, %v before its end%s\n",
			sv.lease.Key(), sv.lease.Token(), left, because(sv.loss.reason()))
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

// lostError is the exit of a run whose lease was lost while COMMAND
// (called name) ran, for reason ("" when the Client did not say).
func lostError(lease *dlock.Lease, name, reason string) error {
	return &exitError{code: ExitLockLost, err: fmt.Errorf("lock %q (token %d) was lost while %s ran%s; its process group was terminated",
		lease.Key(), lease.Token(), name, because(reason))}
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
