package main

import (
	"context"

	"github.com/dlockio/dlock"
)

// dlockFIFOWorker is a worker of the dlock-fifo peer: dlock's Lock with
// WithFIFO, one Client per worker like the dlock peer. Waiters queue in
// the store; a release grants the lock to the head in the same script and
// wakes only that waiter.
type dlockFIFOWorker struct{ dlockWorker }

func newDlockFIFOWorker(e env) (worker, error) {
	w, err := newDlockWorker(e)
	if err != nil {
		return nil, err
	}
	return &dlockFIFOWorker{*w.(*dlockWorker)}, nil
}

func (w *dlockFIFOWorker) lock(ctx context.Context, key string) (unlockFunc, error) {
	l, err := w.c.Lock(ctx, key, dlock.WithTTL(w.ttl), dlock.WithFIFO())
	if err != nil {
		return nil, err
	}
	return l.Unlock, nil
}
