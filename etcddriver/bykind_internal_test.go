package etcddriver

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
)

// byKind hands the exclusive locks to one batch call and the queued
// leases, in order, to one call each, and puts every answer in its
// request's place; a group without requests costs no call, and an error
// ends the batch.
func TestByKind(t *testing.T) {
	d := &Driver{timeout: time.Second}
	kind := func(r driver.RenewRequest) driver.Kind { return r.Kind }
	var batches [][]string
	var queued []string
	locks := func(_ context.Context, reqs []driver.RenewRequest) ([]string, error) {
		var keys []string
		for _, r := range reqs {
			keys = append(keys, r.Key)
		}
		batches = append(batches, keys)
		return keys, nil
	}
	one := func(ctx context.Context, r driver.RenewRequest) (string, error) {
		if _, ok := ctx.Deadline(); !ok {
			t.Errorf("queued %s: call context without a deadline", r.Key)
		}
		queued = append(queued, r.Key)
		if r.Key == "bad" {
			return "", errors.New("refused")
		}
		return r.Key, nil
	}
	reqs := []driver.RenewRequest{
		{Kind: driver.KindRead, Key: "r"}, {Key: "a"}, {Kind: driver.KindWaiter, Key: "w"},
		{Key: "b"}, {Kind: driver.KindPermit, Key: "p"},
	}
	got, err := byKind(context.Background(), d, reqs, kind, locks, one)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"r", "a", "w", "b", "p"}; !slices.Equal(got, want) {
		t.Errorf("answers %q, want %q", got, want)
	}
	if len(batches) != 1 || !slices.Equal(batches[0], []string{"a", "b"}) {
		t.Errorf("lock batches %q, want one of a and b", batches)
	}
	if want := []string{"r", "w", "p"}; !slices.Equal(queued, want) {
		t.Errorf("queued calls %q, want %q", queued, want)
	}

	batches, queued = nil, nil
	got, err = byKind(context.Background(), d, reqs[1:2], kind, locks, one)
	if err != nil || !slices.Equal(got, []string{"a"}) || len(queued) != 0 {
		t.Errorf("locks only: %q, %v, queued calls %q", got, err, queued)
	}
	batches = nil
	got, err = byKind(context.Background(), d, reqs[:1], kind, locks, one)
	if err != nil || !slices.Equal(got, []string{"r"}) || len(batches) != 0 {
		t.Errorf("queued only: %q, %v, lock batches %q", got, err, batches)
	}
	got, err = byKind(context.Background(), d, nil, kind, locks, one)
	if err != nil || got == nil || len(got) != 0 {
		t.Errorf("no requests: %#v, %v; want an empty answer", got, err)
	}
	queued = nil
	bad := []driver.RenewRequest{{Kind: driver.KindRead, Key: "bad"}, {Kind: driver.KindRead, Key: "after"}}
	if got, err := byKind(context.Background(), d, bad, kind, locks, one); err == nil || got != nil {
		t.Errorf("a refused queued lease: %q, %v; want the error", got, err)
	}
	if !slices.Equal(queued, []string{"bad"}) {
		t.Errorf("queued calls %q after an error, want none after it", queued)
	}
}
