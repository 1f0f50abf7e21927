package memdriver

import (
	"maps"
	"slices"
	"time"
)

// Snapshot is a copy of a store's data, taken by Driver.Snapshot, for
// Driver.Restart to restore.
type Snapshot struct {
	locks     map[string]lockState
	released  map[releasedKey]time.Time
	queues    map[string]*queueState
	qreleased map[queueLease]time.Time
}

// Snapshot copies the store's locks, queues and remembered releases (of
// queued leases too), as a store that saves its data periodically (or a
// replica) holds them now: a restart from a snapshot taken just before is
// a restart that lost nothing.
func (d *Driver) Snapshot() *Snapshot {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return &Snapshot{locks: maps.Clone(s.locks), released: maps.Clone(s.released), queues: cloneQueues(s.queues),
		qreleased: maps.Clone(s.qreleased)}
}

// cloneQueues copies queue states deeply, so that the copy and the store
// change independently.
func cloneQueues(qs map[string]*queueState) map[string]*queueState {
	c := make(map[string]*queueState, len(qs))
	for k, q := range qs {
		c[k] = &queueState{holders: maps.Clone(q.holders), waiters: slices.Clone(q.waiters)}
	}
	return c
}

// Restart simulates a restart of the store, for every handle on it. With
// a nil from the store comes back empty, as without persistence; otherwise
// it comes back with from's locks and remembered releases, as from a
// snapshot older than the last writes or a failover to a lagging replica:
// locks taken since are gone, locks released since are held again, each
// until its original expiry (expiry times are absolute, as stores save
// them). Nobody is notified of the locks that vanish.
//
// Watchers stay subscribed, as a client that reconnects and resubscribes
// keeps them. The fencing counter is not part of the lost state: a store
// must keep its tokens increasing across restarts for fencing to mean
// anything, and tests of the code above it need a store that does.
func (d *Driver) Restart(from *Snapshot) {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.locks = make(map[string]lockState)
	s.released = make(map[releasedKey]time.Time)
	s.queues = make(map[string]*queueState)
	s.qreleased = make(map[queueLease]time.Time)
	if from != nil {
		// Copy, so that one Snapshot can be restored more than once.
		maps.Copy(s.locks, from.locks)
		maps.Copy(s.released, from.released)
		s.queues = cloneQueues(from.queues)
		maps.Copy(s.qreleased, from.qreleased)
	}
}
