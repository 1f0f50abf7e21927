package drivertest_test

import (
	"context"
	"sync"

	"github.com/dlockio/dlock/driver"
)

// Mutants of driver.MultiAcquirer: the Multi subtests must fail each.
func init() {
	mutants = append(mutants,
		mutant{name: "acquire all takes what is free", subtests: []string{"Multi/AllOrNone"}, make: func(m *mutated) {
			m.acquireAll = func(ctx context.Context, reqs []driver.AcquireRequest) (driver.AcquireAllResult, error) {
				res := driver.AcquireAllResult{Acquired: true}
				for i, r := range reqs {
					one, err := m.Driver.Acquire(ctx, r)
					if err != nil {
						return driver.AcquireAllResult{}, err
					}
					if !one.Acquired && res.Acquired {
						res = driver.AcquireAllResult{Busy: i, RetryAfter: one.RetryAfter}
					}
					res.Tokens = append(res.Tokens, one.Token)
				}
				if !res.Acquired {
					res.Tokens = nil
				}
				return res, nil
			}
		}},
		mutant{name: "acquire all ignores holders", subtests: []string{"Multi/AllOrNone", "Multi/Contended"}, make: func(m *mutated) {
			m.acquireAll = func(ctx context.Context, reqs []driver.AcquireRequest) (driver.AcquireAllResult, error) {
				res, err := m.Driver.AcquireAll(ctx, reqs)
				if err == nil && !res.Acquired {
					res = driver.AcquireAllResult{Acquired: true, Tokens: make([]uint64, len(reqs))}
					for i := range res.Tokens {
						res.Tokens[i] = uint64(1 << 40)
					}
				}
				return res, err
			}
		}},
		mutant{name: "acquire all retry refused", subtests: []string{"Multi/Retry"}, make: func(m *mutated) {
			var seen sync.Map
			m.acquireAll = func(ctx context.Context, reqs []driver.AcquireRequest) (driver.AcquireAllResult, error) {
				if _, again := seen.LoadOrStore(reqs[0].ID, true); again {
					return driver.AcquireAllResult{Busy: 0, RetryAfter: reqs[0].TTL}, nil
				}
				return m.Driver.AcquireAll(ctx, reqs)
			}
		}},
		mutant{name: "acquire all keeps leftovers", subtests: []string{"Multi/Retry"}, make: func(m *mutated) {
			m.acquireAll = func(ctx context.Context, reqs []driver.AcquireRequest) (driver.AcquireAllResult, error) {
				res, err := m.Driver.AcquireAll(ctx, reqs)
				if err == nil && !res.Acquired {
					// Puts back what the store released: a grant left
					// partly held after a refusal.
					for i, r := range reqs {
						if i != res.Busy {
							_, _ = m.Driver.Acquire(ctx, r)
						}
					}
				}
				return res, err
			}
		}},
		mutant{name: "acquire all accepts duplicates", subtests: []string{"Multi/Invalid"}, make: func(m *mutated) {
			m.acquireAll = func(ctx context.Context, reqs []driver.AcquireRequest) (driver.AcquireAllResult, error) {
				seen := map[string]bool{}
				var uniq []driver.AcquireRequest
				for _, r := range reqs {
					if !seen[r.Key] {
						seen[r.Key] = true
						uniq = append(uniq, r)
					}
				}
				if len(uniq) == 0 {
					return driver.AcquireAllResult{Acquired: true}, nil
				}
				return m.Driver.AcquireAll(ctx, uniq)
			}
		}},
	)
}
