package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock"
)

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{fmt.Errorf("lock: %w", dlock.ErrInvalidKey), ExitUsage},
		{fmt.Errorf("lock: %w", dlock.ErrInvalidTTL), ExitUsage},
		{fmt.Errorf("read lock: %w", dlock.ErrUnsupported), ExitUsage},
		{fmt.Errorf("%w: connection refused", dlock.ErrBackend), ExitUnavailable},
		{fmt.Errorf("%w: %q", dlock.ErrNotAcquired, "k"), ExitNotAcquired},
		{dlock.ErrLockLost, ExitLockLost},
		{&exitError{code: 3, quiet: true}, 3},
		{errors.New("surprise"), ExitSoftware},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func run(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	env := Env{Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}
	code := Main(context.Background(), args, env, Options{})
	return code, stdout.String(), stderr.String()
}

func TestMainHelpListsCommands(t *testing.T) {
	code, stdout, stderr := run("--help")
	if code != 0 || stderr != "" {
		t.Fatalf("status %d, stderr %q", code, stderr)
	}
	for _, c := range commands() {
		if !strings.Contains(stdout, "  "+c.name+" ") {
			t.Errorf("help does not list %q", c.name)
		}
	}
	for _, s := range []string{"redis+sentinel://", "redis+cluster://", "rediss://", "DLOCK_REDIS", "76"} {
		if !strings.Contains(stdout, s) {
			t.Errorf("help does not mention %s", s)
		}
	}
}

func TestMainUsageErrorIsOneLine(t *testing.T) {
	for _, args := range [][]string{{}, {"frobnicate"}, {"run", "--ttl"}, {"status", "--json"}} {
		code, _, stderr := run(args...)
		if code != ExitUsage || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: status %d, stderr %q", args, code, stderr)
		}
	}
}

func TestRedisFlagAnywhere(t *testing.T) {
	// An unparsable URL is a usage error whether given before or after
	// the command, and the environment supplies the default.
	for _, args := range [][]string{
		{"--redis", "bogus", "status", "k"},
		{"status", "--redis", "bogus", "k"},
	} {
		if code, _, stderr := run(args...); code != ExitUsage || !strings.Contains(stderr, `redis URL "bogus"`) {
			t.Errorf("%v: status %d, stderr %q", args, code, stderr)
		}
	}
	var stderr bytes.Buffer
	env := Env{Stdout: &bytes.Buffer{}, Stderr: &stderr, Getenv: func(k string) string {
		if k == "DLOCK_REDIS" {
			return "ftp://nope"
		}
		return ""
	}}
	if code := Main(context.Background(), []string{"list"}, env, Options{}); code != ExitUsage || !strings.Contains(stderr.String(), "ftp://nope") {
		t.Errorf("DLOCK_REDIS not used: status %d, stderr %q", code, stderr.String())
	}
}

func TestOperatorCommandsReportAHangingStoreAsUnavailable(t *testing.T) {
	// A server that accepts connections and never answers.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c); _ = c.Close() }()
		}
	}()
	url := "redis://" + l.Addr().String() + "/0"
	for _, args := range [][]string{{"status", "k"}, {"list"}, {"unlock", "--force", "k"}} {
		began := time.Now()
		code, _, stderr := run(append([]string{"--redis", url, args[0], "--timeout", "200ms"}, args[1:]...)...)
		if code != ExitUnavailable || !strings.Contains(stderr, "no answer from the store within 200ms") {
			t.Errorf("%v: status %d, stderr %q; want %d", args, code, stderr, ExitUnavailable)
		}
		if took := time.Since(began); took > 2*time.Second {
			t.Errorf("%v took %v, not bounded by the timeout", args, took)
		}
	}
}

// TestLibraryRefusalsSaidOnce: a KEY or TTL the library refuses is one
// short line, without the library's and the driver's prefixes repeated,
// and a TTL the user gave is not called a default.
func TestLibraryRefusalsSaidOnce(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "}"}, "dlock status: invalid KEY: \"}\" starts with '}'\n"},
		{[]string{"status", ""}, "dlock status: invalid KEY: empty\n"},
		{[]string{"unlock", "--force", "}"}, "dlock unlock: invalid KEY: \"}\" starts with '}'\n"},
		{[]string{"run", "}", "--", "true"}, "dlock run: invalid KEY: \"}\" starts with '}'\n"},
		{[]string{"run", "--ttl", "10ms", "k", "--", "true"}, "dlock run: --ttl 10ms: below the store's minimum 20ms (see dlock run --help)\n"},
	} {
		// The default store is never reached: these are refused first.
		if code, _, stderr := run(tc.args...); code != ExitUsage || stderr != tc.want {
			t.Errorf("%q: status %d, stderr %q; want %d, %q", tc.args, code, stderr, ExitUsage, tc.want)
		}
	}
}

// TestVersionJSONIsOneLine: version --json prints the one line that
// docs/cli.md shows.
func TestVersionJSONIsOneLine(t *testing.T) {
	code, stdout, _ := run("version", "--json")
	want := `{"version": "` + dlock.Version + `", "go": "` + runtime.Version() + `"}` + "\n"
	if code != 0 || stdout != want {
		t.Fatalf("version --json: status %d, %q; want %q", code, stdout, want)
	}
	var v struct{ Version, Go string }
	if err := json.Unmarshal([]byte(stdout), &v); err != nil || v.Version != dlock.Version || v.Go != runtime.Version() {
		t.Errorf("version --json does not parse back: %+v, %v", v, err)
	}
}
