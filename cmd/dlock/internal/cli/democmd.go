package cli

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/dlockio/dlock/cmd/dlock/internal/cli/demo"
)

const demoUsage = `Usage: dlock demo [--redis URL] [--workers N] [--orders N] [--ttl D] [--json]

Reproduces the incident dlock was written for and its fix. An order service
with N instances (each with its own Redis connection) drains a queue that
delivers every order twice. Some orders take longer than the lock's TTL, and
some instances freeze like a long GC pause right before writing. The same
workload runs first on a naive lock (SETNX then EXPIRE, DEL without an
ownership check, no renewal), then on dlock, and a table compares what was
measured: orders processed more than once, overlaps inside the critical
section, foreign locks deleted, and stale writes accepted or rejected by the
fenced order database.

Without an explicit --redis it runs on an embedded in-process Redis and
needs nothing installed ($DLOCK_REDIS is not used). With --redis it uses
that server, under keys starting with "dlock-demo:", removed afterwards.
Progress goes to stderr, the table (or --json) to stdout.
`

// demoFlags are demo's flags; demo reads no environment variables.
type demoFlags struct {
	workers, orders *int
	ttl             *time.Duration
	json            *bool
}

func defineDemo(f *flagSet, _ Options) runFunc {
	o := demoFlags{
		workers: f.integer("workers", "", demo.DefaultWorkers, math.MinInt, math.MaxInt, "number of service instances"),
		orders:  f.integer("orders", "", demo.DefaultOrders, math.MinInt, math.MaxInt, "number of orders in the queue"),
		ttl:     f.duration("ttl", "", demo.DefaultTTL, true, "lock TTL; slow orders take 2×TTL, freezes last 3×TTL"),
		json:    f.boolean("json", "", "print the measurements as JSON instead of a table"),
	}
	return func(ctx context.Context, s *invocation, args []string) error { return demoCommand(ctx, s, o, args) }
}

func demoCommand(ctx context.Context, s *invocation, o demoFlags, args []string) error {
	workers, orders, ttl, asJSON := o.workers, o.orders, o.ttl, o.json
	if err := s.parse(args); err != nil {
		return err
	}
	fs := s.flags.fs
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q (see dlock demo --help)", fs.Arg(0))
	}
	cfg := demo.Config{Workers: *workers, Orders: *orders, TTL: *ttl, Progress: s.env.Stderr}
	if r := s.redis(); r.set {
		if len(specList(r.value)) > 1 {
			return usageErrorf("--redis given %d URLs: the demo runs on one Redis (see dlock demo --help)", len(specList(r.value)))
		}
		cfg.URL = r.value
	}
	for _, st := range s.stores[1:] {
		if st.set {
			return usageErrorf("--%s: the demo runs on Redis only (see dlock demo --help)", st.backend.Flag)
		}
	}
	if err := cfg.Validate(); err != nil {
		return &exitError{code: ExitUsage, err: err}
	}
	rep, err := demo.Run(ctx, cfg)
	if err != nil {
		return &exitError{code: ExitUnavailable, err: fmt.Errorf("demo failed: %w", err)}
	}
	if *asJSON {
		err = writeJSON(s.env.Stdout, rep)
	} else {
		err = rep.WriteTable(s.env.Stdout)
	}
	if err != nil {
		return err
	}
	if v := rep.Dlock.Violations(); v > 0 {
		return &exitError{code: ExitSoftware, err: fmt.Errorf("dlock let %d violation(s) through; this is a bug", v)}
	}
	return nil
}
