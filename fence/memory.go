package fence

import (
	"context"
	"fmt"
	"sync"

	"github.com/dlockio/dlock"
)

// Memory is a Guard that keeps its high-water marks in memory: for tests, and
// for resources that live in one process. It is safe for concurrent use; the
// zero value is ready. Writes to one resource run one at a time, writes to
// different resources concurrently. It keeps one small entry per resource
// name it has seen, for its lifetime.
type Memory struct {
	mu        sync.Mutex
	resources map[string]*memResource
}

type memResource struct {
	turn    chan struct{} // holds one value while a write runs: a mutex that ctx can interrupt
	highest Token         // read and written only while holding turn
}

// NewMemory returns an empty in-memory guard.
func NewMemory() *Memory { return &Memory{} }

// Apply implements Guard. While another write to the same resource runs,
// Apply waits for it or for ctx, whichever comes first.
func (m *Memory) Apply(ctx context.Context, resource string, tok Token, write func(ctx context.Context) error) error {
	if err := checkArgs(ctx, resource); err != nil {
		return err
	}
	if write == nil {
		return fmt.Errorf("%w: nil write function", dlock.ErrInvalidArgument)
	}
	if ctx.Err() != nil {
		return ctxError(ctx)
	}
	r := m.resource(resource)
	select {
	case r.turn <- struct{}{}:
	case <-ctx.Done():
		return ctxError(ctx)
	}
	defer func() { <-r.turn }()
	if tok < r.highest {
		return Stale(resource, tok, r.highest)
	}
	if err := write(ctx); err != nil {
		return err
	}
	r.highest = tok
	return nil
}

// Advance registers tok for resource without writing anything: Apply with a
// write that does nothing. It returns an error matching ErrStaleToken when a
// higher token was seen.
func (m *Memory) Advance(ctx context.Context, resource string, tok Token) error {
	return m.Apply(ctx, resource, tok, func(context.Context) error { return nil })
}

// Highest returns the highest token accepted for resource, 0 if none. It
// waits for a write in progress on resource, or for ctx.
func (m *Memory) Highest(ctx context.Context, resource string) (Token, error) {
	if err := checkArgs(ctx, resource); err != nil {
		return 0, err
	}
	r := m.resource(resource)
	select {
	case r.turn <- struct{}{}:
	case <-ctx.Done():
		return 0, ctxError(ctx)
	}
	defer func() { <-r.turn }()
	return r.highest, nil
}

func (m *Memory) resource(name string) *memResource {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.resources[name]
	if r == nil {
		if m.resources == nil {
			m.resources = make(map[string]*memResource)
		}
		r = &memResource{turn: make(chan struct{}, 1)}
		m.resources[name] = r
	}
	return r
}

// ctxError is the error of an ended ctx: ctx.Err(), joined with the cause
// when it has one of its own (fence.Do's fn context ends with
// dlock.ErrLockLost when the lease is lost), so that both match.
func ctxError(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != err {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}

func checkArgs(ctx context.Context, resource string) error {
	switch {
	case ctx == nil:
		return fmt.Errorf("%w: nil context", dlock.ErrInvalidArgument)
	case resource == "":
		return fmt.Errorf("%w: empty resource name", dlock.ErrInvalidArgument)
	}
	return nil
}
