package dlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/memdriver"
)

// noInspector hides the in-memory driver's operator functions.
type noInspector struct{ driver.Driver }

func TestOperatorFunctions(t *testing.T) {
	c, err := dlock.New(memdriver.New(), dlock.WithLogger(leasecheck.QuietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := leasecheck.Context(t, 5*time.Second)
	l, err := c.TryLock(ctx, "op:1", dlock.WithMeta("m"))
	if err != nil {
		t.Fatal(err)
	}
	info, ok, err := c.Inspect(ctx, "op:1")
	if err != nil || !ok || info.Token != l.Token() || info.Owner.Meta != "m" {
		t.Fatalf("Inspect = %+v, %v, %v; want the holder with token %d", info, ok, err, l.Token())
	}
	if infos, err := c.List(ctx, "op:"); err != nil || len(infos) != 1 || infos[0].Key != "op:1" {
		t.Fatalf("List = %+v, %v", infos, err)
	}
	token, ok, err := c.ForceRelease(ctx, "op:1")
	if err != nil || !ok || token != l.Token() {
		t.Fatalf("ForceRelease = %d, %v, %v; want %d, true", token, ok, err, l.Token())
	}
	if _, ok, err := c.Inspect(ctx, "op:1"); err != nil || ok {
		t.Fatalf("Inspect after ForceRelease = %v, %v; want free", ok, err)
	}

	//lint:ignore SA1012 a nil context is the bad input under test
	if _, _, err := c.Inspect(nil, "op:1"); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("Inspect(nil ctx) = %v, want ErrInvalidArgument", err)
	}
	if _, _, err := c.ForceRelease(ctx, ""); !errors.Is(err, dlock.ErrInvalidKey) {
		t.Errorf("ForceRelease of an empty key = %v, want ErrInvalidKey", err)
	}
	bare, err := dlock.New(noInspector{memdriver.New()}, dlock.WithLogger(leasecheck.QuietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	if _, err := bare.List(ctx, ""); !errors.Is(err, dlock.ErrUnsupported) {
		t.Errorf("List on a driver without operator functions = %v, want ErrUnsupported", err)
	}
	_ = c.Close()
	if _, _, err := c.Inspect(context.Background(), "op:1"); !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("Inspect after Close = %v, want ErrClosed", err)
	}
}
