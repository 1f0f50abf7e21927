package main

import (
	"context"
	"encoding/json"
	"testing"
)

func TestDemoEmbedded(t *testing.T) {
	t.Parallel()
	// No --redis: the demo must run on its embedded server even where
	// DLOCK_REDIS points at nothing.
	code, stdout, stderr := dlock(t, closedURL(t), "demo", "--json", "--workers", "4", "--orders", "12")
	if code != 0 {
		t.Fatalf("demo: status %d; stderr %s", code, stderr)
	}
	var rep struct {
		Orders       int `json:"orders"`
		Naive, Dlock struct {
			Completed      int `json:"orders_completed"`
			Double         int `json:"double_processed"`
			Overlaps       int `json:"overlaps"`
			Foreign        int `json:"foreign_locks_deleted"`
			StaleAccepted  int `json:"stale_writes_accepted"`
			StaleRejected  int `json:"stale_writes_rejected"`
			TokenRegressed int `json:"token_regressions"`
		}
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("demo JSON %q: %v", stdout, err)
	}
	n, d := rep.Naive, rep.Dlock
	t.Logf("naive %+v", n)
	t.Logf("dlock %+v", d)
	if n.Double+n.Overlaps+n.Foreign+n.StaleAccepted == 0 {
		t.Error("the naive lock showed no violation: the incident did not reproduce")
	}
	if d.Double != 0 || d.StaleAccepted != 0 || d.Foreign != 0 || d.TokenRegressed != 0 {
		t.Error("dlock let a violation through")
	}
	if n.Completed != rep.Orders || d.Completed != rep.Orders {
		t.Errorf("orders completed: naive %d, dlock %d, want %d", n.Completed, d.Completed, rep.Orders)
	}
	if d.Overlaps > 0 && d.StaleRejected == 0 {
		t.Error("dlock overlapped but fencing rejected nothing")
	}
}

func TestDemoOnServer(t *testing.T) {
	t.Parallel()
	url, rdb := server(t)
	code, stdout, stderr := dlock(t, closedURL(t), "demo", "--redis", url, "--json", "--workers", "3", "--orders", "10")
	if code != 0 {
		t.Fatalf("demo: status %d; stderr %s", code, stderr)
	}
	var rep struct {
		Redis string `json:"redis"`
		Dlock struct {
			Completed int `json:"orders_completed"`
		}
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("demo JSON %q: %v", stdout, err)
	}
	if rep.Redis != url || rep.Dlock.Completed != 10 {
		t.Fatalf("ran on %q, completed %d; want %q, 10", rep.Redis, rep.Dlock.Completed, url)
	}
	if n := rdb.DBSize(context.Background()).Val(); n != 0 {
		keys, _ := rdb.Keys(context.Background(), "*").Result()
		t.Fatalf("the demo left %d keys: %q", n, keys)
	}
}
