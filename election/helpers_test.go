package election_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/election"
	"github.com/dlockio/dlock/memdriver"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if cfg := os.Getenv(workerEnv); cfg != "" {
		os.Exit(runWorker(cfg))
	}
	goleak.VerifyTestMain(m)
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// client returns a Client on drv, closed at the end of the test.
func client(t *testing.T, drv driver.Driver) *dlock.Client {
	t.Helper()
	c, err := dlock.New(drv, dlock.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// memClients returns n Clients on one in-memory store, as n processes
// would have, and the drivers under them (for faults).
func memClients(t *testing.T, n int) ([]*dlock.Client, []*memdriver.Driver) {
	t.Helper()
	first := memdriver.New()
	drvs := []*memdriver.Driver{first}
	for len(drvs) < n {
		drvs = append(drvs, first.Connect())
	}
	cs := make([]*dlock.Client, n)
	for i, d := range drvs {
		cs[i] = client(t, d)
	}
	return cs, drvs
}

func newElection(t *testing.T, c *dlock.Client, id string, opts ...election.Option) *election.Election {
	t.Helper()
	e, err := election.New(c, "leader", append([]election.Option{election.WithIdentity(id)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// recv waits for a value on ch for at most d.
func recv[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("timed out after %v waiting for %s", d, what)
		panic("unreachable")
	}
}
