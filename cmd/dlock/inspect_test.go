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
	if code != 0 || !strings.Contains(stdout, strconv.FormatUint(token, 10)) || !strings.Contains(stdout, "nightly report") {
		t.Fatalf("status text: %d %q", code, stdout)
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
}
