package cli

// runUsage is "dlock run --help": what run guarantees, exactly. README's
// CLI section and docs/cli.md say the same at more length.
const runUsage = `Usage: dlock run [FLAGS] KEY -- COMMAND [ARGS...]
       dlock run [FLAGS] KEY -c 'SHELL COMMAND'
  e.g. dlock run -n -q --min-hold 4m nightly-report -- ./report.sh    (cron: at most once per 4m, silent when skipped)

Acquires the lock KEY, runs COMMAND with DLOCK_KEY and DLOCK_TOKEN (the
fencing token, decimal) added to its environment, keeps the lock renewed
while COMMAND runs, and releases it when COMMAND and its process group have
ended.

Flags may come before or after KEY, but all before the "--"; everything
after the "--" is COMMAND. Without "--", flags must precede KEY, except
with -c (flock's "flock FILE -c STRING" order works), and what follows KEY
is COMMAND's, as given. Short flags combine, and a value may be attached,
as with getopt (-nq is -n -q; -qw 5 is -q -w 5; -w5 is -w 5). -n (also
--nb, --nonblock, as in flock) is flock's no-wait and takes no value ("-n
3" is refused; 3 permits are --permits 3). flock's -x and -e are taken
(the exclusive lock, the default); its -o, -F, -u, --fcntl and --timeout
(here --wait) are refused with what to write instead. Durations are
seconds (10, 0.5) or Go durations (1m30s).
Every flag but -n, -x, -c, --shared, --permits and --help can be set by
its DLOCK_* variable (shown below); the command line wins over the
variable.

Shared runs: --shared (-s) takes a read lease of the read-write lock KEY
instead of the lock: any number of --shared runs hold KEY at once, and a
plain run (which is the write side of the same lock) excludes them and is
excluded by them. Readers and writers wait in one queue in arrival order,
so a stream of --shared runs does not starve a plain one. DLOCK_TOKEN is
then the write epoch the reader sees (see docs/rwlock.md), not a token of
its own. --permits N (-p N) takes one of N permits of the semaphore KEY:
at most N such runs hold KEY at once, in arrival order; DLOCK_TOKEN then
means nothing (status shows each permit's id). N is the name's while it has
permits or waiters: a run that asks with another N then is refused (exit
64); once the name is idle, the next run's N applies.
Every reader and permit is a lease of its own, renewed, and lost, like the
lock.

Waiting: by default dlock waits for the lock as long as it takes; --wait D
gives up after D, -n (--wait 0) after one attempt; either way a lock
still held exits 75 (-E CODE to change it) with one line on stderr (-q:
none). A store that accepts the connection but does not answer is
reported unreachable (69) within about half a second with -n, or just
after --wait. A signal that arrives while dlock waits ends the wait with
status 128+N.

COMMAND runs in its own process group. SIGINT, SIGTERM and SIGHUP sent to
dlock are forwarded to that group. When COMMAND exits, whatever it left
running in the group (a job started with &) gets SIGTERM, and SIGKILL
after --grace; the lock is released only once the group is empty. A
process that leaves the group (setsid, setpgid) is not followed.

In a terminal (Linux), if dlock is in the foreground, COMMAND's group is
made the terminal's foreground group as it starts: COMMAND can read the
terminal, and Ctrl-C and Ctrl-Z go to it directly. dlock takes the terminal
back when the group has ended (before --min-hold) and when it stops.

If the lock is lost while COMMAND runs (it expired during a network outage,
or an operator ran 'dlock unlock --force'), the whole group gets SIGTERM at
once and SIGKILL after --grace, and dlock exits 76, saying which it was.

If dlock itself dies (SIGKILL, an OOM kill, a crash) while COMMAND runs,
COMMAND's group is killed too: on Linux the kernel sends COMMAND SIGKILL
(a parent-death signal), and a small /bin/sh watcher ("dlock-watch PGID"
in ps), in a process group of its own, sends the whole group SIGKILL (on
other Unix systems the watcher alone). The lock is then not released; it
expires after --ttl.

--min-hold D: when COMMAND (and its group) ends less than D after the lock
was acquired, dlock keeps holding it, renewed, until D has passed, then
releases it and exits with COMMAND's status: however often COMMAND is
started on however many hosts, at most one run starts per window D. The
window is held by this dlock process, so:
  - killed (SIGKILL, OOM) during the hold, dlock does not release: the lock
    stays until its TTL runs out, counted from the last renewal; while
    renewals succeed that is at least 2/3 of --ttl (renewals come every
    TTL/3; less a renewal's round trip) and at most --ttl after the kill. Use --ttl >= 1.5 x --min-hold
    for the window to survive a kill at any moment (a killed dlock then
    also blocks others that long);
  - SIGINT, SIGTERM or SIGHUP during the hold ends it the same way: dlock
    exits 128+N at once and leaves the lock to expire, unreleased;
  - a lock lost during the hold (unlock --force, an outage) is reported in
    one warning line; COMMAND's status stands.

Stops. Ctrl-Z (the terminal's SIGTSTP, to COMMAND's group while it has the
terminal) or SIGTSTP sent to dlock stops COMMAND's group with SIGSTOP, then
dlock. Stopped, dlock does not renew, so the lock may expire, but nothing
of COMMAND runs. On SIGCONT (fg, bg) COMMAND resumes if the lock is still
held, with the terminal on fg; if it was lost, the group is ended as for
any lost lock (76). COMMAND stopped by
anything else (SIGTTIN when dlock runs in the background, kill -STOP) is
handled the same way when dlock has a controlling terminal; without one
(cron, systemd) dlock keeps the lock for a stopped COMMAND at most one
--ttl: still stopped then, its group is ended (SIGTERM and SIGCONT, SIGKILL
after --grace), the lock released (no --min-hold) and dlock exits 76.
Watched on Linux, for COMMAND itself (not the rest of its group). Not
covered: SIGSTOP sent to dlock alone.

Exit status: COMMAND's own (128+N if it died by signal N) when it ran to the
end under the lock; 64 usage error; 69 the store unreachable or not answering;
75 (or -E CODE) not acquired within --wait; 76 lock lost while COMMAND
ran, or COMMAND stayed stopped a TTL with no terminal; 126/127 COMMAND could not be executed / was not found; 128+N a signal
while waiting or during --min-hold.
`
