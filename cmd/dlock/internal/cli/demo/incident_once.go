package demo

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/dlockio/dlock/fence"
	"github.com/dlockio/dlock/once"
	"github.com/dlockio/dlock/once/redisonce"
)

// onceStore adds exactly-once processing (package once, on Redis) to the
// fenced store: the check claims the order's record under the lease's
// token, a charge completes it, and a holder whose claim was taken over
// can record nothing — its charge is refused by the fence, and its
// attempt to record the failure by the record's token check.
type onceStore struct {
	fencedStore
	records *redisonce.Store
}

func newOnceStore(in *incidentInstance) (incidentStore, error) {
	fs, err := newFencedStore(in)
	if err != nil {
		return nil, err
	}
	records, err := redisonce.New(in.rdb, redisonce.WithPrefix(in.prefix+"once:"))
	if err != nil {
		return nil, err
	}
	return &onceStore{fencedStore: *fs.(*fencedStore), records: records}, nil
}

// recordTTL is how long the demo keeps its records: long enough for every
// redelivery of the run, short enough to leave nothing behind for long.
const recordTTL = time.Minute

func (s *onceStore) processed(ctx context.Context, order string, tok fence.Token) (bool, error) {
	sum := sha256.Sum256([]byte("charge " + order))
	rec, claimed, err := s.records.Claim(ctx, order, tok, sum[:], recordTTL)
	if err != nil {
		return false, err
	}
	switch {
	case claimed:
		return false, nil
	case rec.State == once.Completed:
		return true, nil // a duplicate, answered from the record
	}
	// Claimed under a newer token: this holder is stale.
	return false, fence.Stale(order, tok, rec.Token)
}

func (s *onceStore) charge(ctx context.Context, order string, tok fence.Token) error {
	if err := s.fencedStore.charge(ctx, order, tok); err != nil {
		if errors.Is(err, fence.ErrStaleToken) {
			// As once.Processor would: the work failed, record it. The
			// newer holder completed the record, so this is refused too.
			return errors.Join(err, s.records.Fail(ctx, order, tok, recordTTL))
		}
		return err
	}
	if err := s.records.Complete(ctx, order, tok, []byte(fmt.Sprint("charged under ", tok)), recordTTL); err != nil {
		return fmt.Errorf("completing the record: %w", err)
	}
	return nil
}

// completed reports whether order's record holds a stored result.
func (s *onceStore) completed(ctx context.Context, order string) (bool, error) {
	rec, ok, err := s.records.Get(ctx, order)
	return ok && rec.State == once.Completed, err
}

// recordChecker is a store that keeps exactly-once records.
type recordChecker interface {
	completed(ctx context.Context, order string) (bool, error)
}
