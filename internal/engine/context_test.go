package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/memdriver"
)

// A lease's Context is asked for on every piece of work done under it: it
// must cost no allocation, for a Hold as for a Group.
func TestLeaseContextAllocatesNothing(t *testing.T) {
	e := newTestEngine(t, memdriver.New())
	h, err := e.Acquire(context.Background(), lockReq("k", time.Minute, false, true))
	if err != nil {
		t.Fatal(err)
	}
	g, err := e.AcquireAll(context.Background(), []driver.AcquireRequest{req("a", time.Minute), req("b", time.Minute)}, false, true)
	if err != nil {
		t.Fatal(err)
	}
	var sink context.Context
	if n := testing.AllocsPerRun(100, func() { sink = h.Context() }); n != 0 {
		t.Errorf("Hold.Context: %v allocations, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { sink = g.Context() }); n != 0 {
		t.Errorf("Group.Context: %v allocations, want 0", n)
	}
	if sink.Err() != nil || h.Context().Err() != nil {
		t.Fatal("a held lease's context reports an error")
	}
	if err := e.Release(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(h.Context().Err(), context.Canceled) {
		t.Errorf("released hold's Context().Err() = %v, want context.Canceled", h.Context().Err())
	}
}
