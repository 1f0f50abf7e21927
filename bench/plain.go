package main

// newDlockPlainWorker is a worker of the dlock-plain peer: dlock's Lock
// with WithoutFIFO, one Client per worker like the dlock peer. A waiter is
// woken by the holder's release notification (or its TTL) and races the
// other waiters; this was Lock's only behaviour before FIFO became its
// default on Redis.
func newDlockPlainWorker(e env) (worker, error) {
	w, err := newDlockWorker(e)
	if err != nil {
		return nil, err
	}
	w.(*dlockWorker).plain = true
	return w, nil
}
