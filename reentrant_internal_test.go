package dlock

import (
	"context"
	"testing"

	"github.com/dlockio/dlock/memdriver"
)

type ctxKey struct{}

// The re-entry lookup on the path that does not nest allocates nothing:
// one ctx.Value and a walk of the leases the ctx descends from.
func TestReentryLookupDoesNotAllocate(t *testing.T) {
	c, err := New(memdriver.New())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	other, err := c.Lock(context.Background(), "other")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Unlock(context.Background())
	for name, ctx := range map[string]context.Context{
		"plain":             context.WithValue(context.Background(), ctxKey{}, 1),
		"under another key": context.WithValue(other.Context(), ctxKey{}, 1),
	} {
		allocs := testing.AllocsPerRun(1000, func() {
			if m, _ := c.enclosing(marks(ctx), "k"); m != nil {
				t.Fatal("found an enclosing lease of k")
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per lookup, want 0", name, allocs)
		}
	}
}
