package redisdriver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/redis/go-redis/v9"
)

const (
	// confirmTimeout bounds how long Add waits for Redis to confirm a
	// subscription. Waiters fall back to their TTL timer past it, so a
	// store that is down never makes Lock hang in Add.
	confirmTimeout = 3 * time.Second
	// healthInterval: a pub/sub connection quiet this long is sent a PING;
	// quiet as long again, it is replaced. go-redis has the same check on
	// PubSub.Channel, which this watcher cannot use: that channel drops the
	// PING replies that confirm subscriptions.
	healthInterval = 3 * time.Second
	// errorBackoff paces the reader while the connection keeps failing.
	errorBackoff = 100 * time.Millisecond
)

var errWatcherClosed = errors.New("release watcher closed")

// watcher is a client's one pub/sub connection, subscribed to the release
// channel of every key some local waiter is waiting for. In Cluster mode
// PUBLISH reaches every node, so one connection on any node hears all.
//
// A subscription is confirmed by a barrier: after SUBSCRIBE the watcher
// writes PING n on the same connection, and Redis answers a connection's
// commands in order, so the reply to PING n means the SUBSCRIBE was done.
// When go-redis replaces a broken connection it subscribes every channel
// again before sending anything else on the new one, so the reply to any
// later PING confirms as well; PINGs written to the lost connection are
// never answered, so after a connection error the reader writes a fresh
// one. (Counting the confirmations of SUBSCRIBE instead loses count when a
// reconnect swallows some, and a key's waiters then stall in Add forever.)
//
// What was published while the connection was down is lost: a release, a
// grant. So once the reply to the first PING after a lost connection
// confirms every channel again, the reader calls onRearm with them, and
// the watcher's owner wakes whoever may have missed something; they ask
// the store, which has the answer.
type watcher struct {
	d       *Driver
	chanOf  func(key string) string       // the channel Add and Remove follow for key
	onMsg   func(channel, payload string) // every message of a followed channel
	onRearm func(channels []string)       // the channels followed again after a lost connection
	health  time.Duration

	mu     sync.Mutex
	ps     *redis.PubSub // opened by the first Add
	subs   map[string]*subscription
	sent   uint64        // number of the last PING written
	acked  uint64        // highest PING number answered
	ackCh  chan struct{} // closed and replaced when acked grows or barriers change
	broken bool          // a SUBSCRIBE or PING may have been lost: the reader repairs
	lost   bool          // the connection was lost: the next repair writes a PING to rearm at
	// rearmAt is the PING whose reply calls onRearm (0: none): the first
	// written after the connection was lost, so on the new connection,
	// after go-redis subscribed every channel again.
	rearmAt uint64
	closed  bool
	stop    chan struct{} // closed by Close
	done    chan struct{} // closed when the reader goroutine exits
}

// subscription tracks one channel. Add and Remove are reference counted,
// so that a Remove racing an Add for the same key never unsubscribes a
// waiter that just subscribed.
type subscription struct {
	refs int
	// barrier is the PING written after this channel's latest SUBSCRIBE,
	// 0 while no SUBSCRIBE has gone out on the current PubSub.
	barrier uint64
}

// Watch implements driver.Driver.
func (d *Driver) Watch(onRelease func(key string)) (driver.Watcher, error) {
	if onRelease == nil {
		return nil, fmt.Errorf("%w: nil release callback", driver.ErrInvalid)
	}
	onMsg := func(channel, _ string) {
		if name, ok := d.nameFromChannel(channel); ok {
			onRelease(name)
		}
	}
	// A release published while the connection was down is lost: every
	// waiter tries again, and the busy ones wait on.
	return d.newWatcher(d.channel, onMsg, func(channels []string) {
		for _, ch := range channels {
			onMsg(ch, "")
		}
	}), nil
}

// newWatcher returns a watcher that follows chanOf(key) for each key added,
// hands every message to onMsg, and the channels it follows again after a
// lost connection to onRearm: release channels (Watch) or a grant inbox
// (WatchGrants).
func (d *Driver) newWatcher(chanOf func(string) string, onMsg func(channel, payload string), onRearm func([]string)) *watcher {
	return &watcher{
		d: d, chanOf: chanOf, onMsg: onMsg, onRearm: onRearm, health: healthInterval,
		subs: make(map[string]*subscription), ackCh: make(chan struct{}),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
}

// Add implements driver.Watcher. Every Add counts, even one that fails, and
// is undone by one Remove.
func (w *watcher) Add(ctx context.Context, key string) error {
	ch := w.chanOf(key)
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return errWatcherClosed
	}
	s := w.subs[ch]
	if s == nil {
		s = &subscription{}
		w.subs[ch] = s
	}
	s.refs++
	w.mu.Unlock()

	timer := time.NewTimer(confirmTimeout)
	defer timer.Stop()
	// Writes do not stop at the caller's cancellation: a write cut short
	// costs a reconnect. They stop when Add gives up: at confirmTimeout, or
	// at the caller's deadline, which a client with ContextTimeoutEnabled
	// applies to the connection (dlock calls Add on a goroutine it can
	// abandon, so the caller returns at its deadline in any case).
	giveUp := time.Now().Add(confirmTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(giveUp) {
		giveUp = d
	}
	wctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), giveUp)
	defer cancel()
	var lastErr error
	for {
		var wait <-chan struct{}   // the next answer to a PING
		var retry <-chan time.Time // or a moment to try subscribing again
		w.mu.Lock()
		switch {
		case w.closed:
			w.mu.Unlock()
			return errWatcherClosed
		case w.subs[ch] != s:
			w.mu.Unlock()
			return fmt.Errorf("subscription to %q removed while being confirmed", ch)
		case ctx.Err() != nil:
			w.mu.Unlock()
			return ctx.Err()
		case s.barrier == 0:
			// A write fails when the connection broke since the last
			// read; go-redis has a new one by then, so try again.
			if lastErr = w.repairLocked(wctx); lastErr != nil {
				w.mu.Unlock()
				retry = time.After(errorBackoff)
				break
			}
			fallthrough
		default:
			if w.acked >= s.barrier {
				w.mu.Unlock()
				return nil
			}
			wait = w.ackCh
			w.mu.Unlock()
		}
		select {
		case <-wait:
		case <-retry:
		case <-timer.C:
			if lastErr != nil {
				return fmt.Errorf("subscribing to %q: %w", ch, lastErr)
			}
			return fmt.Errorf("subscription to %q not confirmed within %v", ch, confirmTimeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// repairLocked subscribes every channel that has no SUBSCRIBE out and, if
// it did or a barrier is unanswered, writes a new PING. On failure the
// reader tries again later.
func (w *watcher) repairLocked(ctx context.Context) error {
	if w.ps == nil {
		w.ps = w.d.rdb.Subscribe(ctx)
		go w.read(w.ps)
	}
	var chans []string
	for ch, s := range w.subs {
		if s.barrier == 0 {
			chans = append(chans, ch)
		}
	}
	w.broken = true
	if len(chans) > 0 {
		if err := w.ps.Subscribe(ctx, chans...); err != nil {
			w.lost = true // the write failed: go-redis reconnects
			return err
		}
	} else if w.acked >= w.sent && !w.lost {
		w.broken = false
		return nil
	}
	seq, err := w.pingLocked(ctx)
	if err != nil {
		w.lost = true
		return err
	}
	for _, ch := range chans {
		w.subs[ch].barrier = seq
	}
	if w.lost {
		w.lost, w.rearmAt = false, seq
	}
	w.broken = false
	return nil
}

func (w *watcher) pingLocked(ctx context.Context) (uint64, error) {
	w.sent++
	return w.sent, w.ps.Ping(ctx, strconv.FormatUint(w.sent, 10))
}

// Remove implements driver.Watcher.
func (w *watcher) Remove(ctx context.Context, key string) error {
	ch := w.chanOf(key)
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.subs[ch]
	if s == nil || w.closed {
		return nil
	}
	s.refs--
	if s.refs > 0 {
		return nil
	}
	delete(w.subs, ch)
	if w.ps == nil {
		return nil
	}
	return w.ps.Unsubscribe(ctx, ch)
}

// Close implements driver.Watcher.
func (w *watcher) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	close(w.stop)
	close(w.ackCh) // wakes every Add, which then sees closed
	ps := w.ps
	w.mu.Unlock()
	if ps == nil {
		return nil
	}
	err := ps.Close()
	<-w.done
	return err
}

// read dispatches the pub/sub stream until the watcher is closed. It owns
// the PubSub's reading side and its health: it repairs subscriptions after
// connection errors and replaces a connection that stopped answering.
func (w *watcher) read(ps *redis.PubSub) {
	defer close(w.done)
	ctx := context.Background()
	quiet, failures := 0, 0
	for {
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			return
		}
		if w.broken {
			rctx, cancel := context.WithTimeout(ctx, confirmTimeout)
			_ = w.repairLocked(rctx)
			cancel()
		}
		w.mu.Unlock()

		msg, err := ps.ReceiveTimeout(ctx, w.health)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				if quiet++; quiet == 1 {
					w.probe()
					continue
				}
				if ps = w.replace(ps); ps == nil {
					return
				}
				quiet = 0
				continue
			}
			// go-redis has reconnected, or will at the next receive, and
			// subscribed every channel again; barrier PINGs on the lost
			// connection will never be answered. In Cluster it reconnects
			// to the master of the first channel's slot, as its layout has
			// it: a stale one names a dead node until reloaded.
			w.d.layout.noteErr(err)
			quiet = 0
			w.setLost()
			if failures++; failures > 1 {
				select {
				case <-w.stop:
					return
				case <-time.After(errorBackoff):
				}
			}
			continue
		}
		quiet, failures = 0, 0
		switch m := msg.(type) {
		case *redis.Message:
			w.onMsg(m.Channel, m.Payload)
		case *redis.Pong:
			if chans := w.ack(m.Payload); chans != nil {
				w.onRearm(chans)
			}
		}
	}
}

// setLost records that the connection was lost: repair, and rearm.
func (w *watcher) setLost() {
	w.mu.Lock()
	w.broken, w.lost = true, true
	w.mu.Unlock()
}

// probe writes a health-check PING.
func (w *watcher) probe() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), confirmTimeout)
	defer cancel()
	if _, err := w.pingLocked(ctx); err != nil {
		w.broken, w.lost = true, true
	}
}

// replace closes old, which did not answer a PING, and opens a new
// PubSub with every channel subscribed again. It returns nil once the
// watcher is closed.
func (w *watcher) replace(old *redis.PubSub) *redis.PubSub {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	_ = old.Close()
	w.ps = w.d.rdb.Subscribe(context.Background())
	for _, s := range w.subs {
		s.barrier = 0
	}
	w.lost = true  // what the old one did not answer may have been lost
	close(w.ackCh) // let waiting Adds see their barriers reset
	w.ackCh = make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), confirmTimeout)
	defer cancel()
	_ = w.repairLocked(ctx)
	return w.ps
}

// ack records the reply to PING number payload. When it is the PING to
// rearm at, it returns the channels followed (non-nil, maybe empty).
func (w *watcher) ack(payload string) []string {
	seq, err := strconv.ParseUint(payload, 10, 64)
	if err != nil {
		return nil // not one of ours
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || seq <= w.acked || seq > w.sent {
		return nil
	}
	w.acked = seq
	close(w.ackCh)
	w.ackCh = make(chan struct{})
	if w.rearmAt == 0 || seq < w.rearmAt {
		return nil
	}
	w.rearmAt = 0
	chans := make([]string, 0, len(w.subs))
	for ch := range w.subs {
		chans = append(chans, ch)
	}
	return chans
}
