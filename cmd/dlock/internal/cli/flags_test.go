package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"10", 10 * time.Second, true},
		{"0.5", 500 * time.Millisecond, true},
		{".25", 250 * time.Millisecond, true},
		{"0", 0, true},
		{"1m30s", 90 * time.Second, true},
		{"500ms", 500 * time.Millisecond, true},
		{"-1", -time.Second, true}, // parsed; the flag refuses the sign
		{"abc", 0, false},
		{"", 0, false},
		{"NaN", 0, false},
		{"Inf", 0, false},
		{"1e300", 0, false},
		{"10 s", 0, false},
	} {
		got, err := parseDuration(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("parseDuration(%q) = %v, %v; want %v, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// runFlags parses run's arguments with getenv and returns the options.
func runFlags(t *testing.T, env map[string]string, args ...string) (*runOptions, string, []string, error) {
	t.Helper()
	s := &invocation{env: Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Getenv: func(k string) string { return env[k] }}}
	s.cmd = findCommand("run")
	s.flags = newFlagSet("run")
	s.stores = newStores(nil, s.env.Getenv)
	s.flags.add(s.redis().flagSpec())
	o := declareRunFlags(s.flags)
	if err := s.flags.applyEnv(s.env.Getenv); err != nil {
		return o, "", nil, err
	}
	key, argv, err := s.parseRunArgs(o, args)
	return o, key, argv, err
}

func TestRunFlagPrecedence(t *testing.T) {
	env := map[string]string{"DLOCK_WAIT": "5", "DLOCK_TTL": "1m", "DLOCK_QUIET": "true", "DLOCK_META": "from env"}
	o, key, argv, err := runFlags(t, env, "-w", "2.5", "k", "--", "true")
	switch {
	case err != nil:
		t.Fatal(err)
	case key != "k" || len(argv) != 1 || argv[0] != "true":
		t.Fatalf("key %q argv %q", key, argv)
	case !o.wait.set || o.wait.d != 2500*time.Millisecond:
		t.Fatalf("flag did not win over DLOCK_WAIT: %+v", *o.wait)
	case *o.ttl != time.Minute || !*o.quiet || *o.meta != "from env":
		t.Fatalf("variables not applied: ttl %v quiet %v meta %q", *o.ttl, *o.quiet, *o.meta)
	}
	// -n and --wait are one setting: the last one given wins.
	o, _, _, err = runFlags(t, nil, "-w", "3", "-n", "k", "--", "true")
	if err != nil || !o.wait.set || o.wait.d != 0 {
		t.Fatalf("-w 3 -n: %+v, %v; want --wait 0", *o.wait, err)
	}
	o, _, _, err = runFlags(t, map[string]string{"DLOCK_WAIT": "0"}, "-w", "3", "k", "--", "true")
	if err != nil || o.wait.d != 3*time.Second {
		t.Fatalf("-w 3 over DLOCK_WAIT=0: %+v, %v", *o.wait, err)
	}
	// Defaults when nothing is set.
	o, _, _, err = runFlags(t, nil, "k", "--", "true")
	if err != nil || o.wait.set || *o.conflictExit != ExitNotAcquired || *o.minHold != 0 || *o.quiet {
		t.Fatalf("defaults: wait %+v exit %d min-hold %v quiet %v, %v", *o.wait, *o.conflictExit, *o.minHold, *o.quiet, err)
	}
	// -c is never read from the environment, --force neither.
	if _, _, _, err := runFlags(t, map[string]string{"DLOCK_COMMAND": "true"}, "k"); err == nil {
		t.Fatal("DLOCK_COMMAND was taken for -c")
	}
}

func TestRunShellForm(t *testing.T) {
	// "-n 3" is refused, but "--meta -n 3" is a meta text and a KEY.
	if o, key, _, err := runFlags(t, nil, "--meta", "-n", "3", "--", "true"); err != nil || key != "3" || *o.meta != "-n" {
		t.Errorf("--meta -n 3: key %q, %v", key, err)
	}
	for _, args := range [][]string{
		{"-c", "echo hi", "k"},
		{"k", "-c", "echo hi"},
		{"-n", "k", "-q", "-c", "echo hi"},
	} {
		_, key, argv, err := runFlags(t, nil, args...)
		if err != nil || key != "k" || strings.Join(argv, "|") != "/bin/sh|-c|echo hi" {
			t.Errorf("%q: key %q argv %q, %v", args, key, argv, err)
		}
	}
	for _, args := range [][]string{
		{"k", "--wait", "0", "true"}, // a flag after KEY without -- or -c
		{"-c", "x", "k", "--", "true"},
		{"-c", "x", "k", "more"},
		{"-n", "42", "--", "true"},
	} {
		if _, _, _, err := runFlags(t, nil, args...); exitCode(err) != ExitUsage {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}

// TestEveryFlagIsDocumented: each flag of each command shows in its help
// with its variable (unless it has none), and appears in every completion
// script.
func TestEveryFlagIsDocumented(t *testing.T) {
	t.Run("redis only", func(t *testing.T) { testEveryFlagIsDocumented(t, Options{}) })
	t.Run("with a backend and metrics", func(t *testing.T) { testEveryFlagIsDocumented(t, testOptions(t)) })
}

func testEveryFlagIsDocumented(t *testing.T, opts Options) {
	spec := completionSpec(opts)
	scripts := map[string]string{"bash": bashCompletion(spec), "zsh": zshCompletion(spec), "fish": fishCompletion(spec)}
	seen := map[string]string{}
	for _, c := range spec {
		code, stdout, _ := runWith(opts, nil, c.name, "--help")
		if code != 0 {
			t.Fatalf("%s --help: %d", c.name, code)
		}
		for _, f := range c.flags {
			if !strings.Contains(stdout, "--"+f.name) {
				t.Errorf("%s --help does not show --%s", c.name, f.name)
			}
			_, isStore := f.value.(*store) // its variable is in its default
			wantEnv := !findCommand(c.name).noEnv && (f.env || f.ownEnv || isStore)
			if v := "$" + envName(f.name); wantEnv != strings.Contains(stdout, v) && !(isStore && c.name == "demo") {
				t.Errorf("%s --help: %s shown=%v, want %v", c.name, v, !wantEnv, wantEnv)
			}
			if prev, ok := seen[f.name]; ok && prev != f.arg {
				t.Errorf("--%s takes %q on one command and %q on another", f.name, prev, f.arg)
			}
			seen[f.name] = f.arg
			for shell, script := range scripts {
				if !strings.Contains(script, f.name) {
					t.Errorf("%s completion lacks %s --%s", shell, c.name, f.name)
				}
			}
		}
	}
}

// TestBashCompletion loads the generated script into bash and asks it
// what a user would get on TAB.
func TestBashCompletion(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	code, script, stderr := run("completion", "bash")
	if code != 0 || stderr != "" {
		t.Fatalf("completion bash: %d %q", code, stderr)
	}
	complete := func(words ...string) string {
		t.Helper()
		prog := script + "\nCOMP_WORDS=(" + strings.Join(quoteAll(words), " ") + ")\nCOMP_CWORD=" +
			strconv.Itoa(len(words)-1) + "\n_dlock\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
		out, err := exec.Command("bash", "--norc", "-c", prog).CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		return string(out)
	}
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{"dlock", "st"}, "status\n"},
		{[]string{"dlock", "run", "--min"}, "--min-hold\n"},
		{[]string{"dlock", "--redis", "redis://x", "list", "--t"}, "--timeout\n"},
		{[]string{"dlock", "completion", "fi"}, "fish\n"},
		{[]string{"dlock", "run", "k", "--", "ech"}, "echo\n"},
	} {
		if got := complete(tc.words...); !strings.Contains("\n"+got, "\n"+tc.want) {
			t.Errorf("%q: completions %q, want %q among them", tc.words, got, tc.want)
		}
	}
	if got := complete("dlock", "run", "--wait", ""); got != "\n" && got != "" {
		t.Errorf("after --wait (a value is due): completions %q, want none", got)
	}
}

// TestOtherShellsParseTheirScripts checks the zsh and fish scripts with the
// shells themselves where they are installed.
func TestOtherShellsParseTheirScripts(t *testing.T) {
	for shell, check := range map[string][]string{"zsh": {"zsh", "-n"}, "fish": {"fish", "--no-execute"}} {
		if _, err := exec.LookPath(check[0]); err != nil {
			t.Logf("%s not installed: its script is not checked", shell)
			continue
		}
		code, script, _ := run("completion", shell)
		if code != 0 {
			t.Fatalf("completion %s: %d", shell, code)
		}
		cmd := exec.Command(check[0], check[1:]...)
		cmd.Stdin = strings.NewReader(script)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s rejects its script: %v\n%s", shell, err, out)
		}
	}
}

// TestFishCompletion asks fish, where installed, what TAB offers.
func TestFishCompletion(t *testing.T) {
	if _, err := exec.LookPath("fish"); err != nil {
		t.Skip("fish not installed")
	}
	_, script, _ := run("completion", "fish")
	file := filepath.Join(t.TempDir(), "dlock.fish")
	if err := os.WriteFile(file, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	for line, want := range map[string]string{
		"dlock st":            "status\t",
		"dlock run --mi":      "--min-hold\t",
		"dlock run -":         "-E\t",
		"dlock run k -- ech":  "echo",
		"dlock completion ba": "bash",
		"dlock unlock --for":  "--force\t",
	} {
		out, err := exec.Command("fish", "--no-config", "-c", "source "+file+"; complete -C '"+line+"'").CombinedOutput()
		if err != nil || !strings.Contains("\n"+string(out), "\n"+want) {
			t.Errorf("%q: fish offers %q (%v), want %q among them", line, out, err, want)
		}
	}
}

func quoteAll(words []string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return out
}

func TestCompletionUsage(t *testing.T) {
	for _, args := range [][]string{{"completion"}, {"completion", "tcsh"}, {"completion", "bash", "zsh"}} {
		if code, _, stderr := run(args...); code != ExitUsage || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%q: %d %q", args, code, stderr)
		}
	}
}

func TestRunCombinedShortFlagsAndFlockAliases(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		quiet bool
		wait  time.Duration
		argv  string
	}{
		{[]string{"-nq", "k", "--", "true"}, true, 0, "true"},
		{[]string{"-qn", "k", "--", "true"}, true, 0, "true"},
		{[]string{"-qw", "2", "k", "--", "true"}, true, 2 * time.Second, "true"},
		{[]string{"k", "-nq", "--", "true"}, true, 0, "true"},
		{[]string{"--nb", "k", "--", "true"}, false, 0, "true"},
		{[]string{"--nonblock", "-q", "k", "--", "true"}, true, 0, "true"},
		// Without "--", what follows KEY is COMMAND's, untouched.
		{[]string{"-n", "k", "grep", "-nq", "x"}, false, 0, "grep|-nq|x"},
		{[]string{"-n", "k", "head", "-n", "1", "f"}, false, 0, "head|-n|1|f"},
		// After "--" too.
		{[]string{"-nq", "k", "--", "grep", "-nq", "x"}, true, 0, "grep|-nq|x"},
	} {
		o, key, argv, err := runFlags(t, nil, tc.args...)
		switch {
		case err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case key != "k" || strings.Join(argv, "|") != tc.argv:
			t.Errorf("%q: key %q argv %q, want k and %q", tc.args, key, argv, tc.argv)
		case *o.quiet != tc.quiet || !o.wait.set || o.wait.d != tc.wait:
			t.Errorf("%q: quiet %v wait %+v, want %v and %v", tc.args, *o.quiet, *o.wait, tc.quiet, tc.wait)
		}
	}
	for _, args := range [][]string{
		{"-nz", "k", "--", "true"},      // z is no flag
		{"-wq", "2", "k", "--", "true"}, // q is -w's value: not a duration
		{"-qn", "3", "--", "true"},      // -n 3, combined, is still refused
	} {
		if _, _, _, err := runFlags(t, nil, args...); exitCode(err) != ExitUsage {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
	// A value that looks like a bundle stays a value.
	if o, key, _, err := runFlags(t, nil, "--meta", "-nq", "k", "--", "true"); err != nil || key != "k" || *o.meta != "-nq" || *o.quiet {
		t.Errorf("--meta -nq: key %q, meta %q, quiet %v, %v", key, *o.meta, *o.quiet, err)
	}
	code, stdout, _ := run("run", "--help")
	if code != 0 || !strings.Contains(stdout, "-n, --nowait, --nb, --nonblock") {
		t.Errorf("run --help does not show -n's aliases:\n%s", stdout)
	}
}

// TestRunFlockHabits: flock(1)'s spellings that mean something in dlock's
// model are taken (-x and -e, attached values), and the others are refused
// with a line that says what to write instead.
func TestRunFlockHabits(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		shared bool
		wait   time.Duration // -1: not set
		exit   int
		argv   string
	}{
		{[]string{"-x", "k", "--", "true"}, false, -1, ExitNotAcquired, "true"},
		{[]string{"-e", "k", "--", "true"}, false, -1, ExitNotAcquired, "true"},
		{[]string{"--exclusive", "k", "--", "true"}, false, -1, ExitNotAcquired, "true"},
		{[]string{"-nx", "k", "--", "true"}, false, 0, ExitNotAcquired, "true"},
		// As in flock, the last of -s and -x counts.
		{[]string{"-s", "-x", "k", "--", "true"}, false, -1, ExitNotAcquired, "true"},
		{[]string{"-x", "-s", "k", "--", "true"}, true, -1, ExitNotAcquired, "true"},
		// Attached values, as getopt takes them.
		{[]string{"-w5", "k", "--", "true"}, false, 5 * time.Second, ExitNotAcquired, "true"},
		{[]string{"-w0.5", "k", "--", "true"}, false, 500 * time.Millisecond, ExitNotAcquired, "true"},
		{[]string{"-E0", "k", "--", "true"}, false, -1, 0, "true"},
		{[]string{"-nE3", "k", "--", "true"}, false, 0, 3, "true"},
		{[]string{"-xw5", "k", "sh", "-w5"}, false, 5 * time.Second, ExitNotAcquired, "sh|-w5"},
		{[]string{"-cecho hi", "k"}, false, -1, ExitNotAcquired, "/bin/sh|-c|echo hi"},
	} {
		o, key, argv, err := runFlags(t, nil, tc.args...)
		switch {
		case err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case key != "k" || strings.Join(argv, "|") != tc.argv:
			t.Errorf("%q: key %q argv %q, want k and %q", tc.args, key, argv, tc.argv)
		case o.kind.isShared() != tc.shared || o.kind.check() != nil:
			t.Errorf("%q: shared %v (check %v), want %v", tc.args, o.kind.isShared(), o.kind.check(), tc.shared)
		case tc.wait < 0 && o.wait.set, tc.wait >= 0 && (!o.wait.set || o.wait.d != tc.wait):
			t.Errorf("%q: wait %+v, want %v", tc.args, *o.wait, tc.wait)
		case *o.conflictExit != tc.exit:
			t.Errorf("%q: conflict exit code %d, want %d", tc.args, *o.conflictExit, tc.exit)
		}
	}
	if o, _, _, err := runFlags(t, nil, "-x", "-p", "3", "k", "--", "true"); err == nil && o.kind.check() == nil {
		t.Error("-x -p 3: taken; want a usage error (the lock or a permit)")
	}
	for _, tc := range []struct {
		args []string
		want string // in the one line of the usage error
	}{
		{[]string{"--timeout", "5", "k", "--", "true"}, "--timeout: flock's --timeout is --wait here"},
		{[]string{"--timeout=5", "k", "--", "true"}, "--timeout: flock's --timeout is --wait here"},
		{[]string{"-o", "k", "--", "true"}, "-o: flock's --close"},
		{[]string{"--close", "k", "--", "true"}, "--close: flock's --close"},
		{[]string{"-no", "k", "--", "true"}, "-o: flock's --close"},
		{[]string{"-F", "k", "--", "true"}, "-F: flock's --no-fork"},
		{[]string{"--no-fork", "k", "--", "true"}, "--no-fork: flock's --no-fork"},
		{[]string{"-u", "9"}, "dlock unlock --force KEY"},
		{[]string{"--fcntl", "k", "--", "true"}, "--fcntl: flock's --fcntl"},
		// flock's file-descriptor form: a number where KEY goes, and no COMMAND.
		{[]string{"9"}, "flock's file-descriptor form"},
		{[]string{"-n", "9"}, "flock's file-descriptor form"},
		{[]string{"-x", "-w", "5", "9"}, "flock's file-descriptor form"},
		// consul lock's "-n 3 KEY" is still the other reading.
		{[]string{"-n", "3", "k", "--", "true"}, "-n takes no value"},
		{[]string{"--nope", "k", "--", "true"}, "unknown flag --nope"},
	} {
		_, _, _, err := runFlags(t, nil, tc.args...)
		if exitCode(err) != ExitUsage || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v; want a one-line usage error with %q", tc.args, err, tc.want)
		}
	}
	if err := fdFormError("9"); !strings.Contains(err.Error(), "dlock run KEY -- COMMAND") {
		t.Errorf("the file-descriptor form's message %q does not show dlock's form", err)
	}
	code, stdout, _ := run("run", "--help")
	if code != 0 || !strings.Contains(stdout, "-x, --exclusive, -e ") {
		t.Errorf("run --help does not show -x with -e:\n%s", stdout)
	}
}
