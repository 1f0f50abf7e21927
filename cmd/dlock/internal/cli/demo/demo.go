// Package demo reproduces the incident behind dlock — an order service
// whose instances shared a hand-rolled Redis lock and processed orders
// twice — and then runs the same workload on dlock, measuring both.
//
// The service has several instances, each with its own Redis connection,
// draining a queue that delivers every order twice (at-least-once
// delivery). An instance locks the order, asks the order database whether
// it was already processed, processes it and writes the result. Some
// orders take longer than the lock's TTL, and some instances freeze, like
// a long GC pause, between their last lock check and their write.
package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/redis/go-redis/v9"
)

// Defaults sized to show every effect in about ten seconds.
const (
	DefaultWorkers = 6
	DefaultOrders  = 60
	DefaultTTL     = 400 * time.Millisecond
)

// runTimeout stops a demo that hangs (a store that stopped answering).
const runTimeout = 2 * time.Minute

// Config describes one demo.
type Config struct {
	Workers int
	Orders  int
	TTL     time.Duration
	// URL is the Redis to use, in any form redisdriver.ParseURL takes;
	// empty starts an embedded in-process one.
	URL string
	// Progress receives progress lines; nil discards them.
	Progress io.Writer
}

// ErrConfig is matched by Validate's errors.
var ErrConfig = errors.New("invalid demo configuration")

// Validate checks the numbers a user can set.
func (c Config) Validate() error {
	switch {
	case c.Workers < 2 || c.Workers > 64:
		return fmt.Errorf("%w: workers must be between 2 and 64, got %d", ErrConfig, c.Workers)
	case c.Orders < 1 || c.Orders > 10000:
		return fmt.Errorf("%w: orders must be between 1 and 10000, got %d", ErrConfig, c.Orders)
	case c.TTL < 50*time.Millisecond || c.TTL > 10*time.Second:
		return fmt.Errorf("%w: ttl must be between 50ms and 10s, got %v", ErrConfig, c.TTL)
	}
	if c.URL != "" {
		rdb, err := redisdriver.ParseURL(c.URL) // no round trip
		if err != nil {
			return fmt.Errorf("%w: %w", ErrConfig, err)
		}
		_ = rdb.Close()
	}
	return nil
}

// Metrics is what one run measured.
type Metrics struct {
	OrdersCompleted int `json:"orders_completed"`
	// DoubleProcessed counts orders the database accepted more than one write for.
	DoubleProcessed int `json:"double_processed"`
	// Overlaps counts entries into an order's critical section while
	// another instance was still inside it.
	Overlaps int `json:"overlaps"`
	// OverlapsBesideLostLease is the part of Overlaps where every instance
	// already inside had been told its lease was lost.
	OverlapsBesideLostLease int `json:"overlaps_beside_lost_lease"`
	// ForeignDeletes counts releases that deleted another instance's lock.
	ForeignDeletes int `json:"foreign_locks_deleted"`
	// StaleAccepted counts writes accepted after another instance had
	// begun work on the same order.
	StaleAccepted int `json:"stale_writes_accepted"`
	// StaleRejected counts accesses the database refused by fencing token.
	StaleRejected int `json:"stale_writes_rejected"`
	// LeasesLost counts acquisitions whose holder learned the lock was lost.
	LeasesLost int `json:"leases_lost"`
	// ReleasesRefused counts releases that found the lock no longer theirs
	// and left it alone.
	ReleasesRefused int `json:"releases_refused"`
	Acquisitions    int `json:"acquisitions"`
	// TokenRegressions counts acquisitions whose fencing token was not
	// above the previous one for the same order (must be 0 for dlock).
	TokenRegressions int     `json:"token_regressions"`
	Seconds          float64 `json:"seconds"`
}

// Report is the outcome of both runs.
type Report struct {
	Workers      int     `json:"workers"`
	Orders       int     `json:"orders"`
	TTLMS        int64   `json:"ttl_ms"`
	SlowOrders   int     `json:"slow_orders"`
	SlowWorkMS   int64   `json:"slow_work_ms"`
	Freezes      int     `json:"freezes"`
	FreezeMS     int64   `json:"freeze_ms"`
	Redis        string  `json:"redis"`
	Naive        Metrics `json:"naive"`
	Dlock        Metrics `json:"dlock"`
	TotalSeconds float64 `json:"total_seconds"`

	// Incident is the duplicated-order incident: lock only vs lock + fencing.
	Incident *Incident `json:"incident"`
}

// order is one order and what handling it involves.
type order struct {
	id     int
	work   time.Duration
	slow   bool
	freeze bool // the first instance to handle it freezes before writing
}

// plan spreads slow orders and freezes evenly, deterministically, so two
// runs (and two demos) face the same workload.
func plan(n int, ttl time.Duration) []order {
	orders := make([]order, n)
	for i := range orders {
		o := order{id: i, work: ttl/8 + time.Duration(i*7%5)*ttl/32}
		switch i % 10 {
		case 1:
			o.slow, o.work = true, 2*ttl
		case 6:
			o.freeze = true
		}
		orders[i] = o
	}
	return orders
}

// freezeFor is a pause long enough for the lock to expire and another
// instance to take the order over.
func freezeFor(ttl time.Duration) time.Duration { return 3 * ttl }

// Run runs the workload on the naive lock, then on dlock.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	start := time.Now()
	url, redisName := cfg.URL, redisdriver.RedactURL(cfg.URL)
	if url == "" {
		srv := miniredis.NewMiniRedis()
		// dlock reads expiry from the store: TTLs must run on the real
		// clock, not only when a test calls FastForward.
		srv.ClockTTL(true)
		if err := srv.Start(); err != nil {
			return nil, fmt.Errorf("starting embedded redis: %w", err)
		}
		defer srv.Close()
		url, redisName = "redis://"+srv.Addr()+"/0", "embedded (miniredis)"
	}

	orders := plan(cfg.Orders, cfg.TTL)
	rep := &Report{
		Workers: cfg.Workers, Orders: cfg.Orders, TTLMS: cfg.TTL.Milliseconds(),
		SlowWorkMS: (2 * cfg.TTL).Milliseconds(), FreezeMS: freezeFor(cfg.TTL).Milliseconds(),
		Redis: redisName,
	}
	for _, o := range orders {
		if o.slow {
			rep.SlowOrders++
		}
		if o.freeze {
			rep.Freezes++
		}
	}
	prefix := "dlock-demo:" + randomHex(4) + ":"
	p := newPrinter(cfg.Progress)
	p.printf("dlock demo: %d instances, %d orders delivered twice each, lock TTL %v, Redis: %s",
		cfg.Workers, cfg.Orders, cfg.TTL, redisName)

	var err error
	r := &runner{cfg: cfg, url: url, prefix: prefix, orders: orders, p: p}
	if rep.Naive, err = r.run(ctx, "naive lock", r.newNaive); err != nil {
		return nil, err
	}
	if rep.Dlock, err = r.run(ctx, "dlock", r.newDlock); err != nil {
		return nil, err
	}
	if rep.Incident, err = runIncident(ctx, url, prefix, cfg.TTL, p); err != nil {
		return nil, err
	}
	if err := cleanup(ctx, url, prefix); err != nil {
		p.printf("warning: removing the demo's keys (%s*): %v", prefix, err)
	}
	rep.TotalSeconds = time.Since(start).Seconds()
	return rep, nil
}

func (r *runner) newNaive(rdb redis.UniversalClient, name string) (locker, error) {
	return &naiveLocker{rdb: rdb, prefix: r.prefix, ttl: r.cfg.TTL, name: name}, nil
}

func (r *runner) newDlock(rdb redis.UniversalClient, name string) (locker, error) {
	return newDlockLocker(rdb, r.prefix, name, r.cfg.TTL)
}

// cleanup deletes whatever the demo left under its prefix. dlock's keys
// expire within a TTL on their own, but a naive lock whose EXPIRE never
// ran (the run was interrupted between SETNX and EXPIRE) would stay.
func cleanup(ctx context.Context, url, prefix string) error {
	rdb, err := redisdriver.ParseURL(url)
	if err != nil {
		return err
	}
	defer func() { _ = rdb.Close() }()
	del := func(ctx context.Context, c redis.Cmdable) error {
		it := c.Scan(ctx, 0, prefix+"*", 500).Iterator()
		for it.Next(ctx) {
			if err := c.Del(ctx, it.Val()).Err(); err != nil {
				return err
			}
		}
		return it.Err()
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return del(ctx, c) })
	}
	return del(ctx, rdb)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
