package redisfence_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlockio/dlock/fence"
	"github.com/dlockio/dlock/fence/redisfence"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/internal/testkit/workerproc"
	"github.com/redis/go-redis/v9"
)

// Fault tests with worker processes (this test binary, re-executed): each
// increments a counter hash on a protected redis-server by fenced
// read-modify-writes, under a dlock lock on a second redis-server. Each
// accepted write also records, in the same script, the value it read: the
// hash is the ground truth.

const patience = 20 * time.Second

type faultRun struct {
	*workerproc.Harness
	resource *redisserver.Server
	rdb      *redis.Client
	base     workerConfig
}

func newFaultRun(t *testing.T, unfenced bool) *faultRun {
	if testing.Short() {
		t.Skip("fault injection with worker processes; skipped in -short mode")
	}
	if os.Getenv(redisserver.EnvAddr) != "" {
		t.Skip("fault injection needs redis-servers it owns; " + redisserver.EnvAddr + " is set")
	}
	// The protected store persists every write (AOF, fsync always), so a
	// restart keeps its data and its marks.
	res := redisserver.Start(t, redisserver.WithArgs("--appendonly", "yes", "--appendfsync", "always"))
	r := &faultRun{Harness: workerproc.New(t, workerEnv), resource: res, rdb: res.Client(t)}
	r.base = workerConfig{Lock: redisserver.Start(t).Addr(), Resource: res.Addr(), TTL: 300 * time.Millisecond,
		Work: 100 * time.Millisecond, Unfenced: unfenced}
	return r
}

func (r *faultRun) spawn(iters int) string {
	cfg := r.base
	cfg.Name, cfg.Iters = r.NextName(), iters
	r.Spawn(cfg.Name, cfg)
	return cfg.Name
}

// redisResult is what the protected hash and the workers' reports show.
type redisResult struct {
	writes      int   // accepted writes logged in the hash
	counter     int64 // field v
	lostUpdates int   // accepted writes that read a value another accepted write had read
	workerproc.Reports
}

func (r *faultRun) result(t *testing.T) redisResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := r.rdb.HGetAll(ctx, counterKey).Result()
	if err != nil {
		t.Fatal(err)
	}
	var res redisResult
	readValues := map[string]bool{}
	for k, v := range h {
		if !strings.HasPrefix(k, "log:") {
			continue
		}
		res.writes++
		if readValues[v] {
			res.lostUpdates++ // two accepted writes computed from the same value
		}
		readValues[v] = true
	}
	if res.counter, err = strconv.ParseInt(h["v"], 10, 64); err != nil && res.writes > 0 {
		t.Fatal(err)
	}
	res.Reports = r.Tally(func(w string, i int) bool {
		_, ok := h[fmt.Sprintf("log:%s:%d", w, i)]
		return ok
	})
	return res
}

func (res redisResult) checkFenced(t *testing.T) {
	t.Helper()
	t.Logf("%+v", res)
	if res.lostUpdates != 0 || res.counter != int64(res.writes) {
		t.Errorf("%d lost updates; counter %d after %d accepted writes", res.lostUpdates, res.counter, res.writes)
	}
	if res.AckedMissing != 0 || res.Acked != res.writes {
		t.Errorf("%d acknowledged writes, %d logged, %d acknowledged but missing", res.Acked, res.writes, res.AckedMissing)
	}
}

// TestFaultPausedWorker: a worker frozen past its TTL between read and
// write is refused with ErrStaleToken; without the fence (the canary) its
// write gets in and an increment is lost.
func TestFaultPausedWorker(t *testing.T) {
	const workers, iters, faults = 3, 8, 3
	t.Run("fenced", func(t *testing.T) {
		r := newFaultRun(t, false)
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
	})
	t.Run("unfenced canary", func(t *testing.T) {
		r := newFaultRun(t, true)
		for range workers {
			r.spawn(iters)
		}
		effective, _ := r.PauseAfterRead(faults, patience)
		r.Await(2 * patience)
		res := r.result(t)
		t.Logf("%+v", res)
		if effective == 0 || res.lostUpdates == 0 {
			t.Errorf("%d pauses took effect, %d lost updates: the canary must lose updates", effective, res.lostUpdates)
		}
	})
}

// TestFaultKilledWorker: workers killed between read and write, and the
// protected Redis killed and restarted from its AOF between two writes:
// nothing acknowledged is lost, nothing stale gets in, and the marks
// survive the restarts.
func TestFaultKilledWorker(t *testing.T) {
	const workers, iters = 3, 8
	r := newFaultRun(t, false)
	for range workers {
		r.spawn(iters)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*patience)
	defer cancel()
	runID := func() string {
		info, err := r.rdb.Info(ctx, "server").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(info, "\r\n") {
			if id, ok := strings.CutPrefix(l, "run_id:"); ok {
				return id
			}
		}
		t.Fatal("no run_id in INFO")
		return ""
	}
	from, restarts := 0, 0
	for f := range 4 {
		if f%2 == 0 {
			w, next, ok := r.WaitFor(from, patience, workerproc.Kind("read"))
			if !ok {
				t.Fatal("no worker read")
			}
			r.Signal(w.W, syscall.SIGKILL)
			r.spawn(3)
			from = next
			continue
		}
		_, next, ok := r.WaitFor(from, patience, workerproc.Kind("commit"))
		if !ok {
			t.Fatal("no worker wrote")
		}
		before := runID()
		r.resource.Restart() // SIGKILL, then start again on the same AOF
		if runID() != before {
			restarts++
		}
		from = next
	}
	r.Await(3 * patience)
	res := r.result(t)
	res.checkFenced(t)
	if res.writes == 0 || restarts != 2 {
		t.Errorf("%d writes, %d restarts: the run proved nothing", res.writes, restarts)
	}
	// The mark came back with the data: an old token is still refused.
	f, err := redisfence.New(r.rdb)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.HSet(ctx, counterKey, 1, map[string]any{"v": 0}); !errors.Is(err, fence.ErrStaleToken) {
		t.Errorf("a write with token 1 after the restarts: %v, want ErrStaleToken", err)
	}
}
