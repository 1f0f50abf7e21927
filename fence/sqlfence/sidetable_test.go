package sqlfence_test

import (
	"database/sql"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/fence"
	"github.com/dlockio/dlock/fence/sqlfence"
)

func TestAdvance(t *testing.T) {
	_, db := testDB(t)
	ctx := testCtx(t)

	for _, tok := range []fence.Token{5, 5, 9} { // equal is the same holder again
		if err := sqlfence.Advance(ctx, db, "order:42", tok); err != nil {
			t.Fatalf("token %d: %v", tok, err)
		}
	}
	err := sqlfence.Advance(ctx, db, "order:42", 8)
	var stale *fence.StaleTokenError
	if !errors.Is(err, fence.ErrStaleToken) || !errors.As(err, &stale) {
		t.Fatalf("token 8 after 9: %v, want a StaleTokenError", err)
	}
	if *stale != (fence.StaleTokenError{Resource: "order:42", Token: 8, Highest: 9}) {
		t.Fatalf("error says %+v", *stale)
	}
	if got := highest(t, ctx, db, "order:42"); got != 9 {
		t.Fatalf("high-water mark %d after a rejection, want 9", got)
	}
	// Other resources have their own marks.
	if err := sqlfence.Advance(ctx, db, "order:43", 1); err != nil {
		t.Fatal(err)
	}

	// Tokens are bigints in the database: the largest fits, one more is refused.
	if err := sqlfence.Advance(ctx, db, "big", math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	err = sqlfence.Advance(ctx, db, "big", math.MaxInt64+1)
	if !errors.Is(err, sqlfence.ErrTokenRange) || !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("token above MaxInt64: %v", err)
	}
	if err := sqlfence.Advance(ctx, db, "", 1); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("empty resource: %v", err)
	}
	// Lock names are bytes, PostgreSQL text is not: a name it cannot
	// store is bad input. Before, it was the driver's bare error.
	for _, r := range []string{"a\x00b", "order:\xff"} {
		if err := sqlfence.Advance(ctx, db, r, 1); !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("Advance of resource %q: %v, want ErrInvalidArgument", r, err)
		}
		if err := sqlfence.InTx(ctx, db, r, 1, func(*sql.Tx) error { return nil }); !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("InTx of resource %q: %v, want ErrInvalidArgument", r, err)
		}
	}
}

// TestAdvanceRollsBack: the mark belongs to the caller's transaction.
func TestAdvanceRollsBack(t *testing.T) {
	_, db := testDB(t)
	ctx := testCtx(t)
	if err := sqlfence.Advance(ctx, db, "r", 3); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlfence.Advance(ctx, tx, "r", 10); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if got := highest(t, ctx, db, "r"); got != 3 {
		t.Fatalf("mark %d after rollback, want 3", got)
	}
}

// TestAdvanceSerializes: a transaction guarding a resource waits for the
// one that holds it; when that one commits a higher token, the waiter is
// refused; when it committed a lower token, the waiter gets through.
func TestAdvanceSerializes(t *testing.T) {
	_, db := testDB(t)
	ctx := testCtx(t)
	for _, c := range []struct {
		name        string
		first, then fence.Token
		wantStale   bool
	}{
		{"newer holder first", 7, 5, true},
		{"older holder first", 5, 7, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := "serial:" + c.name
			a, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Rollback()
			if err := sqlfence.Advance(ctx, a, res, c.first); err != nil {
				t.Fatal(err)
			}
			b, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Rollback()
			pid := backendPID(t, ctx, b)
			done := make(chan error, 1)
			go func() { done <- sqlfence.Advance(ctx, b, res, c.then) }()
			waitBlocked(t, ctx, db, pid)
			select {
			case err := <-done:
				t.Fatalf("the second transaction did not wait for the first: %v", err)
			default:
			}
			if err := a.Commit(); err != nil {
				t.Fatal(err)
			}
			err = <-done
			if c.wantStale != errors.Is(err, fence.ErrStaleToken) {
				t.Fatalf("token %d after %d committed: %v", c.then, c.first, err)
			}
		})
	}
}

// TestAdvanceRace: transactions racing on one resource, each guarded, each
// appending its token to a log after the guard: in commit order the logged
// tokens never go down, and every token was either logged or refused.
func TestAdvanceRace(t *testing.T) {
	_, db := testDB(t)
	ctx := testCtx(t)
	if _, err := db.ExecContext(ctx, "CREATE TABLE writes (seq bigserial PRIMARY KEY, token bigint NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	const workers, perWorker = 8, 40
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		accepted = map[int64]bool{}
		refused  int
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				// Tokens interleave across workers, so stale ones are common.
				tok := fence.Token(i*workers + (w*7)%workers + 1)
				err := sqlfence.InTx(ctx, db, "race", tok, func(tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, "INSERT INTO writes (token) VALUES ($1)", int64(tok))
					return err
				})
				mu.Lock()
				switch {
				case err == nil:
					accepted[int64(tok)] = true
				case errors.Is(err, fence.ErrStaleToken):
					refused++
				default:
					t.Error(err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	rows, err := db.QueryContext(ctx, "SELECT token FROM writes ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var prev int64
	n := 0
	for rows.Next() {
		var tok int64
		if err := rows.Scan(&tok); err != nil {
			t.Fatal(err)
		}
		if tok < prev {
			t.Fatalf("write %d carries token %d after token %d was written: a stale write got in", n, tok, prev)
		}
		if !accepted[tok] {
			t.Fatalf("token %d was written but its transaction did not report success", tok)
		}
		prev, n = tok, n+1
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n+refused != workers*perWorker || refused == 0 {
		t.Fatalf("%d written + %d refused of %d; want every attempt accounted for and some refused", n, refused, workers*perWorker)
	}
	t.Logf("%d written, %d refused as stale", n, refused)
}

func TestInTx(t *testing.T) {
	_, db := testDB(t)
	ctx := testCtx(t)
	if _, err := db.ExecContext(ctx, "INSERT INTO orders (id) VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	setStatus := func(status string) func(tx *sql.Tx) error {
		return func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "UPDATE orders SET status = $1 WHERE id = 42", status)
			return err
		}
	}
	status := func() string {
		var s string
		if err := db.QueryRowContext(ctx, "SELECT status FROM orders WHERE id = 42").Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if err := sqlfence.InTx(ctx, db, "order:42", 10, setStatus("paid")); err != nil {
		t.Fatal(err)
	}
	called := false
	err := sqlfence.InTx(ctx, db, "order:42", 9, func(tx *sql.Tx) error { called = true; return nil })
	if !errors.Is(err, fence.ErrStaleToken) || called {
		t.Fatalf("stale token: err %v, fn called %v", err, called)
	}
	boom := errors.New("boom")
	err = sqlfence.InTx(ctx, db, "order:42", 11, func(tx *sql.Tx) error {
		if err := setStatus("shipped")(tx); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("fn's error: %v", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic did not reach the caller")
			}
		}()
		_ = sqlfence.InTx(ctx, db, "order:42", 12, func(tx *sql.Tx) error {
			_ = setStatus("lost")(tx)
			panic("in fn")
		})
	}()
	if got, mark := status(), highest(t, ctx, db, "order:42"); got != "paid" || mark != 10 {
		t.Fatalf("status %q, mark %d after a failed and a panicking fn: both must have rolled back", got, mark)
	}
	if db.Stats().InUse != 0 {
		t.Fatalf("%d connections still in use: a transaction was left open", db.Stats().InUse)
	}
	if err := sqlfence.InTx(ctx, db, "order:42", math.MaxUint64, setStatus("x")); !errors.Is(err, sqlfence.ErrTokenRange) {
		t.Fatalf("huge token: %v", err)
	}
}

// TestAdvanceRepeatableRead: under REPEATABLE READ a transaction that waited
// for another's mark fails with a serialization error (SQLSTATE 40001) when
// the other commits — an error to retry on, never a silent acceptance.
func TestAdvanceRepeatableRead(t *testing.T) {
	_, db := testDB(t)
	ctx := testCtx(t)
	if err := sqlfence.Advance(ctx, db, "rr", 1); err != nil {
		t.Fatal(err)
	}
	a, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Rollback()
	if err := sqlfence.Advance(ctx, a, "rr", 5); err != nil {
		t.Fatal(err)
	}
	b, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Rollback()
	pid := backendPID(t, ctx, b) // also takes b's snapshot, before a commits
	done := make(chan error, 1)
	go func() { done <- sqlfence.Advance(ctx, b, "rr", 7) }()
	waitBlocked(t, ctx, db, pid)
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	err = <-done
	if err == nil || errors.Is(err, fence.ErrStaleToken) || !strings.Contains(err.Error(), "40001") {
		t.Fatalf("token 7 under REPEATABLE READ after a concurrent commit: %v, want a serialization failure (40001)", err)
	}
}
