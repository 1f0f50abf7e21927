package driver

import "context"

// QueueLister is implemented by drivers that can enumerate the queued
// names of a store, for operators (dlock list). It is separate from Queuer
// so that a driver can keep queues before it can list them.
type QueueLister interface {
	// ListQueues returns, in no particular order, one QueueInfo (as
	// Inspector.InspectQueue reports it, an exclusive holder included) for
	// every name whose key starts with prefix, taken literally, that has a
	// shared or permit holder or a waiter. A name held only exclusively is
	// Inspector.List's, not this one's. Each name's QueueInfo is consistent
	// in itself; the names are not read at one instant, so a name that
	// empties or fills during the call may be missing or present.
	ListQueues(ctx context.Context, prefix string) ([]QueueInfo, error)
}
