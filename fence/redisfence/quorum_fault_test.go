package redisfence_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock/internal/testkit/redisserver"
)

// TestFaultPausedWorkerQuorum is TestFaultPausedWorker with the lock on a
// quorum of 3 independent masters (redisdriver.OpenQuorum): a worker
// frozen (SIGSTOP) past its TTL between read and write loses the lock to
// a rival with a greater token, and its write is refused; no stale write
// gets in, no increment is lost.
func TestFaultPausedWorkerQuorum(t *testing.T) {
	const workers, iters, faults = 3, 8, 3
	r := newFaultRun(t, false)
	var masters []string
	for range 3 {
		s := redisserver.Start(t)
		masters = append(masters, s.Addr())
		waitVoting(t, s, r.base.TTL)
	}
	r.base.Quorum = masters
	for range workers {
		r.spawn(iters)
	}
	effective, refused := r.PauseAfterRead(faults, patience)
	r.Await(2 * patience)
	res := r.result(t)
	res.checkFenced(t)
	if effective == 0 || refused != effective || res.RefusedLost < refused {
		t.Errorf("%d paused writes after a rival's, %d refused (%d by holders that knew their lease had ended)", effective, refused, res.RefusedLost)
	}
}

// waitVoting waits until s has been up for ttl (whole seconds, rounded
// up): a quorum keeps a master restarted, or started, less than a TTL ago
// out of votes.
func waitVoting(t *testing.T, s *redisserver.Server, ttl time.Duration) {
	t.Helper()
	c := s.Client(t)
	need := int64((ttl + time.Second - 1) / time.Second)
	deadline := time.Now().Add(ttl + 10*time.Second)
	for {
		info, err := c.Info(context.Background(), "server").Result()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "uptime_in_seconds:"); ok {
				if up, err := strconv.ParseInt(v, 10, 64); err == nil && up >= need {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not up for %v", s.Addr(), ttl)
		}
		time.Sleep(50 * time.Millisecond) // polls the server's uptime
	}
}
