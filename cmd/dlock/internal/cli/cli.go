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

// Exit statuses. Where one fits, the numbers are those of BSD sysexits.h,
// which service managers and shell scripts already know.
const (
	ExitOK          = 0
	ExitNotHeld     = 1   // status, unlock: the lock is free
	ExitUsage       = 64  // EX_USAGE: bad flags, arguments, durations or URL
	ExitUnavailable = 69  // EX_UNAVAILABLE: the store is unreachable or failing
	ExitSoftware    = 70  // EX_SOFTWARE: an internal error (a bug)
	ExitNotAcquired = 75  // EX_TEMPFAIL: the lock was busy for all of --wait
	ExitLockLost    = 76  // the lock was lost (or given up for a stopped command) while the command ran
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
	// Version is what --version prints; empty means dlock.Version. The
	// binary sets it from a variable that -ldflags "-X main.version=..."
	// overrides at build time.
	Version string
}

// OSEnv returns the Env of the current process.
func OSEnv() Env {
	return Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
}

// runFunc runs a command on its arguments; nil means status 0.
type runFunc func(ctx context.Context, s *invocation, args []string) error

// version is the version this invocation reports.
func (s *invocation) version() string {
	if s.env.Version != "" {
		return s.env.Version
	}
	return dlock.Version
}

// command is one subcommand. define declares its flags on f (the one place
// a flag is added: help, environment and completion follow from it; opts
// may add some, as --metrics-addr) and returns the function that runs the
// command with their parsed values. Store flags are declared by start.
type command struct {
	name    string
	summary string
	usage   string
	noEnv   bool // reads no DLOCK_* variable (demo, completion, version)
	stores  bool // takes every store's flag (run, status, list, unlock)
	define  func(f *flagSet, opts Options) runFunc
}

func commands() []command {
	return []command{
		{name: "run", stores: true, summary: "run a command while holding a lock", usage: runUsage, define: defineRun},
		{name: "status", stores: true, summary: "show who holds a lock", usage: statusUsage, define: defineStatus},
		{name: "list", stores: true, summary: "list held locks, readers, permits and waiters", usage: listUsage, define: defineList},
		{name: "unlock", stores: true, summary: "break a lock (operator's break-glass)", usage: unlockUsage, define: defineUnlock},
		{name: "demo", summary: "reproduce the double-processing incident, then fix it with dlock", usage: demoUsage, noEnv: true, define: defineDemo},
		{name: "completion", summary: "print a shell completion script (bash, zsh, fish)", usage: completionUsage, noEnv: true, define: defineCompletion},
		{name: "version", summary: "print dlock's version", usage: versionUsage, noEnv: true, define: defineVersion},
	}
}

// invocation is what one invocation shares between the global and the
// subcommand flag sets.
type invocation struct {
	env    Env
	opts   Options
	cmd    *command
	flags  *flagSet // the subcommand's
	stores []*store // Redis first, then opts.Backends
	tls    *tlsFlags
}

// Main runs the dlock command line with args (without the program name)
// and returns the process exit status. opts adds the stores and the
// metrics exporter the binary links in (the zero Options: Redis only).
//
// A run interrupted during --min-hold returns without releasing its lock
// (it is left to expire, as if dlock had been killed), so the caller must
// exit the process with the returned status, as cmd/dlock does.
func Main(ctx context.Context, args []string, env Env, opts Options) int {
	s := &invocation{env: env, opts: opts}
	if err := opts.validate(); err != nil {
		return s.fail(err)
	}
	s.stores = newStores(opts.Backends, env.Getenv)
	s.tls = newTLSFlags(env.Getenv)
	g := newFlagSet("")
	for _, spec := range s.globalFlagSpecs() {
		g.add(spec)
	}
	showVersion := g.boolean("version", "V", "print the version and exit")
	g.noEnv()
	err := g.parseArgs(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		s.mainUsage(env.Stdout)
		return ExitOK
	case err != nil:
		return s.fail(err)
	case *showVersion:
		fmt.Fprintln(env.Stdout, "dlock", s.version())
		return ExitOK
	}
	rest := g.fs.Args()
	if len(rest) == 0 {
		return s.fail(usageErrorf("missing command (see dlock --help)"))
	}
	name := rest[0]
	if name == "help" {
		return s.help(ctx, rest[1:])
	}
	if c := findCommand(name); c != nil {
		return s.exit(s.start(c)(ctx, s, rest[1:]))
	}
	return s.fail(usageErrorf("unknown command %q (see dlock --help)", name))
}

func findCommand(name string) *command {
	for _, c := range commands() {
		if c.name == name {
			return &c
		}
	}
	return nil
}

// start declares c's flags (with the store flags it takes) and returns
// its runner.
func (s *invocation) start(c *command) runFunc {
	s.cmd = c
	s.flags = newFlagSet(c.name)
	s.flags.envOff = c.noEnv
	switch {
	case c.stores:
		for _, spec := range s.globalFlagSpecs() {
			s.flags.add(spec)
		}
	case c.name == "demo": // Redis only: the naive lock it shows is Redis's
		s.flags.add(s.redis().flagSpec())
	}
	return c.define(s.flags, s.opts)
}

func (s *invocation) help(ctx context.Context, args []string) int {
	if len(args) == 0 {
		s.mainUsage(s.env.Stdout)
		return ExitOK
	}
	if c := findCommand(args[0]); c != nil {
		return s.exit(s.start(c)(ctx, s, []string{"--help"}))
	}
	return s.fail(usageErrorf("unknown command %q (see dlock --help)", args[0]))
}

func (s *invocation) mainUsage(w io.Writer) {
	var b strings.Builder
	names := []string{"Redis"}
	for _, st := range s.stores[1:] {
		names = append(names, st.backend.Flag)
	}
	fmt.Fprintf(&b, "dlock: distributed locks on %s, from the shell.\n\n", strings.Join(names, " or "))
	var stores []string
	for _, st := range s.stores {
		stores = append(stores, "--"+st.backend.Flag+" "+st.backend.Arg)
	}
	fmt.Fprintf(&b, "Usage: dlock [%s] COMMAND [FLAGS] [ARGS]\n       dlock --version\n\nCommands:\n", strings.Join(stores, " | "))
	for _, c := range commands() {
		fmt.Fprintf(&b, "  %-10s %s\n", c.name, c.summary)
	}
	b.WriteString("\nRun 'dlock COMMAND --help' for a command's flags. Flags come before arguments\n(run: before the \"--\"). See docs/cli.md for the flock/consul lock comparison.\n")
	b.WriteString(envHelp)
	b.WriteString(redisHelp)
	b.WriteString(s.storeHelp())
	b.WriteString(exitHelp)
	_, _ = io.WriteString(w, b.String())
}

const envHelp = `
Every flag of run, status, list and unlock can also be set by a DLOCK_*
variable named after its long form (--min-hold: DLOCK_MIN_HOLD=2m,
--quiet: DLOCK_QUIET=1). A flag on the command line wins over the variable,
the variable over the default; a bad value in either is a usage error (64).
Not from the environment: unlock --force, run -c, --shared, --permits and
status --watch (they say what to do, not how), -n (its variable form is
DLOCK_WAIT=0), --help and --version.
demo, completion and version read no variables.
Durations are seconds (10, 0.5) or Go durations (1m30s, 500ms).
`

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

Credentials and TLS, for the store in use (also before the command name):
  --redis-password-file FILE   the password, from FILE ($DLOCK_REDIS_PASSWORD_FILE)
  --tls-ca FILE                CA certificates to verify the store with ($DLOCK_TLS_CA)
  --tls-cert FILE, --tls-key FILE   client certificate and key ($DLOCK_TLS_CERT, $DLOCK_TLS_KEY)
  --tls-insecure-skip-verify   INSECURE: no certificate verification
  They add password_file=, ca_file=, cert_file=, key_file= and
  insecure_skip_verify=true to the store's address (options it may also
  hold itself; insecure_skip_verify needs --tls-insecure-skip-verify).
  COMMAND does not inherit DLOCK_REDIS or any other store variable.
`

const exitHelp = `
Exit status:
  0   success (run: the command's own status, 128+N if it died by signal N)
  1   status, unlock: the lock is not held
  64  usage error: flags, variables, arguments, durations, TTL or URL
      (also a database number the server does not have)
  69  the store unreachable, failing or not answering in time
  70  internal error
  75  run: lock not acquired within --wait (-E CODE changes it)
  76  run: lock lost while the command ran, or the command stayed stopped
      for a TTL with no terminal (the command was terminated)
  126, 127  run: the command could not be executed / was not found
  128+N     run: signal N while waiting for the lock or during --min-hold
`

// errHelp ends a command that printed its help: status 0.
var errHelp = errors.New("help shown")

// parse parses the subcommand's flags (and, unless the command reads
// none, the environment); --help prints usage and yields errHelp.
func (s *invocation) parse(args []string) error {
	if err := s.flags.applyEnv(s.env.Getenv); err != nil {
		return err
	}
	return s.parseArgs(args)
}

// parseArgs parses command-line flags only (the environment applied).
func (s *invocation) parseArgs(args []string) error {
	err := s.flags.parseArgs(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(s.env.Stdout, s.cmd.usage)
		fmt.Fprintln(s.env.Stdout, "\nFlags:")
		s.flags.writeHelp(s.env.Stdout)
		return errHelp
	}
	return err
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
	case errors.Is(err, errOptions):
		return ExitSoftware
	case errors.Is(err, dlock.ErrInvalidArgument), errors.Is(err, dlock.ErrUnsupported):
		// The store cannot do what the command line asked (status on a
		// quorum of Redis masters, --shared without a queue): a request
		// to change, as a bad flag is, not a fault of dlock's.
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
	s.report(err)
	return exitCode(err)
}

// report prints err as the command's one-line message (fail's, and that
// of a refresh of status --watch, which goes on).
func (s *invocation) report(err error) {
	prog := "dlock"
	if s.cmd != nil {
		prog += " " + s.cmd.name
	}
	msg := strings.TrimPrefix(err.Error(), "dlock: ")
	msg = strings.ReplaceAll(msg, "\n", " ")
	fmt.Fprintf(s.env.Stderr, "%s: %s\n", prog, msg)
}
