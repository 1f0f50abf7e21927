package sqlonce_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/dlockio/dlock/internal/testkit/workerproc"
)

// A worker frozen (SIGSTOP) mid-way — its shipment inserted, not yet
// committed — past its lock's TTL: another worker takes the order over and
// ships it; the frozen one, resumed, has its claim refused and its
// transaction rolled back. With DoTx the lease's end already aborts the
// transaction; a worker whose transaction ignores the lease is stopped by
// the token check in CompleteTx alone.
func TestFaultPausedPastTTL(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		t.Run(map[bool]string{false: "DoTx", true: "IgnoringLease"}[ignore], func(t *testing.T) { testPaused(t, ignore) })
	}
}

func testPaused(t *testing.T, ignoreLease bool) {
	h := newHarness(t)
	all := orders()
	target := all[0]
	h.start("w0", all, target, ignoreLease)
	h.until("w0's effect on the target", 30*time.Second, func(e workerproc.Event) bool { return e.W == "w0" && e.K == evEffect && e.Key == target })
	h.Signal("w0", syscall.SIGSTOP)
	h.start("w1", shuffled(all), "", false)
	h.start("w2", shuffled(all), "", false)
	h.until("another worker to ship the target", 30*time.Second, func(e workerproc.Event) bool {
		return e.W != "w0" && e.K == evDone && e.Key == target && !e.Replayed
	})
	h.Signal("w0", syscall.SIGCONT)
	h.Send("w0", "go")
	seen := h.waitExits(3)
	lost := false
	for _, e := range seen {
		if e.W == "w0" && e.K == evLost && e.Key == target {
			lost = true
		}
		if e.W == "w0" && e.K == evDone && e.Key == target && !e.Replayed {
			t.Errorf("the frozen worker completed the target after being taken over: %+v", e)
		}
	}
	if !lost {
		t.Error("the frozen worker did not report its claim lost")
	}
	h.check()
}

// A worker killed (SIGKILL) mid-way: its transaction dies with its
// connection, its lock expires, another worker ships the order.
func TestFaultKilledMidway(t *testing.T) {
	h := newHarness(t)
	all := orders()
	target := all[0]
	h.start("w0", all, target, false)
	h.until("w0's effect on the target", 30*time.Second, func(e workerproc.Event) bool { return e.W == "w0" && e.K == evEffect && e.Key == target })
	h.Signal("w0", syscall.SIGKILL)
	h.start("w1", shuffled(all), "", false)
	h.start("w2", shuffled(all), "", false)
	h.waitExits(2)
	h.check()
}

// The database killed and restarted while three workers race on every
// order: deliveries fail and are redelivered, nothing is shipped twice or
// lost.
func TestFaultDatabaseRestarted(t *testing.T) {
	h := newHarness(t)
	all := orders()
	for _, w := range []string{"w0", "w1", "w2"} {
		h.start(w, shuffled(all), "", false)
	}
	done := 0
	h.until("a third of the orders", 60*time.Second, func(e workerproc.Event) bool {
		if e.K == evDone && !e.Replayed {
			done++
		}
		return done >= faultOrders/3
	})
	h.pg.Kill(t)
	h.pg.Restart(t)
	h.db = h.pg.Open(t) // the harness's own pool still holds the dead server's connections
	seen := h.waitExits(3)
	errs := 0
	for _, e := range seen {
		if e.K == evErr {
			errs++
		}
	}
	t.Logf("%d deliveries failed while the database was down, and were redelivered", errs)
	h.check()
}
