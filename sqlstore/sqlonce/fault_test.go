package sqlonce_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dlockio/dlock/internal/redistest"
	"github.com/dlockio/dlock/sqlstore/internal/pgtest"
	"github.com/dlockio/dlock/sqlstore/sqlonce"
)

// The fault tests run worker processes (this test binary, re-executed)
// that ship orders exactly once through DoTx: locks on a real redis-server,
// records and shipments in a real PostgreSQL. Every order is delivered to
// every worker, in its own order, so duplicates race all the time. The
// checks: every order has exactly one shipment row (no duplicated side
// effect, none lost) and a completed record whose token is the shipment's.

const (
	faultTTL    = 500 * time.Millisecond
	faultOrders = 30
)

type harness struct {
	t      *testing.T
	redis  *redistest.Server
	pg     *pgtest.Server
	db     *sql.DB
	events chan event

	mu      sync.Mutex
	workers map[string]*worker
}

type worker struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
}

func newHarness(t *testing.T) *harness {
	if testing.Short() {
		t.Skip("fault tests start processes and servers")
	}
	h := &harness{t: t, redis: redistest.Start(t), pg: pgtest.Start(t), events: make(chan event, 1024), workers: map[string]*worker{}}
	h.db = h.pg.Open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sqlonce.Migrate(ctx, h.db); err != nil {
		t.Fatal(err)
	}
	if _, err := h.db.ExecContext(ctx, `CREATE TABLE shipments (order_id text NOT NULL, token bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return h
}

func orders() []string {
	o := make([]string, faultOrders)
	for i := range o {
		o[i] = fmt.Sprintf("order:%d", i)
	}
	return o
}

func shuffled(o []string) []string {
	o = append([]string(nil), o...)
	rand.Shuffle(len(o), func(i, j int) { o[i], o[j] = o[j], o[i] })
	return o
}

// start runs a worker process delivering list, holding after holdAt's
// effect if set.
func (h *harness) start(name string, list []string, holdAt string, ignoreLease bool) {
	h.t.Helper()
	cfg, _ := json.Marshal(workerConfig{Name: name, Redis: h.redis.Addr(), DSN: h.pg.DSN(), Orders: list, HoldAt: holdAt, IgnoreLease: ignoreLease,
		TTL: faultTTL, GiveUp: 60 * time.Second, Backoff: 20 * time.Millisecond})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), workerEnv+"="+string(cfg))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		h.t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		h.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	w := &worker{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	h.mu.Lock()
	h.workers[name] = w
	h.mu.Unlock()
	go func() {
		defer close(w.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var e event
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				h.events <- e
			}
		}
		_ = cmd.Wait()
	}()
	h.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-w.done
	})
}

func (h *harness) signal(name string, sig syscall.Signal) {
	h.t.Helper()
	h.mu.Lock()
	w := h.workers[name]
	h.mu.Unlock()
	if err := w.cmd.Process.Signal(sig); err != nil {
		h.t.Fatalf("signal %v to %s: %v", sig, name, err)
	}
}

// until reads events until match returns true; it returns every event
// read, including the matching one.
func (h *harness) until(what string, d time.Duration, match func(event) bool) []event {
	h.t.Helper()
	var seen []event
	deadline := time.After(d)
	for {
		select {
		case e := <-h.events:
			seen = append(seen, e)
			if match(e) {
				return seen
			}
		case <-deadline:
			h.t.Fatalf("timed out after %v waiting for %s (%d events)", d, what, len(seen))
		}
	}
}

// waitExits reads events until n workers reported exit, and returns them.
func (h *harness) waitExits(n int) []event {
	h.t.Helper()
	exits := 0
	return h.until(fmt.Sprintf("%d workers to finish", n), 90*time.Second, func(e event) bool {
		if e.K == evExit {
			exits++
		}
		return exits == n
	})
}

// check: one shipment per order, by the token of the completed record.
func (h *harness) check() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, _ := sqlonce.New(h.db)
	for _, o := range orders() {
		var n int
		var tok sql.NullInt64
		if err := h.db.QueryRowContext(ctx, `SELECT count(*), max(token) FROM shipments WHERE order_id = $1`, o).Scan(&n, &tok); err != nil {
			h.t.Fatal(err)
		}
		rec, ok, err := store.Get(ctx, o)
		if err != nil {
			h.t.Fatal(err)
		}
		switch {
		case n != 1:
			h.t.Errorf("%s: %d shipments, want exactly 1", o, n)
		case !ok || rec.State.String() != "completed":
			h.t.Errorf("%s: shipped but the record is %+v (found %v): a lost completion", o, rec, ok)
		case uint64(tok.Int64) != rec.Token:
			h.t.Errorf("%s: shipped under token %d, completed under %d", o, tok.Int64, rec.Token)
		}
	}
}
