package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// statusQueueJSON is status --json of a name with readers or permits.
type statusQueueJSON struct {
	Key     string `json:"key"`
	Held    bool   `json:"held"`
	Holders []struct {
		ID    string `json:"id"`
		Mode  string `json:"mode"`
		Token uint64 `json:"token"`
		PID   int    `json:"pid"`
		Meta  string `json:"meta"`
		TTLMS int64  `json:"ttl_ms"`
	} `json:"holders"`
	Waiters []struct {
		Mode string `json:"mode"`
	} `json:"waiters"`
}

func statusQueue(t *testing.T, url, key string) statusQueueJSON {
	t.Helper()
	code, stdout, stderr := dlock(t, url, "status", "--json", key)
	var st statusQueueJSON
	if err := json.Unmarshal([]byte(stdout), &st); code != 0 || err != nil {
		t.Fatalf("status --json %s: %d %q %v; stderr %q", key, code, stdout, err, stderr)
	}
	return st
}

// --shared runs share the read lock; a plain run is excluded by them and
// excludes them.
func TestRunShared(t *testing.T) {
	t.Parallel()
	url, _ := server(t)
	r1, _, stop1 := holdLock(t, url, "catalog", "--shared", "--meta", "reader one")
	r2, _, stop2 := holdLock(t, url, "catalog", "-s")

	st := statusQueue(t, url, "catalog")
	if !st.Held || len(st.Holders) != 2 || st.Holders[0].Mode != "shared" || st.Holders[1].Mode != "shared" {
		t.Fatalf("status of two readers: %+v", st)
	}
	pids := map[int]bool{st.Holders[0].PID: true, st.Holders[1].PID: true}
	if !pids[r1.cmd.Process.Pid] || !pids[r2.cmd.Process.Pid] {
		t.Fatalf("holders' pids %v, want %d and %d", pids, r1.cmd.Process.Pid, r2.cmd.Process.Pid)
	}
	code, stdout, _ := dlock(t, url, "status", "catalog")
	if code != 0 || !strings.Contains(stdout, "2 holders") || !strings.Contains(stdout, "reader one") {
		t.Fatalf("status text: %d %q", code, stdout)
	}
	code, _, stderr := dlock(t, url, "run", "-n", "catalog", "--", "true")
	if code != 75 || !strings.Contains(stderr, "not acquired") {
		t.Fatalf("plain run under readers: %d %q, want 75", code, stderr)
	}
	if c := stop1(); c != 0 {
		t.Fatalf("reader exited %d", c)
	}
	if c := stop2(); c != 0 {
		t.Fatalf("reader exited %d", c)
	}
	_, _, stopW := holdLock(t, url, "catalog")
	code, _, stderr = dlock(t, url, "run", "-n", "--shared", "catalog", "--", "true")
	if code != 75 || !strings.Contains(stderr, "a writer holds it") {
		t.Fatalf("--shared under a plain run: %d %q, want 75", code, stderr)
	}
	if c := stopW(); c != 0 {
		t.Fatalf("writer exited %d", c)
	}
	if code, _, stderr := dlock(t, url, "run", "--shared", "--permits", "2", "catalog", "--", "true"); code != 64 {
		t.Fatalf("--shared with --permits: %d %q, want 64", code, stderr)
	}
}

// --permits N: N runs at once, the next one is refused; the permits are
// given back when the runs end.
func TestRunPermits(t *testing.T) {
	t.Parallel()
	url, _ := server(t)
	_, _, stop1 := holdLock(t, url, "encoders", "--permits", "2")
	_, _, stop2 := holdLock(t, url, "encoders", "-p", "2")
	st := statusQueue(t, url, "encoders")
	if len(st.Holders) != 2 || st.Holders[0].Mode != "permit" || st.Holders[0].ID == st.Holders[1].ID || len(st.Holders[0].ID) != 32 {
		t.Fatalf("status of two permits: %+v, want two permits with their own ids", st)
	}
	code, _, stderr := dlock(t, url, "run", "-n", "--permits", "2", "encoders", "--", "true")
	if code != 75 || !strings.Contains(stderr, "all 2 permits held") {
		t.Fatalf("third of 2 permits: %d %q, want 75", code, stderr)
	}
	// N is the name's while it has permits: another N cannot get past it.
	if code, _, stderr := dlock(t, url, "run", "-n", "--permits", "3", "encoders", "--", "true"); code != 64 || !strings.Contains(stderr, "permit limit differs") {
		t.Fatalf("a run with N=3 while 2 are held: %d %q, want 64, the limit differs", code, stderr)
	}
	if c := stop1(); c != 0 {
		t.Fatalf("holder exited %d", c)
	}
	if code, _, stderr := dlock(t, url, "run", "-n", "--permits", "2", "encoders", "--", "true"); code != 0 {
		t.Fatalf("a permit after one was given back: %d %q, want 0", code, stderr)
	}
	if c := stop2(); c != 0 {
		t.Fatalf("holder exited %d", c)
	}
	if code, stdout, _ := dlock(t, url, "status", "--json", "encoders"); code != 1 || !strings.Contains(stdout, `"held": false`) {
		t.Fatalf("status after every run ended: %d %q, want 1, free", code, stdout)
	}
	if code, _, stderr := dlock(t, url, "run", "--permits", "0x", "encoders", "--", "true"); code != 64 {
		t.Fatalf("--permits 0x: %d %q, want 64", code, stderr)
	}
}
