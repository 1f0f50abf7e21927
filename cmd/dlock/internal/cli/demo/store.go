package demo

import (
	"errors"
	"sync"
)

// errFenced: the order database refused a token lower than one it has
// already seen for the order.
var errFenced = errors.New("stale fencing token")

// orderDB is the demo's order database. Every access carries the caller's
// fencing token and the database refuses tokens lower than the highest it
// has seen for that order — fencing done where it counts, in the resource.
// The naive lock has no tokens (it passes 0), so it can never be refused.
//
// It also keeps the ground truth the report needs, independent of tokens:
// the order in which instances began work on each order, and how many
// writes each order received.
type orderDB struct {
	mu            sync.Mutex
	rows          []orderRow
	staleAccepted int
	rejected      int
}

type orderRow struct {
	maxToken uint64
	begins   int // how many times an instance began work on the order
	applied  int // accepted writes: more than one means processed twice
}

func newOrderDB(orders int) *orderDB { return &orderDB{rows: make([]orderRow, orders)} }

// begin registers token for order and reports whether the order was
// already processed. The returned epoch identifies this turn.
func (db *orderDB) begin(order int, token uint64) (epoch int, done bool, err error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	r := &db.rows[order]
	if token < r.maxToken {
		db.rejected++
		return 0, false, errFenced
	}
	r.maxToken = token
	r.begins++
	return r.begins, r.applied > 0, nil
}

// commit writes the processed order. A write is stale when another
// instance began work on the order after this turn began.
func (db *orderDB) commit(order, epoch int, token uint64) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	r := &db.rows[order]
	if token < r.maxToken {
		db.rejected++
		return errFenced
	}
	if epoch < r.begins {
		db.staleAccepted++
	}
	r.applied++
	return nil
}

// tally returns orders processed at least once and more than once.
func (db *orderDB) tally() (completed, twice int) {
	db.mu.Lock()
	defer db.mu.Unlock()
	for _, r := range db.rows {
		if r.applied > 0 {
			completed++
		}
		if r.applied > 1 {
			twice++
		}
	}
	return completed, twice
}

func (db *orderDB) fencing() (staleAccepted, rejected int) {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.staleAccepted, db.rejected
}
