package demo

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dlockio/dlock/fence"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/redis/go-redis/v9"
)

// The duplicated-order incident, step by step. Both columns use dlock's
// lock, which is correct; what differs is the order store. Instance A
// locks order N, checks that it is not processed yet, checks its lease —
// still held — and freezes (a GC pause) right before recording the
// charge. Its lease runs out; instance B, handling the redelivered copy,
// takes the lock, finds the order unprocessed, charges it. A wakes up and
// charges again: with the lock alone the order is processed twice. With
// fencing, the order store has seen B's higher token and refuses A's.
//
// Each column is an incidentStrategy. The third adds exactly-once
// processing (package once): a record per order, claimed under the
// lease's token and completed with the charge, so a duplicate is answered
// from the record and a stale holder can record nothing.

// incidentOrders is how many orders the incident replays, all at once.
const incidentOrders = 5

// incidentStore is an order store as one instance reaches it.
type incidentStore interface {
	// processed reports whether order was already charged, as seen by the
	// holder of tok.
	processed(ctx context.Context, order string, tok fence.Token) (bool, error)
	// charge records the charge: the side effect that must happen once. A
	// store that refuses it returns an error matching fence.ErrStaleToken.
	charge(ctx context.Context, order string, tok fence.Token) error
}

// incidentStrategy is one column of the incident table.
type incidentStrategy struct {
	name     string
	newStore func(inst *incidentInstance) (incidentStore, error)
	records  bool // the store keeps exactly-once records (recordChecker)
}

// incidentStrategies are the columns, left to right.
var incidentStrategies = []incidentStrategy{
	{name: "lock only", newStore: newLockOnlyStore},
	{name: "lock + fencing", newStore: newFencedStore},
	{name: "lock + fencing + idempotency", newStore: newOnceStore, records: true},
}

// IncidentColumn is what one strategy measured.
type IncidentColumn struct {
	Strategy string `json:"strategy"`
	Orders   int    `json:"orders"`
	// Charged counts orders charged at least once; ChargedTwice those
	// charged more than once.
	Charged      int `json:"charged"`
	ChargedTwice int `json:"charged_more_than_once"`
	// StaleAccepted counts charges by a holder whose lease had ended and
	// whose order another holder had charged meanwhile.
	StaleAccepted int `json:"stale_charges_accepted"`
	// StaleRejected counts charges the store refused by fencing token.
	StaleRejected int `json:"stale_charges_rejected"`
	// Paused counts holders frozen past their TTL; LeasesLost those that
	// learned (too late to matter) that their lease had ended.
	// Records counts orders whose exactly-once record holds the stored
	// result; StaleRecordsRefused the stale holders' attempts to record an
	// outcome that the record's token check refused (once.ErrClaimLost).
	// Both are -1 for strategies without records.
	Records             int     `json:"orders_with_stored_result"`
	StaleRecordsRefused int     `json:"stale_records_refused"`
	Paused              int     `json:"holders_paused_past_ttl"`
	LeasesLost          int     `json:"leases_lost"`
	Seconds             float64 `json:"seconds"`
}

// Incident is the outcome of the incident replay.
type Incident struct {
	TTLMS   int64            `json:"ttl_ms"`
	Columns []IncidentColumn `json:"columns"`
}

// runIncident replays the incident once per strategy.
func runIncident(ctx context.Context, url, prefix string, ttl time.Duration, p *printer) (*Incident, error) {
	inc := &Incident{TTLMS: ttl.Milliseconds()}
	for i, s := range incidentStrategies {
		label := "incident, " + s.name
		p.printf("%s: running", label)
		r := &incidentRun{url: url, prefix: fmt.Sprintf("%sincident%d:", prefix, i), ttl: ttl, strategy: s, p: p, label: label}
		col, err := r.run(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", label, err)
		}
		inc.Columns = append(inc.Columns, col)
	}
	return inc, nil
}

// Violations counts orders charged twice and stale charges accepted in the
// columns after the first (which shows the incident on purpose).
func (inc *Incident) Violations() int {
	v := 0
	for _, c := range inc.Columns[1:] {
		v += c.ChargedTwice + c.StaleAccepted
	}
	return v
}

type incidentRun struct {
	url, prefix string
	ttl         time.Duration
	strategy    incidentStrategy
	p           *printer
	label       string

	mu  sync.Mutex
	col IncidentColumn
}

// incidentInstance is one service instance: its own Redis connection,
// gated so it can freeze, its own dlock Client, and its store.
type incidentInstance struct {
	name   string
	gate   *gate
	rdb    redis.UniversalClient
	prefix string // of every key of this run
	lock   *dlockLocker
	store  incidentStore
}

func (r *incidentRun) newInstance(name string) (*incidentInstance, error) {
	rdb, err := redisdriver.ParseURL(r.url)
	if err != nil {
		return nil, err
	}
	g := &gate{}
	g.attach(rdb)
	l, err := newDlockLocker(rdb, r.prefix, name, r.ttl)
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	in := &incidentInstance{name: name, gate: g, rdb: rdb, prefix: r.prefix, lock: l}
	if in.store, err = r.strategy.newStore(in); err != nil {
		l.close()
		return nil, err
	}
	return in, nil
}

func (r *incidentRun) run(ctx context.Context) (IncidentColumn, error) {
	start := time.Now()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for n := range incidentOrders {
		wg.Go(func() {
			if err := r.replay(ctx, fmt.Sprintf("order:%d", n)); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return IncidentColumn{}, err
	}
	r.col.Strategy, r.col.Orders = r.strategy.name, incidentOrders
	if !r.strategy.records {
		r.col.Records, r.col.StaleRecordsRefused = -1, -1
	}
	r.col.Seconds = time.Since(start).Seconds()
	return r.col, nil
}
