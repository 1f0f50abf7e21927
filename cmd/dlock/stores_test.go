package main

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// checkStoreCommands runs run, status, list and unlock on another store
// than Redis, chosen by --FLAG and by its variable (envName, e.g.
// DLOCK_ETCD), at addr: a run prints its token; a run held in the
// background is shown by status and list; a reader waits under QUEUED; a
// second run of the held lock with --wait 0 exits 75; unlock --force
// breaks it, and the broken run exits 76 within a TTL or so; status then
// exits 1. It returns the environment that chooses the store.
func checkStoreCommands(t *testing.T, flag, envName, addr string) []string {
	t.Helper()
	noRedis := []string{"DLOCK_REDIS="}
	out, code := dlockCmd(noRedis, "--"+flag, addr, "run", "--ttl", "3s", "job", "--", "sh", "-c", `echo "token=$DLOCK_TOKEN"`)
	if code != 0 || !strings.Contains(out, "token=") {
		t.Fatalf("run on --%s: exit %d, %q", flag, code, out)
	}
	// Held by a run in the background; seen through the variable.
	env := append(noRedis, envName+"="+addr)
	background := func(args ...string) *exec.Cmd {
		cmd := exec.Command(dlockBin, args...)
		cmd.Env = append(cmd.Environ(), env...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	bg := background("run", "--ttl", "3s", "held", "--", "sleep", "30")
	var status string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if status, code = dlockCmd(env, "status", "held"); code == 0 {
			break
		}
	}
	if code != 0 || !strings.Contains(status, "token:") {
		t.Fatalf("status of a held lock: exit %d, %q", code, status)
	}
	if out, code := dlockCmd(env, "list"); code != 0 || !strings.Contains(out, "held") {
		t.Errorf("list: exit %d, %q", code, out)
	}
	// A reader is listed under QUEUED (the driver's ListQueues).
	background("run", "--shared", "--ttl", "3s", "reports", "--", "sleep", "30")
	var list string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if list, code = dlockCmd(env, "list"); code == 0 && strings.Contains(list, "QUEUED") {
			break
		}
	}
	if !strings.Contains(list, "QUEUED") || !strings.Contains(list, "reports") || !strings.Contains(list, "shared") {
		t.Errorf("list with a reader on --%s: exit %d, %q; want it under QUEUED", flag, code, list)
	}
	if out, code := dlockCmd(env, "run", "--wait", "0", "held", "--", "true"); code != 75 {
		t.Errorf("run of a held lock with --wait 0: exit %d, %q; want 75", code, out)
	}
	if out, code := dlockCmd(env, "unlock", "--force", "held"); code != 0 {
		t.Errorf("unlock --force: exit %d, %q", code, out)
	}
	// The broken run notices (exit 76) within a TTL or so.
	done := make(chan error, 1)
	go func() { done <- bg.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 76 {
			t.Errorf("run whose lock was broken: %v, want exit 76", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("run whose lock was broken still running after 10s")
	}
	if out, code := dlockCmd(env, "status", "held"); code != 1 {
		t.Errorf("status after unlock --force: exit %d, %q; want 1", code, out)
	}
	return env
}
