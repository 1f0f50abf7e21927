package main

// Integration tests of run's flock- and cron-style flags, the DLOCK_*
// variables, and prompt failure on a store that does not answer.

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock/internal/testkit/redisserver"
)

func TestRunFlockForms(t *testing.T) {
	t.Parallel()
	url, _ := server(t)
	_, _, stop := holdLock(t, url, "cron")
	for _, tc := range []struct {
		name   string
		args   []string
		env    []string
		want   int
		silent bool
	}{
		{"-n", []string{"-n", "cron", "--", "true"}, nil, 75, false},
		{"--nowait after KEY", []string{"cron", "--nowait", "--", "true"}, nil, 75, false},
		{"-E", []string{"-n", "-E", "3", "cron", "--", "true"}, nil, 3, false},
		{"-E 0", []string{"-n", "-E", "0", "-q", "cron", "--", "true"}, nil, 0, true},
		{"-q", []string{"-n", "-q", "cron", "--", "true"}, nil, 75, true},
		{"--quiet", []string{"--nowait", "--quiet", "cron", "--", "true"}, nil, 75, true},
		{"-nq combined", []string{"-nq", "cron", "--", "true"}, nil, 75, true},
		{"-qE combined, E's value next", []string{"-n", "-qE", "5", "cron", "--", "true"}, nil, 5, true},
		{"flock's --nb", []string{"--nb", "cron", "--", "true"}, nil, 75, false},
		{"flock's --nonblock", []string{"--nonblock", "cron", "--", "true"}, nil, 75, false},
		{"flock's -x, the default", []string{"-nx", "cron", "--", "true"}, nil, 75, false},
		{"flock's -e", []string{"-e", "-n", "cron", "--", "true"}, nil, 75, false},
		{"-E3 attached", []string{"-n", "-E3", "cron", "--", "true"}, nil, 3, false},
		{"DLOCK_WAIT=0", []string{"cron", "--", "true"}, []string{"DLOCK_WAIT=0"}, 75, false},
		{"DLOCK_QUIET and DLOCK_CONFLICT_EXIT_CODE", []string{"-n", "cron", "--", "true"},
			[]string{"DLOCK_QUIET=1", "DLOCK_CONFLICT_EXIT_CODE=9"}, 9, true},
		{"flag over variable", []string{"-n", "-E", "4", "cron", "--", "true"},
			[]string{"DLOCK_CONFLICT_EXIT_CODE=9"}, 4, false},
		{"--quiet=false over DLOCK_QUIET", []string{"-n", "--quiet=false", "cron", "--", "true"},
			[]string{"DLOCK_QUIET=1"}, 75, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := dlockEnv(t, url, tc.env, append([]string{"run"}, tc.args...)...)
			if code != tc.want || stdout != "" {
				t.Fatalf("status %d, want %d; stdout %q, stderr %q", code, tc.want, stdout, stderr)
			}
			if tc.silent && stderr != "" {
				t.Fatalf("quiet run wrote %q", stderr)
			}
			if !tc.silent {
				oneLine(t, stderr)
				if !strings.Contains(stderr, "not acquired") {
					t.Fatalf("stderr %q does not say the lock was not acquired", stderr)
				}
			}
		})
	}

	// -w takes plain seconds, fractions too, as flock's -w does, and its
	// value may be attached (-w0.3).
	for _, w := range [][]string{{"-w", "0.3"}, {"-w", "300ms"}, {"-w0.3"}} {
		began := time.Now()
		code, _, stderr := dlock(t, url, append(append([]string{"run"}, w...), "cron", "--", "true")...)
		if took := time.Since(began); code != 75 || took < 300*time.Millisecond {
			t.Fatalf("%q: status %d after %v, want 75 after at least 300ms; stderr %q", w, code, took, stderr)
		}
	}
	if code := stop(); code != 0 {
		t.Fatalf("holder exited %d", code)
	}
}

// TestRunCommandArgumentsUntouched: without "--", what follows KEY is
// COMMAND's: its own "-n 1" or "-nq" is neither refused nor split.
func TestRunCommandArgumentsUntouched(t *testing.T) {
	t.Parallel()
	url, _ := server(t)
	code, stdout, stderr := dlock(t, url, "run", "-n", "args", "printf", "%s|", "-n", "1", "-nq")
	if code != 0 || stdout != "-n|1|-nq|" {
		t.Fatalf("status %d, stdout %q, stderr %q; want COMMAND's arguments as given", code, stdout, stderr)
	}
}

func TestRunShellCommand(t *testing.T) {
	t.Parallel()
	url, _ := server(t)
	dir := t.TempDir()
	for i, args := range [][]string{
		{"run", "-c", `echo "$DLOCK_KEY" > ` + filepath.Join(dir, "0")},           // then KEY
		{"run", "sh-job", "-c", `echo "$DLOCK_KEY" > ` + filepath.Join(dir, "1")}, // flock FILE -c STRING
		{"run", "-n", "sh-job", "--command", `echo "$DLOCK_KEY" > ` + filepath.Join(dir, "2") + `; exit 5`},
	} {
		if i == 0 {
			args = append(args, "sh-job")
		}
		code, _, stderr := dlock(t, url, args...)
		want := 0
		if i == 2 {
			want = 5
		}
		if code != want {
			t.Fatalf("%q: status %d, want %d; stderr %q", args, code, want, stderr)
		}
		if got := waitFile(t, filepath.Join(dir, string(rune('0'+i))), time.Second); got != "sh-job" {
			t.Fatalf("%q: the shell saw DLOCK_KEY=%q", args, got)
		}
	}
	for _, args := range [][]string{
		{"run", "-c", "true", "sh-job", "--", "true"}, // both
		{"run", "-c", "true", "sh-job", "extra"},
		{"run", "-c", "true"}, // no KEY
		{"run", "sh-job", "-c"},
	} {
		code, _, stderr := dlock(t, url, args...)
		if code != 64 {
			t.Fatalf("%q: status %d, want 64; stderr %q", args, code, stderr)
		}
		oneLine(t, stderr)
	}
}

// TestUsageMessagesAgree: the same kind of mistake gets the same kind of
// message, naming the flag or variable that was wrong.
func TestUsageMessagesAgree(t *testing.T) {
	t.Parallel()
	url := closedURL(t)
	for _, tc := range []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"run", "--ttl", "abc", "k", "--", "true"}, nil, `--ttl "abc": not a duration`},
		{[]string{"run", "--wait", "abc", "k", "--", "true"}, nil, `--wait "abc": not a duration`},
		{[]string{"run", "-w", "abc", "k", "--", "true"}, nil, `--wait "abc": not a duration`},
		{[]string{"run", "--grace", "abc", "k", "--", "true"}, nil, `--grace "abc": not a duration`},
		{[]string{"run", "--wait", "-1s", "k", "--", "true"}, nil, `--wait "-1s": must not be negative`},
		{[]string{"run", "--grace", "-1s", "k", "--", "true"}, nil, `--grace "-1s": must not be negative`},
		{[]string{"run", "--ttl", "0", "k", "--", "true"}, nil, `--ttl "0": must be positive`},
		{[]string{"run", "--min-hold", "-2", "k", "--", "true"}, nil, `--min-hold "-2": must not be negative`},
		{[]string{"run", "-E", "256", "k", "--", "true"}, nil, `--conflict-exit-code "256": must be 0 to 255`},
		{[]string{"run", "k", "--", "true"}, []string{"DLOCK_TTL=abc"}, `DLOCK_TTL="abc": not a duration`},
		// Below the store's minimum TTL: refused when the Client is made,
		// after parsing, and still named after where it came from.
		{[]string{"run", "--ttl", "10ms", "k", "--", "true"}, nil, `--ttl 10ms: below the store's minimum 20ms (see dlock run --help)`},
		{[]string{"run", "k", "--", "true"}, []string{"DLOCK_TTL=10ms"}, `DLOCK_TTL="10ms": below the store's minimum 20ms (see dlock run --help)`},
		{[]string{"run", "k", "--", "true"}, []string{"DLOCK_WAIT=-1"}, `DLOCK_WAIT="-1": must not be negative`},
		{[]string{"run", "k", "--", "true"}, []string{"DLOCK_QUIET=maybe"}, `DLOCK_QUIET="maybe": not a boolean`},
		{[]string{"status", "k"}, []string{"DLOCK_TIMEOUT=soon"}, `DLOCK_TIMEOUT="soon": not a duration`},
		{[]string{"run", "-n", "3", "k", "--", "true"}, nil, `-n takes no value`},
		{[]string{"run", "--nope", "k", "--", "true"}, nil, `unknown flag --nope`},
		// flock's flags that have no place here say what to write instead.
		{[]string{"run", "--timeout", "5", "k", "--", "true"}, nil, `--timeout: flock's --timeout is --wait here`},
		{[]string{"run", "-o", "k", "--", "true"}, nil, `-o: flock's --close`},
		{[]string{"run", "-F", "k", "--", "true"}, nil, `-F: flock's --no-fork`},
		{[]string{"run", "9"}, nil, `flock's file-descriptor form`},
		{[]string{"run", "-n", "9"}, nil, `flock's file-descriptor form`},
		{[]string{"status", "--watch", "abc", "k"}, nil, `--watch "abc": not a duration`},
		{[]string{"run", "k", "--ttl"}, nil, `--ttl needs a value`},
	} {
		code, _, stderr := dlockEnv(t, url, tc.env, tc.args...)
		if code != 64 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q %q: status %d, stderr %q; want 64 and %q", tc.env, tc.args, code, stderr, tc.want)
		}
		oneLine(t, stderr)
	}
	// A bad variable for a flag given on the command line is not read
	// (the flag wins), and one for another command is not read either.
	if code, _, stderr := dlockEnv(t, url, []string{"DLOCK_TTL=abc"}, "status", "k"); code != 69 {
		t.Errorf("status with DLOCK_TTL=abc: status %d, want 69 (the variable is run's); stderr %q", code, stderr)
	}
}

// TestStoreThatNeverAnswers: a server that accepts connections but never
// answers is reported (69) within a second when the user did not ask to
// wait, and within --timeout by the operator commands.
func TestStoreThatNeverAnswers(t *testing.T) {
	t.Parallel()
	srv := redisserver.Start(t)
	proxy := redisserver.NewProxy(t, srv.Addr())
	proxy.Blackhole(true)
	url := "redis://" + proxy.Addr() + "/0"
	for _, tc := range []struct {
		args  []string
		bound time.Duration
	}{
		{[]string{"run", "-n", "k", "--", "true"}, time.Second},
		{[]string{"run", "--wait", "0", "k", "--", "true"}, time.Second},
		{[]string{"run", "--wait", "300ms", "k", "--", "true"}, 1300 * time.Millisecond},
		// Unbounded: the Redis client's read timeout (3 s) reports it.
		{[]string{"run", "k", "--", "true"}, 8 * time.Second},
		{[]string{"status", "--timeout", "300ms", "k"}, 1300 * time.Millisecond},
		{[]string{"list", "--timeout", "0.3"}, 1300 * time.Millisecond},
		{[]string{"unlock", "--force", "--timeout", "300ms", "k"}, 1300 * time.Millisecond},
	} {
		began := time.Now()
		code, _, stderr := dlock(t, url, tc.args...)
		took := time.Since(began)
		t.Logf("%q: status %d after %v", tc.args, code, took)
		if code != 69 || !(strings.Contains(stderr, "no answer") || strings.Contains(stderr, "timeout")) {
			t.Errorf("%q: status %d, want 69 with \"no answer\" or a timeout; stderr %q", tc.args, code, stderr)
		}
		oneLine(t, stderr)
		if n := strings.Count(stderr, tc.args[0]+":"); n != 1 {
			t.Errorf("%q: %q names the command %d times", tc.args, stderr, n)
		}
		if took > tc.bound {
			t.Errorf("%q: took %v, want at most %v", tc.args, took, tc.bound)
		}
	}
}

// TestBadDatabaseIsAUsageError: a database number the server does not
// have is a mistake in the URL (64), not an unreachable store (69).
func TestBadDatabaseIsAUsageError(t *testing.T) {
	t.Parallel()
	srv := redisserver.Start(t)
	url := "redis://" + srv.Addr() + "/99"
	for _, args := range [][]string{
		{"run", "-n", "k", "--", "true"},
		{"run", "k", "--", "true"},
		{"status", "k"},
		{"list"},
		{"unlock", "--force", "k"},
	} {
		code, _, stderr := dlock(t, url, args...)
		if code != 64 || !strings.Contains(stderr, "no such database") || strings.Count(stderr, "DB index") != 1 {
			t.Errorf("%q: status %d, stderr %q; want 64, no such database, said once", args, code, stderr)
		}
		oneLine(t, stderr)
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	url := closedURL(t)
	for _, args := range [][]string{{"--version"}, {"-V"}, {"version"}} {
		code, stdout, stderr := dlock(t, url, args...)
		if code != 0 || stdout != "dlock "+dlVersion+"\n" || stderr != "" {
			t.Errorf("%q: status %d, stdout %q, stderr %q; want dlock %s", args, code, stdout, stderr, dlVersion)
		}
	}
	code, stdout, _ := dlock(t, url, "version", "--json")
	if code != 0 || !strings.Contains(stdout, `"version": "`+dlVersion+`"`) {
		t.Errorf("version --json: %d %q", code, stdout)
	}
	// A release build sets its own version string.
	bin := filepath.Join(t.TempDir(), "dlock")
	build := exec.Command("go", "build", "-o", bin, "-ldflags", "-X main.version=9.8.7-test", ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil || string(out) != "dlock 9.8.7-test\n" {
		t.Fatalf("-X main.version: %q, %v", out, err)
	}
}
