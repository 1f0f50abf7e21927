package memdriver

import (
	"context"
	"fmt"
	"time"

	"github.com/dlockio/dlock/driver"
)

// OpAcquireAll is the operation name of AcquireAll passed to a Fault.
const OpAcquireAll = "acquire-all"

var _ driver.MultiAcquirer = (*Driver)(nil)

// Atomic implements driver.MultiAcquirer: one store takes any set of keys
// atomically.
func (d *Driver) Atomic(keys []string) bool { return true }

// AcquireAll implements driver.MultiAcquirer with the store locked once:
// every lock is taken, each with the next token of the store's counter in
// the order of reqs, or nothing changes. A lock already held by its
// request's ID (a retry) keeps its token; if another lock is busy, such
// leftovers of a lost reply are released (with notification), so no
// partial grant stays behind.
func (d *Driver) AcquireAll(ctx context.Context, reqs []driver.AcquireRequest) (driver.AcquireAllResult, error) {
	if err := d.s.checkAll(reqs); err != nil {
		return driver.AcquireAllResult{}, err
	}
	return run(ctx, d, OpAcquireAll, func(s *store, now time.Time) (driver.AcquireAllResult, error) {
		s.tick(now)
		for i, r := range reqs {
			s.settle(r.Key, now) // an expiry may have granted a queued waiter
			l, held := s.live(r.Key, now)
			busy := held && l.id != r.ID
			retry := max(l.expires.Sub(now), 0)
			if !held {
				// Queued leases of the name: taking it would jump the queue.
				retry, busy = s.busy(r.Key, now)
			}
			if busy {
				for _, own := range reqs {
					if o, ok := s.live(own.Key, now); ok && o.id == own.ID {
						s.release(driver.ReleaseRequest{Key: own.Key, ID: own.ID}, now)
					}
				}
				return driver.AcquireAllResult{Busy: i, RetryAfter: retry}, nil
			}
		}
		tokens := make([]uint64, len(reqs))
		for i, r := range reqs {
			if l, ok := s.live(r.Key, now); ok {
				tokens[i] = l.token // ours: an earlier try took it
				continue
			}
			s.last++
			s.locks[r.Key] = lockState{id: r.ID, token: s.last, owner: r.Owner, since: now, expires: s.expiresAt(now, r.TTL)}
			tokens[i] = s.last
		}
		return driver.AcquireAllResult{Acquired: true, Tokens: tokens}, nil
	})
}

// checkAll rejects what AcquireAll cannot take: no requests, more than
// MaxBatch, a bad lease, or a key named twice.
func (s *store) checkAll(reqs []driver.AcquireRequest) error {
	if len(reqs) == 0 {
		return fmt.Errorf("%w: acquire all: no locks", driver.ErrInvalid)
	}
	if err := s.checkBatch(len(reqs)); err != nil {
		return err
	}
	seen := make(map[string]bool, len(reqs))
	for _, r := range reqs {
		if err := s.checkLease(r.Key, r.ID, r.TTL); err != nil {
			return err
		}
		if seen[r.Key] {
			return fmt.Errorf("%w: acquire all: key %q named twice", driver.ErrInvalid, r.Key)
		}
		seen[r.Key] = true
	}
	return nil
}
