package once

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"
)

// MemStore is a Store in memory, for tests and single-process use. Records
// expire by time.Now; an expired record is dropped when its key is next
// touched, so memory is bounded by the keys used within one retention.
type MemStore struct {
	mu   sync.Mutex
	recs map[string]Record
}

var _ Store = (*MemStore)(nil)

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{recs: make(map[string]Record)} }

// live returns key's record if it has not expired. Callers hold mu.
func (s *MemStore) live(key string, now time.Time) (Record, bool) {
	r, ok := s.recs[key]
	if ok && !now.Before(r.ExpiresAt) {
		delete(s.recs, key)
		return Record{}, false
	}
	return r, ok
}

func checkArgs(ctx context.Context, key string, ttl time.Duration) error {
	switch {
	case ctx == nil:
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	case key == "":
		return fmt.Errorf("%w: empty key", ErrInvalidArgument)
	case ttl <= 0:
		return fmt.Errorf("%w: ttl %v", ErrInvalidArgument, ttl)
	}
	return ctx.Err()
}

// Claim implements Store.
func (s *MemStore) Claim(ctx context.Context, key string, token uint64, hash []byte, ttl time.Duration) (Record, bool, error) {
	if err := checkArgs(ctx, key, ttl); err != nil {
		return Record{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	r, ok := s.live(key, now)
	if ok && (!bytes.Equal(r.PayloadHash, hash) || r.State == Completed || r.Token > token) {
		return clone(r), false, nil
	}
	r = Record{Key: key, State: InProgress, Token: token, PayloadHash: bytes.Clone(hash), ExpiresAt: now.Add(ttl)}
	s.recs[key] = r
	return clone(r), true, nil
}

// Complete implements Store.
func (s *MemStore) Complete(ctx context.Context, key string, token uint64, result []byte, ttl time.Duration) error {
	return s.finish(ctx, key, token, Completed, result, ttl)
}

// Fail implements Store.
func (s *MemStore) Fail(ctx context.Context, key string, token uint64, ttl time.Duration) error {
	return s.finish(ctx, key, token, Failed, nil, ttl)
}

func (s *MemStore) finish(ctx context.Context, key string, token uint64, to State, result []byte, ttl time.Duration) error {
	if err := checkArgs(ctx, key, ttl); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	r, ok := s.live(key, now)
	switch {
	case ok && r.Token == token && r.State == to:
		return nil // a retry of this very call
	case !ok || r.Token != token || r.State != InProgress:
		return fmt.Errorf("%w: key %q", ErrClaimLost, key)
	}
	r.State, r.Result, r.ExpiresAt = to, bytes.Clone(result), now.Add(ttl)
	s.recs[key] = r
	return nil
}

// Get implements Store.
func (s *MemStore) Get(ctx context.Context, key string) (Record, bool, error) {
	if err := checkArgs(ctx, key, time.Nanosecond); err != nil {
		return Record{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.live(key, time.Now())
	return clone(r), ok, nil
}

func clone(r Record) Record {
	r.PayloadHash = bytes.Clone(r.PayloadHash)
	r.Result = bytes.Clone(r.Result)
	return r
}
