package sqlonce_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dlockio/dlock/internal/testkit/pgserver"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/internal/testkit/workerproc"
	"github.com/dlockio/dlock/once/sqlonce"
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
	*workerproc.Harness
	t     *testing.T
	redis *redisserver.Server
	pg    *pgserver.Server
	db    *sql.DB
	next  int // the index of the first event until has not read yet
}

func newHarness(t *testing.T) *harness {
	if testing.Short() {
		t.Skip("fault tests start processes and servers")
	}
	h := &harness{t: t, redis: redisserver.Start(t), pg: pgserver.Start(t)}
	h.Harness = workerproc.New(t, workerEnv) // its cleanup, killing the workers, runs before the servers'.
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
	h.Spawn(name, workerConfig{Name: name, Redis: h.redis.Addr(), DSN: h.pg.DSN(), Orders: list, HoldAt: holdAt, IgnoreLease: ignoreLease,
		TTL: faultTTL, GiveUp: 60 * time.Second, Backoff: 20 * time.Millisecond})
}

// until reads events until match returns true; it returns every event
// read, including the matching one. The next call reads on from there.
func (h *harness) until(what string, d time.Duration, match func(workerproc.Event) bool) []workerproc.Event {
	h.t.Helper()
	_, next, ok := h.WaitFor(h.next, d, match)
	seen := h.Events()[h.next:next]
	h.next = next
	if !ok {
		h.t.Fatalf("timed out after %v waiting for %s (%d events)", d, what, len(seen))
	}
	return seen
}

// waitExits reads events until n workers reported exit, and returns them.
func (h *harness) waitExits(n int) []workerproc.Event {
	h.t.Helper()
	exits := 0
	return h.until(fmt.Sprintf("%d workers to finish", n), 90*time.Second, func(e workerproc.Event) bool {
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
