// Package cli implements the dlock command: run a command under a
// distributed lock, inspect and break locks, and the incident demo.
//
// Every command reports through its exit status (see the Exit constants),
// and every non-zero status that dlock itself decides comes with exactly one
// line on stderr, so scripts can branch on the status and people can read
// the reason.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/dlockio/dlock"
)

// The Redis URL used when neither --redis nor $DLOCK_REDIS is given.
const (
	defaultRedisURL = "redis://127.0.0.1:6379/0"
	redisURLEnv     = "DLOCK_REDIS"
)

// Exit statuses. Where one fits, the numbers are those of BSD sysexits.h,
// which service managers and shell scripts already know.
const (
	ExitOK          = 0
	ExitNotHeld     = 1   // status, unlock: the lock is free
	ExitUsage       = 64  // EX_USAGE: bad flags, arguments, durations or URL
	ExitUnavailable = 69  // EX_UNAVAILABLE: the store is unreachable or failing
	ExitSoftware    = 70  // EX_SOFTWARE: an internal error (a bug)
	ExitNotAcquired = 75  // EX_TEMPFAIL: the lock was busy for all of --wait
	ExitLockLost    = 76  // the lock was lost while the command ran
	ExitCannotExec  = 126 // run: COMMAND exists but could not be started, as in sh
	ExitNotFound    = 127 // run: COMMAND not found, as in sh
)

// Env is the process context a command runs in. Stdin, Stdout and Stderr
// are handed to the child of "run" as they are, so pass the real files to
// let it use the terminal.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
}

// OSEnv returns the Env of the current process.
func OSEnv() Env {
	return Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
}

// command is one subcommand; run returns nil for status 0.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, s *invocation, args []string) error
}

func commands() []command {
	return []command{
		{"run", "run a command while holding a lock", runCommand},
		{"status", "show who holds a lock", statusCommand},
		{"list", "list held locks", listCommand},
		{"unlock", "break a lock (operator's break-glass)", unlockCommand},
		{"demo", "reproduce the double-processing incident, then fix it with dlock", demoCommand},
	}
}

// invocation is what one invocation shares between the global and the
// subcommand flag sets.
type invocation struct {
	env   Env
	cmd   string
	usage string // the subcommand's help text
	redis redisFlag
}

// Main runs the dlock command line with args (without the program name)
// and returns the process exit status.
func Main(ctx context.Context, args []string, env Env) int {
	s := &invocation{env: env}
	s.redis.value = env.Getenv(redisURLEnv)
	if s.redis.value == "" {
		s.redis.value = defaultRedisURL
	}
	fs := flag.NewFlagSet("dlock", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var(&s.redis, "redis", "Redis `URL`")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			s.mainUsage(env.Stdout)
			return ExitOK
		}
		return s.fail(usageErrorf("%v (see dlock --help)", err))
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return s.fail(usageErrorf("missing command (see dlock --help)"))
	}
	name := rest[0]
	if name == "help" {
		return s.help(ctx, rest[1:])
	}
	for _, c := range commands() {
		if c.name == name {
			s.cmd = name
			return s.exit(c.run(ctx, s, rest[1:]))
		}
	}
	return s.fail(usageErrorf("unknown command %q (see dlock --help)", name))
}

func (s *invocation) help(ctx context.Context, args []string) int {
	if len(args) == 0 {
		s.mainUsage(s.env.Stdout)
		return ExitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			s.cmd = c.name
			return s.exit(c.run(ctx, s, []string{"--help"}))
		}
	}
	return s.fail(usageErrorf("unknown command %q (see dlock --help)", args[0]))
}

func (s *invocation) mainUsage(w io.Writer) {
	var b strings.Builder
	b.WriteString("dlock: distributed locks on Redis, from the shell.\n\n")
	b.WriteString("Usage: dlock [--redis URL] COMMAND [FLAGS] [ARGS]\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(&b, "  %-8s %s\n", c.name, c.summary)
	}
	b.WriteString("\nRun 'dlock COMMAND --help' for a command's flags. Flags come before arguments.\n")
	b.WriteString(redisHelp)
	b.WriteString(exitHelp)
	_, _ = io.WriteString(w, b.String())
}

const redisHelp = `
--redis URL (default: $DLOCK_REDIS, else redis://127.0.0.1:6379/0), on any command:
  redis://[[user]:password@]host[:port][/db][?option=value...]
  rediss://...                                                   TLS
  redis+sentinel://[[user]:password@]host1:port1,host2:port2/mastername[/db]
  redis+cluster://[[user]:password@]host1:port1,host2:port2
  Options are go-redis option names in snake_case (dial_timeout=2s, ...).
  Sentinel URLs also take sentinel_username and sentinel_password; the
  userinfo part authenticates to the master. rediss+sentinel:// and
  rediss+cluster:// use TLS.
`

const exitHelp = `
Exit status:
  0   success (run: the command's own status, 128+N if it died by signal N)
  1   status, unlock: the lock is not held
  64  usage error: flags, arguments, durations, TTL or URL
  69  Redis unreachable or failing
  70  internal error
  75  run: lock not acquired within --wait
  76  run: lock lost while the command ran (the command was terminated)
  126, 127  run: the command could not be executed / was not found
`

// redisFlag is --redis; set records whether it was given explicitly (the
// demo runs on its embedded server unless it was).
type redisFlag struct {
	value string
	set   bool
}

func (f *redisFlag) String() string { return f.value }
func (f *redisFlag) Set(v string) error {
	f.value, f.set = v, true
	return nil
}

// flagSet returns a subcommand's flag set, which also accepts --redis.
// Its help text is usage followed by the flag defaults.
func (s *invocation) flagSet(usage string) *flag.FlagSet {
	fs := flag.NewFlagSet("dlock "+s.cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {} // parse errors become one-line messages instead
	fs.Var(&s.redis, "redis", "Redis `URL` (see dlock --help)")
	s.usage = usage
	return fs
}

// errHelp ends a command that printed its help: status 0.
var errHelp = errors.New("help shown")

// parse parses a subcommand's flags; --help prints usage and yields errHelp.
func (s *invocation) parse(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(s.env.Stdout, s.usage)
		fmt.Fprintln(s.env.Stdout, "\nFlags:")
		fs.SetOutput(s.env.Stdout)
		fs.PrintDefaults()
		return errHelp
	}
	if err != nil {
		return usageErrorf("%v (see dlock %s --help)", err, s.cmd)
	}
	return nil
}

// exitError carries a specific status. A nil err with quiet set passes a
// child's status through without a message.
type exitError struct {
	code  int
	err   error
	quiet bool
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

func usageErrorf(format string, a ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, a...)}
}

// exitCode maps an error to a status: explicit statuses first, then the
// library's sentinels.
func exitCode(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, dlock.ErrInvalidArgument):
		return ExitUsage
	case errors.Is(err, dlock.ErrBackend):
		return ExitUnavailable
	case errors.Is(err, dlock.ErrNotAcquired):
		return ExitNotAcquired
	case errors.Is(err, dlock.ErrLockLost), errors.Is(err, dlock.ErrNotHeld):
		return ExitLockLost
	}
	return ExitSoftware
}

// exit turns a command's result into a status, printing the one-line
// reason for a non-zero one.
func (s *invocation) exit(err error) int {
	if err == nil || errors.Is(err, errHelp) {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) && ee.quiet {
		return ee.code
	}
	return s.fail(err)
}

func (s *invocation) fail(err error) int {
	prog := "dlock"
	if s.cmd != "" {
		prog += " " + s.cmd
	}
	msg := strings.TrimPrefix(err.Error(), "dlock: ")
	msg = strings.ReplaceAll(msg, "\n", " ")
	fmt.Fprintf(s.env.Stderr, "%s: %s\n", prog, msg)
	return exitCode(err)
}
