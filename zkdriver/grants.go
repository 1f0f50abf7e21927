package zkdriver

import (
	"context"
	"fmt"
	"sync"

	"github.com/dlockio/dlock/driver"
)

// grantSinks are the WatchGrants subscriptions of a Driver, by inbox. A
// grant is found by the monitor of the waiter's own Driver, so an inbox
// is a name within the Driver, not a node in the store.
type grantSinks struct {
	mu    sync.Mutex
	byBox map[string]map[*grantWatcher]struct{}
}

func (s *grantSinks) announce(inbox string, g driver.Grant) {
	s.mu.Lock()
	ws := make([]*grantWatcher, 0, len(s.byBox[inbox]))
	for w := range s.byBox[inbox] {
		ws = append(ws, w)
	}
	s.mu.Unlock()
	for _, w := range ws {
		w.push(g)
	}
}

// WatchGrants implements driver.Queuer.
func (d *Driver) WatchGrants(ctx context.Context, inbox string, onGrant func(driver.Grant)) (driver.GrantWatcher, error) {
	if onGrant == nil {
		return nil, fmt.Errorf("%w: nil grant callback", driver.ErrInvalid)
	}
	if inbox == "" {
		return nil, fmt.Errorf("%w: empty inbox", driver.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w := &grantWatcher{s: &d.sinks, inbox: inbox, out: newMailbox(onGrant)}
	d.sinks.mu.Lock()
	if d.sinks.byBox == nil {
		d.sinks.byBox = make(map[string]map[*grantWatcher]struct{})
	}
	if d.sinks.byBox[inbox] == nil {
		d.sinks.byBox[inbox] = make(map[*grantWatcher]struct{})
	}
	d.sinks.byBox[inbox][w] = struct{}{}
	d.sinks.mu.Unlock()
	return w, nil
}

// grantWatcher delivers the grants of one subscription, one at a time.
type grantWatcher struct {
	s     *grantSinks
	inbox string
	out   *mailbox[driver.Grant] // to the subscription's onGrant
	once  sync.Once
}

func (w *grantWatcher) push(g driver.Grant) { w.out.post(g) }

// Close implements driver.GrantWatcher.
func (w *grantWatcher) Close() error {
	w.once.Do(func() {
		w.s.mu.Lock()
		delete(w.s.byBox[w.inbox], w)
		if len(w.s.byBox[w.inbox]) == 0 {
			delete(w.s.byBox, w.inbox)
		}
		w.s.mu.Unlock()
		w.out.close()
	})
	return nil
}
