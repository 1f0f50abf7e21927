package cli

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dlockio/dlock"
)

// runOptions are run's parsed flags.
type runOptions struct {
	ttl          *time.Duration
	wait         *optionalDuration
	grace        *time.Duration
	minHold      *time.Duration
	meta         *string
	conflictExit *int
	quiet        *bool
	verbose      *bool
	shell        *string
	kind         leaseKind // --shared, --permits (shared.go)
	metricsAddr  *string   // nil unless the binary has a metrics exporter
}

// defineRun declares run's flags. -n is flock's no-wait, as in
// flock(1); consul lock's "-n N" (N permits) is spelled --permits here
// (see docs/cli.md).
func defineRun(f *flagSet, opts Options) runFunc {
	o := declareRunFlags(f)
	if opts.Metrics != nil {
		o.metricsAddr = f.str("metrics-addr", "", "ADDR",
			"serve this run's metrics over HTTP at ADDR (host:port, :9464), path /metrics, until dlock exits", "")
	}
	return func(ctx context.Context, s *invocation, args []string) error { return runCommand(ctx, s, o, args) }
}

func declareRunFlags(f *flagSet) *runOptions {
	o := &runOptions{}
	o.ttl = f.duration("ttl", "", dlock.DefaultTTL, true,
		"lock time-to-live; renewed every TTL/3 while COMMAND runs, it bounds how long a killed dlock blocks others. Not given: 30s, or the longest the store takes if shorter (ZooKeeper)")
	o.wait = f.optDuration("wait", "w",
		"give up after waiting this long for the lock; 0 makes one attempt", "wait forever")
	// --nb and --nonblock are flock's long forms. flock's --timeout is
	// not taken: status, list and unlock have a --timeout (and
	// DLOCK_TIMEOUT) for the store's answer, not for a wait.
	f.add(&flagSpec{name: "nowait", short: "n", aliases: []string{"nb", "nonblock"},
		usage: "one attempt, no waiting: the same as --wait 0 (flock -n)", value: nowaitValue{o.wait}})
	o.conflictExit = f.integer("conflict-exit-code", "E", ExitNotAcquired, 0, 255,
		"exit status when the lock is not acquired within --wait (flock -E)")
	o.quiet = f.boolean("quiet", "q", "print nothing when the lock is not acquired (a skipped cron run sends no mail)")
	o.minHold = f.duration("min-hold", "", 0, false,
		"keep the lock until at least this long after it was acquired, even if COMMAND ends sooner: at most one run starts per window (ShedLock's lockAtLeastFor)")
	o.grace = f.duration("grace", "", runGrace, false,
		"time between SIGTERM and SIGKILL to COMMAND's process group, after a lost lock or to what COMMAND left running")
	o.meta = f.str("meta", "", "TEXT", "free text stored with the lock for operators, readable by anyone who can read the store", "\"dlock run: \" and COMMAND's program name, no arguments")
	// --shared and --permits say what is taken, as -c says what runs: a
	// variable left exported must not turn an exclusive run into one that
	// shares, so they have none.
	o.kind.shared = f.boolean("shared", "s", "take a read lease of the read-write lock KEY: shared with other --shared runs, excluded by plain runs (flock -s)")
	f.noEnv()
	// flock's -x and -e: the exclusive lock, which is the default. As in
	// flock, the last of -s and -x counts.
	f.add(&flagSpec{name: "exclusive", short: "x", aliases: []string{"e"},
		usage: "take the lock exclusively, the default; undoes an earlier --shared (flock -x, -e)",
		value: exclusiveValue{&o.kind}})
	o.kind.permits = f.integer("permits", "p", 0, 0, dlock.MaxPermits,
		"take one of N permits of the semaphore KEY: at most N such runs at once (consul lock -n N)")
	f.noEnv()
	o.shell = f.str("command", "c", "STRING", "run STRING with /bin/sh -c instead of a COMMAND after -- (flock -c)", "")
	f.noEnv()
	o.verbose = f.boolean("verbose", "v", "log renewal failures to stderr")
	refuseFlockFlags(f)
	return o
}

// refuseFlockFlags declares flock(1)'s flags that have no place in
// dlock's model, each with a message that says what to write instead.
func refuseFlockFlags(f *flagSet) {
	f.refuse("flock's --timeout is --wait here (-w 10, --wait 1m30s); dlock's --timeout, on status, list and unlock, bounds the store's answer",
		"timeout")
	f.refuse("flock's --close keeps what COMMAND leaves running from holding the lock; dlock never hands the lock to COMMAND, "+
		"and ends what it leaves running (SIGTERM, SIGKILL after --grace) before releasing: leave it out",
		"o", "close")
	f.refuse("flock's --no-fork runs COMMAND in flock's place; dlock stays to renew the lock, "+
		"with COMMAND as its child (signals forwarded, its exit status passed through): leave it out",
		"F", "no-fork")
	f.refuse("flock's --unlock releases a lock held on a file descriptor; a dlock run's lock ends with COMMAND, "+
		"and dlock unlock --force KEY breaks another's",
		"u", "unlock")
	f.refuse("flock's --fcntl chooses fcntl(2) locks on the file; dlock's locks are in the store: leave it out",
		"fcntl")
}

// exclusiveValue is -x: the exclusive lock, flock's default, so it only
// undoes an earlier --shared. It is remembered, so that -x with
// --permits, which asks for neither a lock nor a read lease, is refused.
type exclusiveValue struct{ kind *leaseKind }

func (v exclusiveValue) String() string   { return "" }
func (v exclusiveValue) IsBoolFlag() bool { return true }
func (v exclusiveValue) Set(s string) error {
	if s != "true" {
		return errors.New("takes no value")
	}
	*v.kind.shared, v.kind.exclusive = false, true
	return nil
}

// nowaitValue is -n: it sets --wait to 0, so that -n and --wait are one
// setting and the last one given wins.
type nowaitValue struct{ wait *optionalDuration }

func (v nowaitValue) String() string   { return "" }
func (v nowaitValue) IsBoolFlag() bool { return true }
func (v nowaitValue) Set(s string) error {
	if s != "true" {
		return errors.New("takes no value")
	}
	v.wait.d, v.wait.set = 0, true
	return nil
}

// parseRunArgs splits run's arguments into flags, KEY and COMMAND (the
// environment has been applied to the flags).
//
// With a "--", everything before it is flags and exactly one KEY, in any
// order, and everything after it is COMMAND. Without one, flags come
// first, then KEY, then COMMAND; a COMMAND that starts with "-" is then a
// usage error, as it is most likely a flag given after KEY. With -c, the
// flags may also follow KEY (flock's "flock FILE -c STRING"), and there is
// no COMMAND. Either way a flag is never taken for COMMAND, nor the first
// word of COMMAND for KEY.
func (s *invocation) parseRunArgs(o *runOptions, args []string) (key string, argv []string, err error) {
	head, tail, dashed := splitAtTerminator(s.flags, args)
	// Without "--", flags end at KEY: what follows is COMMAND's, as it is.
	head = s.flags.expandBundles(head, !dashed)
	if err := refuseNumericAfterN(s.flags, head, !dashed); err != nil {
		return "", nil, err
	}
	var pos []string
	flagAfterKey := "" // the first flag after KEY, without "--"
	for {
		if err := s.parseArgs(head); err != nil {
			return "", nil, err
		}
		rest := s.flags.fs.Args()
		if len(rest) == 0 {
			break
		}
		if !dashed && (len(rest) < 2 || !strings.HasPrefix(rest[1], "-")) {
			pos = append(pos, rest...)
			break
		}
		if !dashed && flagAfterKey == "" {
			flagAfterKey = rest[1]
		}
		pos = append(pos, rest[0])
		head = rest[1:]
	}
	if len(pos) == 0 {
		return "", nil, usageErrorf("missing KEY (see dlock run --help)")
	}
	key = pos[0]
	switch {
	case s.flags.given("command"):
		if len(pos) > 1 || dashed {
			return "", nil, usageErrorf("-c STRING and a COMMAND are exclusive (see dlock run --help)")
		}
		return key, []string{"/bin/sh", "-c", *o.shell}, nil
	case flagAfterKey != "":
		return "", nil, usageErrorf("%q after KEY: flags after KEY need a -- before COMMAND (see dlock run --help)", flagAfterKey)
	case dashed:
		if len(pos) > 1 {
			return "", nil, usageErrorf("unexpected argument %q before -- (one KEY; see dlock run --help)", pos[1])
		}
		argv = tail
	default:
		argv = pos[1:]
	}
	if len(argv) == 0 {
		if isDecimal(key) {
			return "", nil, fdFormError(key)
		}
		return "", nil, usageErrorf("missing COMMAND after KEY (see dlock run --help)")
	}
	return key, argv, nil
}

// fdFormError explains that flock's "flock [-n] 9" (lock descriptor 9,
// opened by the shell with 9>FILE, for the rest of a subshell) has no
// counterpart: fd is the number where KEY would be.
func fdFormError(fd string) error {
	return usageErrorf("missing COMMAND after KEY %q: flock's file-descriptor form (flock %s with %s>FILE) does not carry over, "+
		"as dlock locks names, not descriptors: run the commands under the lock, dlock run KEY -- COMMAND, "+
		"or dlock run KEY -c 'COMMANDS' (see dlock run --help)", fd, fd, fd)
}

// refuseNumericAfterN rejects "-n 3", consul lock's "3 permits": here -n
// takes no value, so 3 would silently become the KEY. With flagsOnly,
// args end at the first argument that is not a flag (KEY; then COMMAND,
// whose own "-n 3" is its business).
func refuseNumericAfterN(f *flagSet, args []string, flagsOnly bool) error {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || flagsOnly && !strings.HasPrefix(a, "-") {
			return nil
		}
		if f.takesValue(a) {
			i++ // a value, such as --meta -n
			continue
		}
		if a == "-n" && i+1 < len(args) && isDecimal(args[i+1]) {
			if flagsOnly && i+2 == len(args) { // nothing after it: flock -n 9
				return fdFormError(args[i+1])
			}
			return usageErrorf("-n takes no value: it is flock's no-wait (--wait 0), and %q would be the KEY; "+
				"if it is, put it first: dlock run %s -n -- COMMAND (see dlock run --help)", args[i+1], args[i+1])
		}
	}
	return nil
}

func isDecimal(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// splitAtTerminator finds the first "--" in args that is not the value of
// a flag, and returns what comes before and after it.
func splitAtTerminator(f *flagSet, args []string) (head, tail []string, found bool) {
	for i := 0; i < len(args); i++ {
		if args[i] == "--" {
			return args[:i], args[i+1:], true
		}
		if f.takesValue(args[i]) {
			i++ // the next argument is this flag's value
		}
	}
	return args, nil, false
}

// defaultMeta is the meta text of a run without --meta: the program's
// base name, without any argument. The text is stored for every reader of
// the store to see, and outlives the run, while arguments are where
// passwords and tokens go (-pSECRET, --password=...).
func defaultMeta(argv []string) string {
	m := "dlock run: " + filepath.Base(argv[0])
	if len(m) <= maxDefaultMeta {
		return m
	}
	n := maxDefaultMeta - len("...")
	for n > 0 && !utf8.RuneStart(m[n]) { // cut between runes
		n--
	}
	return m[:n] + "..."
}

// maxDefaultMeta bounds the default meta text in bytes, as list prints it
// on every row.
const maxDefaultMeta = 200
