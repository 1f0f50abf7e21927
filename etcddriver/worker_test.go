package etcddriver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock"
)

// workerEnv, set in a re-executed test binary, makes it a fault-test
// worker instead of running tests: a real process that the test can
// SIGSTOP and SIGKILL.
const workerEnv = "DLOCK_ETCD_FAULT_WORKER"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(workerEnv); cfg != "" {
		os.Exit(runWorker(cfg))
	}
	os.Exit(m.Run())
}

// workerConfig is what a worker does, passed as JSON in workerEnv.
type workerConfig struct {
	Name      string        `json:"name"`
	Endpoints string        `json:"endpoints"`
	Key       string        `json:"key"`
	FIFO      bool          `json:"fifo"` // Lock WithFIFO: the fair queue
	TTL       time.Duration `json:"ttl"`
	Hold      time.Duration `json:"hold"` // work between the read and the check
	Gap       time.Duration `json:"gap"`  // between the check and the write: where a pause hurts
	Think     time.Duration `json:"think"`
	Resource  string        `json:"resource"`
}

// event is one line a worker prints. Times are Unix nanoseconds (one
// machine, one wall clock).
type event struct {
	W        string `json:"w"`
	Ev       string `json:"ev"` // acquired, checked, done, lost, error
	Tok      uint64 `json:"tok,omitempty"`
	T        int64  `json:"t"`
	Acq      int64  `json:"acq,omitempty"`
	End      int64  `json:"end,omitempty"` // end of the belief: unlock, or the deadline if lost
	Wrote    bool   `json:"wrote,omitempty"`
	Accepted bool   `json:"accepted,omitempty"`
	WriteT   int64  `json:"write_t,omitempty"`
	Err      string `json:"err,omitempty"`
}

func runWorker(raw string) int {
	var cfg workerConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "worker config:", err)
		return 2
	}
	c, err := Open(cfg.Endpoints, dlock.WithDefaultTTL(cfg.TTL),
		dlock.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))))
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	defer c.Close()
	enc := json.NewEncoder(os.Stdout)
	emit := func(e event) {
		e.W = cfg.Name
		if e.T == 0 {
			e.T = time.Now().UnixNano()
		}
		_ = enc.Encode(e)
	}
	httpc := &http.Client{Timeout: 5 * time.Second}
	call := func(path string, tok uint64, val int64) (int64, bool, error) {
		u := fmt.Sprintf("http://%s/%s?tok=%d&val=%d", cfg.Resource, path, tok, val)
		resp, err := httpc.Get(u)
		if err != nil {
			return 0, false, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return 0, false, nil
		}
		v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return v, true, nil
	}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var opts []dlock.LockOption
		if cfg.FIFO {
			opts = append(opts, dlock.WithFIFO())
		}
		l, err := c.Lock(ctx, cfg.Key, opts...)
		cancel()
		if err != nil {
			emit(event{Ev: "error", Err: err.Error()})
			time.Sleep(50 * time.Millisecond)
			continue
		}
		acq := time.Now()
		emit(event{Ev: "acquired", Tok: l.Token(), T: acq.UnixNano()})
		end := func() int64 {
			now := time.Now()
			if l.Err() != nil {
				now = minTime(now, l.Deadline())
			}
			return now.UnixNano()
		}
		v, ok, err := call("read", l.Token(), 0)
		time.Sleep(cfg.Hold)
		if err != nil || !ok || l.Err() != nil {
			emit(event{Ev: "lost", Tok: l.Token(), Acq: acq.UnixNano(), End: end()})
			_ = l.Unlock(context.Background())
			continue
		}
		emit(event{Ev: "checked", Tok: l.Token()})
		time.Sleep(cfg.Gap)
		writeT := time.Now()
		_, accepted, _ := call("write", l.Token(), v+1)
		emit(event{Ev: "done", Tok: l.Token(), Acq: acq.UnixNano(), End: end(), Wrote: true,
			Accepted: accepted, WriteT: writeT.UnixNano()})
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = l.Unlock(uctx)
		cancel()
		time.Sleep(cfg.Think)
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
