package main

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// lockJSON mirrors the documented JSON fields.
type lockJSON struct {
	Key    string `json:"key"`
	Held   bool   `json:"held"`
	Token  uint64 `json:"token"`
	Host   string `json:"host"`
	PID    int    `json:"pid"`
	Meta   string `json:"meta"`
	Since  string `json:"since"`
	HeldMS int64  `json:"held_ms"`
	TTLMS  int64  `json:"ttl_ms"`
}

func TestStatusAndList(t *testing.T) {
	t.Parallel()
	url, _ := server(t)
	holder, token, stop := holdLock(t, url, "report:daily", "--ttl", "2s", "--meta", "nightly report")

	code, stdout, stderr := dlock(t, url, "status", "--json", "report:daily")
	if code != 0 {
		t.Fatalf("status: %d; stderr %q", code, stderr)
	}
	var st lockJSON
	if err := json.Unmarshal([]byte(stdout), &st); err != nil {
		t.Fatalf("status JSON %q: %v", stdout, err)
	}
	host, _ := os.Hostname()
	since, err := time.Parse(time.RFC3339Nano, st.Since)
	switch {
	case err != nil:
		t.Fatalf("since %q: %v", st.Since, err)
	case st.Key != "report:daily" || !st.Held || st.Token != token:
		t.Fatalf("status %+v, want held with token %d", st, token)
	case st.Host != host || st.PID != holder.cmd.Process.Pid || st.Meta != "nightly report":
		t.Fatalf("owner %q pid %d meta %q, want %q pid %d", st.Host, st.PID, st.Meta, host, holder.cmd.Process.Pid)
	case st.TTLMS <= 0 || st.TTLMS > 2000 || st.HeldMS < 0:
		t.Fatalf("ttl_ms %d held_ms %d", st.TTLMS, st.HeldMS)
	case time.Since(since) > time.Minute:
		t.Fatalf("since %v is long ago", since)
	}

	code, stdout, _ = dlock(t, url, "status", "report:daily")
	if code != 0 || !strings.Contains(stdout, "nightly report") {
		t.Fatalf("status text: %d %q", code, stdout)
	}
	// The token shown is the holder's own, the DLOCK_TOKEN its command got,
	// and labelled so.
	if want := " " + strconv.FormatUint(token, 10) + " (the holder's own, its DLOCK_TOKEN)\n"; !strings.Contains(stdout, "\ntoken: ") || !strings.Contains(stdout, want) {
		t.Fatalf("status text %q lacks %q", stdout, want)
	}

	// Text list: a header, then the lock; an explicit line when none.
	code, stdout, _ = dlock(t, url, "list", "report:")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "KEY ") || !strings.HasPrefix(lines[1], "report:daily ") ||
		!strings.Contains(lines[1], strconv.FormatUint(token, 10)) {
		t.Fatalf("list text: %d %q", code, stdout)
	}
	code, stdout, _ = dlock(t, url, "list", "other:")
	if code != 0 || stdout != "no locks held with a name starting with \"other:\"\n" {
		t.Fatalf("list text of no locks: %d %q", code, stdout)
	}
	// DLOCK_JSON sets --json like any other flag.
	code, stdout, _ = dlockEnv(t, url, []string{"DLOCK_JSON=1"}, "list", "other:")
	if code != 0 || strings.TrimSpace(stdout) != "[]" {
		t.Fatalf("list with DLOCK_JSON=1: %d %q", code, stdout)
	}

	var list []lockJSON
	code, stdout, _ = dlock(t, url, "list", "--json", "report:")
	if err := json.Unmarshal([]byte(stdout), &list); code != 0 || err != nil {
		t.Fatalf("list: %d %q %v", code, stdout, err)
	}
	if len(list) != 1 || list[0].Key != st.Key || list[0].Token != token || list[0].PID != st.PID || list[0].Meta != st.Meta {
		t.Fatalf("list %+v, want just %+v", list, st)
	}
	code, stdout, _ = dlock(t, url, "list", "--json", "other:")
	if code != 0 || strings.TrimSpace(stdout) != "[]" {
		t.Fatalf("list of no locks: %d %q, want []", code, stdout)
	}

	if code := stop(); code != 0 {
		t.Fatalf("holder exited %d", code)
	}
	code, stdout, stderr = dlock(t, url, "status", "--json", "report:daily")
	if err := json.Unmarshal([]byte(stdout), &st); code != 1 || err != nil || st.Held || st.Key != "report:daily" {
		t.Fatalf("status of a free lock: %d %q %v", code, stdout, err)
	}
	oneLine(t, stderr)
}

func TestUnlockForce(t *testing.T) {
	t.Parallel()
	url, _ := server(t)
	holder, token, _ := holdLock(t, url, "stuck", "--ttl", "300ms")

	code, stdout, stderr := dlock(t, url, "unlock", "--force", "stuck")
	if code != 0 || strings.TrimSpace(stdout) != strconv.FormatUint(token, 10) {
		t.Fatalf("unlock: status %d, stdout %q (want token %d), stderr %q", code, stdout, token, stderr)
	}
	// The broken holder notices at its next renewal and stops its command.
	if code := holder.wait(10 * time.Second); code != 76 {
		t.Fatalf("holder: status %d, want 76; stderr %q", code, holder.stderr.String())
	}
	code, _, stderr = dlock(t, url, "unlock", "--force", "stuck")
	if code != 1 {
		t.Fatalf("unlock of a free lock: %d, want 1", code)
	}
	oneLine(t, stderr)
	code, stdout, _ = dlock(t, url, "unlock", "--force", "--json", "stuck")
	if code != 1 || strings.Join(strings.Fields(stdout), " ") != `{ "key": "stuck", "broken": false }` {
		t.Fatalf("unlock --json of a free lock: %d %q", code, stdout)
	}

	_, token, _ = holdLock(t, url, "stuck2", "--ttl", "300ms")
	code, stdout, _ = dlock(t, url, "unlock", "--force", "--json", "stuck2")
	var broke struct {
		Key    string  `json:"key"`
		Broken bool    `json:"broken"`
		Token  *uint64 `json:"token"`
	}
	if err := json.Unmarshal([]byte(stdout), &broke); code != 0 || err != nil || broke.Key != "stuck2" || !broke.Broken ||
		broke.Token == nil || *broke.Token != token {
		t.Fatalf("unlock --json: %d %q %v, want token %d", code, stdout, err, token)
	}
}

// TestUnlockForceNotFromEnvironment: --force confirms one action and is
// never taken from a variable left in the environment.
func TestUnlockForceNotFromEnvironment(t *testing.T) {
	t.Parallel()
	url, _ := server(t)
	_, _, _ = holdLock(t, url, "kept")
	code, _, stderr := dlockEnv(t, url, []string{"DLOCK_FORCE=1"}, "unlock", "kept")
	if code != 64 || !strings.Contains(stderr, "--force") {
		t.Fatalf("unlock with DLOCK_FORCE=1: %d %q, want 64", code, stderr)
	}
	if code, _, _ := dlock(t, url, "status", "kept"); code != 0 {
		t.Fatalf("the lock was broken: status %d", code)
	}
}
