package drivertest_test

import (
	"context"
	"errors"

	"github.com/dlockio/dlock/driver"
)

// queueMutants break promises of driver.Queuer; the Queue group must fail
// each in the subtests named.
var queueMutants = []mutant{
	{name: "granted waiter still renews", subtests: []string{"Queue/FIFO", "Queue/NoOvertake"}, make: func(m *mutated) {
		m.renew = func(ctx context.Context, reqs []driver.RenewRequest) ([]bool, error) {
			held, err := m.Driver.Renew(ctx, reqs)
			for i, r := range reqs {
				if err == nil && r.Kind == driver.KindWaiter {
					held[i] = true // the waiter never learns of its grant this way
				}
			}
			return held, err
		}
	}},
	{name: "cancelled grant kept", subtests: []string{"Queue/Cancel"}, make: func(m *mutated) {
		m.release = func(ctx context.Context, reqs []driver.ReleaseRequest) ([]driver.ReleaseResult, error) {
			res := make([]driver.ReleaseResult, len(reqs))
			for i, r := range reqs {
				if r.Kind == driver.KindWaiter {
					if info, ok, _ := m.Driver.InspectQueue(ctx, r.Key); ok && len(info.Holders) > 0 && info.Holders[0].ID == r.ID {
						res[i] = driver.NotHeld // the grant stays until its TTL runs out
						continue
					}
				}
				one, err := m.Driver.Release(ctx, reqs[i:i+1])
				if err != nil {
					return nil, err
				}
				res[i] = one[0]
			}
			return res, nil
		}
	}},
	{name: "limit per request", subtests: []string{"Queue/PermitLimit"}, make: func(m *mutated) {
		m.enqueue = func(ctx context.Context, req driver.QueueRequest) (driver.QueueResult, error) {
			res, err := m.Driver.Enqueue(ctx, req)
			if errors.Is(err, driver.ErrLimitMismatch) {
				return driver.QueueResult{RetryAfter: -1}, nil // refused, as if only the count were checked
			}
			return res, err
		}
	}},
	{name: "no queue cap", subtests: []string{"Queue/MaxWaiters"}, make: func(m *mutated) {
		m.enqueue = func(ctx context.Context, req driver.QueueRequest) (driver.QueueResult, error) {
			req.MaxWaiters = 0
			return m.Driver.Enqueue(ctx, req)
		}
	}},
}
