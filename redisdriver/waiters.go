package redisdriver

import (
	"sync"

	"github.com/dlockio/dlock/driver"
)

// queuedWaiters is what a Driver knows of the waiters it queued with an
// inbox (Enqueue with Wait): a grant announced on the inbox while its
// subscription's connection was down is lost, and the watcher, subscribed
// again, wakes them (an announcement is only a wake-up: the waiter asks
// the store, which has the grant). Without it a waiter would learn of the
// grant at its place's next renewal, TTL/3 later. The zero value is ready.
type queuedWaiters struct {
	mu   sync.Mutex
	byID map[string]queuedWaiter
}

// queuedWaiter is one waiter's inbox and lock name.
type queuedWaiter struct {
	inbox, key string
}

// answered records Enqueue's answer to req: a waiter is known from its
// request queued with Wait until a request of its id is granted or
// released.
func (q *queuedWaiters) answered(req driver.QueueRequest, res driver.QueueResult, err error) {
	switch {
	case err != nil:
	case res.Queued && req.Wait:
		q.mu.Lock()
		if q.byID == nil {
			q.byID = make(map[string]queuedWaiter)
		}
		q.byID[req.ID] = queuedWaiter{inbox: req.Inbox, key: req.Key}
		q.mu.Unlock()
	case res.Granted:
		q.forget(req.ID)
	}
}

// forget drops the waiter of id, if known: granted, or its place released.
func (q *queuedWaiters) forget(id string) {
	q.mu.Lock()
	if len(q.byID) > 0 {
		delete(q.byID, id)
	}
	q.mu.Unlock()
}

// released forgets the waiters of reqs.
func (q *queuedWaiters) released(reqs []driver.ReleaseRequest) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.byID) == 0 {
		return
	}
	for _, r := range reqs {
		delete(q.byID, r.ID)
	}
}

// wakeUps returns an unconfirmed announcement for each waiter of inbox.
func (q *queuedWaiters) wakeUps(inbox string) []driver.Grant {
	q.mu.Lock()
	defer q.mu.Unlock()
	var gs []driver.Grant
	for id, w := range q.byID {
		if w.inbox == inbox {
			gs = append(gs, driver.Grant{Key: w.key, ID: id})
		}
	}
	return gs
}

// forgetInbox drops every waiter of inbox, whose watcher is closed: its
// Client is done with them.
func (q *queuedWaiters) forgetInbox(inbox string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for id, w := range q.byID {
		if w.inbox == inbox {
			delete(q.byID, id)
		}
	}
}

// grantWatcher is WatchGrants' subscription: a watcher of the inbox's
// channel, whose Close also forgets the inbox's waiters.
type grantWatcher struct {
	*watcher
	inbox string
}

// Close implements driver.GrantWatcher.
func (g grantWatcher) Close() error {
	err := g.watcher.Close()
	g.d.waiters.forgetInbox(g.inbox)
	return err
}
