package faults

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
)

// TestFaults runs every scenario on the naive lock, then on dlock, asserts
// dlock's invariants and the canary's failure, and logs the summary table.
func TestFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("fault injection takes minutes; skipped in -short mode")
	}
	if os.Getenv(redisserver.EnvAddr) != "" {
		t.Skip("fault injection needs redis-servers it owns; " + redisserver.EnvAddr + " is set")
	}
	m := suiteMode()
	var rows []string
	for _, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			var naive, dl result
			t.Run(kindNaive, func(t *testing.T) {
				naive = newRun(t, sc, kindNaive, m).execute()
				checkCanary(t, sc, m, naive)
			})
			t.Run(kindDlock, func(t *testing.T) {
				dl = newRun(t, sc, kindDlock, m).execute()
				checkDlock(t, sc, dl)
			})
			rows = append(rows, tableRow(sc, naive, dl))
		})
	}
	table := tableHeader + strings.Join(rows, "")
	t.Logf("mode full=%v, %d workers x %d iterations:\n%s", m.full, m.workers, m.iters, table)
	if path := os.Getenv("DLOCK_FAULTS_TABLE"); path != "" {
		if err := os.WriteFile(path, []byte(table), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// checkDlock asserts what dlock guarantees under every fault.
func checkDlock(t *testing.T, sc scenario, r result) {
	t.Helper()
	if r.Faults == 0 || r.Accepted == 0 {
		t.Errorf("the run proves nothing: %d faults injected, %d writes accepted", r.Faults, r.Accepted)
	}
	if r.Stale != 0 {
		t.Errorf("(a) %d stale writes accepted", r.Stale)
	}
	if r.Overlaps != 0 && !sc.mayOverlap {
		t.Errorf("(b) %d pairs of holders overlapped (longest %v); no fault here lets a holder be wrong", r.Overlaps, r.OverlapMax)
	}
	if r.LostAcked != 0 {
		t.Errorf("(c) %d acknowledged increments lost", r.LostAcked)
	}
	if r.Inversions != 0 {
		t.Errorf("%d holders had a fencing token not above an earlier holder's", r.Inversions)
	}
	if r.Linear == porcupine.Illegal {
		t.Error("the counter's history is not linearizable")
	}
	if r.Unrecovered != 0 {
		t.Errorf("(d) nobody acquired again after %d kills", r.Unrecovered)
	}
	for _, d := range r.Recovery {
		// The lock of a killed holder must come free when its TTL runs out;
		// waiters wake at the remaining TTL, so little more than one TTL.
		if d > sc.ttl+time.Second {
			t.Errorf("(d) %v from kill to the next acquisition, TTL %v", d, sc.ttl)
		}
	}
	if len(r.Leaked) != 0 {
		t.Errorf("(e) keys left without expiry: %v", r.Leaked)
	}
	if r.Stuck != 0 {
		t.Errorf("the lock got stuck: no acquisition for a long time")
	}
}

// checkCanary asserts that the harness saw the naive lock fail: otherwise a
// clean dlock result would prove nothing.
func checkCanary(t *testing.T, sc scenario, m mode, r result) {
	t.Helper()
	if r.Faults == 0 {
		t.Errorf("no fault was injected")
	}
	seen := r.Stale + r.Overlaps + r.LostAcked + len(r.Leaked) + r.Stuck + r.Unrecovered
	if r.Linear == porcupine.Illegal {
		seen++
	}
	switch {
	case seen > 0:
	case sc.canaryFullOnly && !m.full:
		t.Logf("canary: no violation this time (only required with DLOCK_FAULTS_FULL=1)")
	default:
		t.Errorf("canary: the naive lock showed no violation, so the harness cannot see one")
	}
}

const tableHeader = "| Scenario | Fault injected | Stale writes accepted (a) | Overlapping holders (b) | " +
	"Lost acked increments (c) | Kill to next acquisition (d) | Leaked keys (e) | Lock stuck | " +
	"Writes accepted / rejected | Linearizable | Acquisitions |\n" +
	"|---|---|---|---|---|---|---|---|---|---|---|\n"

// tableRow gives each figure as naive / dlock.
func tableRow(sc scenario, n, d result) string {
	pair := func(a, b any) string { return fmt.Sprintf("%v / %v", a, b) }
	return fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
		sc.name, sc.fault,
		pair(n.Stale, d.Stale),
		pair(overlapText(n), overlapText(d)),
		pair(n.LostAcked, d.LostAcked),
		pair(recoveryText(n), recoveryText(d)),
		pair(len(n.Leaked), len(d.Leaked)),
		pair(n.Stuck, d.Stuck),
		pair(fmt.Sprintf("%d/%d", n.Accepted, n.Rejected), fmt.Sprintf("%d/%d", d.Accepted, d.Rejected)),
		pair(n.Linear, d.Linear),
		pair(n.Acquisitions, d.Acquisitions))
}

func overlapText(r result) string {
	if r.Overlaps == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (max %v)", r.Overlaps, r.OverlapMax.Round(time.Millisecond))
}

func recoveryText(r result) string {
	if len(r.Recovery) == 0 && r.Unrecovered == 0 {
		return "-"
	}
	s := "-"
	if len(r.Recovery) > 0 {
		ds := slices.Clone(r.Recovery)
		slices.Sort(ds)
		s = fmt.Sprintf("median %v, max %v", ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
	}
	if r.Unrecovered > 0 {
		s += fmt.Sprintf(", %d never", r.Unrecovered)
	}
	return s
}
