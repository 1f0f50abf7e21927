package once

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/options"
)

// completeTimeout bounds the completion of work that finished after its
// caller's ctx ended: the work is done, so recording it is worth a few
// seconds more than the caller allowed — a completion dropped here would
// make the next delivery run the work again.
const completeTimeout = 5 * time.Second

// Processor runs functions at most once per idempotency key and stores
// their results. It is safe for concurrent use.
type Processor struct {
	locks *dlock.Client
	store Store
	cfg   config
}

// Result is the outcome of a delivery.
type Result struct {
	// Value is the function's result, or the stored one.
	Value []byte
	// Token is the fencing token under which Value was produced.
	Token uint64
	// Replayed reports that Value comes from an earlier delivery.
	Replayed bool
}

// Func is the work done once per key. ctx ends when the worker's lease
// ends (and with the caller's ctx); token is the lease's fencing token, to
// pass to every write the work makes on a guarded resource.
type Func func(ctx context.Context, token uint64) ([]byte, error)

// New returns a Processor that claims keys under locks from locks and
// keeps records in store.
func New(locks *dlock.Client, store Store, opts ...Option) (*Processor, error) {
	if locks == nil || store == nil {
		return nil, fmt.Errorf("%w: nil lock client or store", ErrInvalidArgument)
	}
	// A key's lock never nests (dlock's reentrancy through the context):
	// a Do of a key under its own claim's context is a duplicate of a
	// running delivery, which would otherwise run the work a second time
	// under the same token. It gets dlock.ErrReentry at once instead.
	cfg := config{retention: DefaultRetention, duplicates: DuplicatesWait, prefix: DefaultLockPrefix,
		lockOpts: []dlock.LockOption{dlock.WithoutReentry()}}
	if err := options.Apply(&cfg, opts); err != nil {
		return nil, err
	}
	return &Processor{locks: locks, store: store, cfg: cfg}, nil
}

// Do runs fn once for key: the first delivery runs it and stores its
// result; duplicates get that result (or wait, or an error: see
// WithDuplicates); a delivery whose key is known with another payload gets
// ErrPayloadMismatch. When fn returns an error, the record is marked
// Failed, Do returns fn's error, and the next delivery runs fn again.
//
// A worker whose lease is lost while fn runs sees fn's ctx end; if a newer
// worker has claimed the key by the time fn returns, Do returns
// ErrClaimLost and the newer worker's outcome stands.
func (p *Processor) Do(ctx context.Context, key string, payload []byte, fn Func) (Result, error) {
	if fn == nil {
		return Result{}, fmt.Errorf("%w: nil function", ErrInvalidArgument)
	}
	c, res, err := p.Begin(ctx, key, payload)
	if err != nil || c == nil {
		return res, err
	}
	// A panic in fn leaves the record in progress; releasing the lock
	// lets the next delivery take it over at once instead of after a TTL.
	defer c.Release(context.WithoutCancel(ctx))
	v, ferr := fn(c.Context(), c.Token())
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), completeTimeout)
	defer cancel()
	if ferr != nil {
		if err := c.Fail(cctx); err != nil {
			return Result{}, errors.Join(ferr, err)
		}
		return Result{}, ferr
	}
	if err := c.Complete(cctx, v); err != nil {
		return Result{}, err
	}
	return Result{Value: v, Token: c.Token()}, nil
}

// Begin claims key for payload, for work that cannot be one function call
// (a transaction that must also complete the record, say). It returns
// either a Claim, which the caller must end with Complete, Fail or
// Release, or — for a key completed before — a nil Claim and the stored
// Result (Replayed). Errors are those of Do, plus the lock's and the
// store's. The key's lock is named prefix+key (WithLockPrefix), so that
// must be a valid lock name: at most dlock.MaxKeyLen bytes, or Begin
// returns an error matching dlock.ErrInvalidKey.
func (p *Processor) Begin(ctx context.Context, key string, payload []byte) (*Claim, Result, error) {
	if ctx == nil {
		return nil, Result{}, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if key == "" {
		return nil, Result{}, fmt.Errorf("%w: empty key", ErrInvalidArgument)
	}
	sum := sha256.Sum256(payload)
	hash := sum[:]
	lockKey := p.cfg.prefix + key
	var lease *dlock.Lease
	var err error
	if p.cfg.duplicates == DuplicatesWait {
		lease, err = p.locks.Lock(ctx, lockKey, p.cfg.lockOpts...)
	} else {
		lease, err = p.locks.TryLock(ctx, lockKey, p.cfg.lockOpts...)
		if errors.Is(err, dlock.ErrNotAcquired) {
			res, err := p.busy(ctx, key, hash)
			return nil, res, err
		}
	}
	if err != nil {
		return nil, Result{}, err
	}
	rec, claimed, err := p.store.Claim(ctx, key, lease.Token(), hash, p.cfg.retention)
	if err != nil || !claimed {
		_ = lease.Unlock(context.WithoutCancel(ctx))
	}
	switch {
	case err != nil:
		return nil, Result{}, fmt.Errorf("once: claim %q: %w", key, err)
	case claimed:
		return newClaim(ctx, p, key, lease), Result{}, nil
	case !bytes.Equal(rec.PayloadHash, hash):
		return nil, Result{}, fmt.Errorf("%w: key %q", ErrPayloadMismatch, key)
	case rec.State == Completed:
		return nil, p.replay(rec), p.duplicateErr()
	}
	// A newer token holds the record: our lease ended before the claim
	// reached the store, and another worker got the lock since.
	return nil, Result{}, fmt.Errorf("%w: key %q claimed under token %d, ours %d", ErrClaimLost, key, rec.Token, lease.Token())
}

// busy answers a non-waiting delivery whose key's lock is held: by a
// running worker, or by a duplicate reading a completed record.
func (p *Processor) busy(ctx context.Context, key string, hash []byte) (Result, error) {
	rec, ok, err := p.store.Get(ctx, key)
	switch {
	case err != nil:
		return Result{}, fmt.Errorf("once: get %q: %w", key, err)
	case ok && !bytes.Equal(rec.PayloadHash, hash):
		return Result{}, fmt.Errorf("%w: key %q", ErrPayloadMismatch, key)
	case ok && rec.State == Completed:
		return p.replay(rec), p.duplicateErr()
	}
	return Result{}, fmt.Errorf("%w: key %q", ErrInProgress, key)
}

func (p *Processor) replay(rec Record) Result {
	return Result{Value: rec.Result, Token: rec.Token, Replayed: true}
}

func (p *Processor) duplicateErr() error {
	if p.cfg.duplicates == DuplicatesReject {
		return ErrAlreadyCompleted
	}
	return nil
}

// Get returns key's record, for operators and tests.
func (p *Processor) Get(ctx context.Context, key string) (Record, bool, error) {
	if ctx == nil {
		return Record{}, false, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	return p.store.Get(ctx, key)
}
