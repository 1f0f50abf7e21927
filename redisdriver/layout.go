package redisdriver

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// reloadGap is the least time from the start of one reload of the
	// Cluster layout to the start of the next: while a master is down and
	// not yet replaced, every call on its slots fails, and reloading after
	// each would only add load to the nodes that still answer.
	reloadGap = 200 * time.Millisecond
	// reloadTimeout bounds one reload. A node that does not answer holds
	// it up to this long before the client asks the next one.
	reloadTimeout = 2 * time.Second
	// staleQuiet is how long the layout keeps being reloaded after the
	// last error that said it may be stale, while no reload has shown
	// other masters: long enough for a replica to take over from a master
	// that died (a cluster-node-timeout, 15 s by default, then an election
	// of a second or two), so that the first call after that finds the
	// new master without failing first.
	staleQuiet = 20 * time.Second
	// resendWait bounds how long a call that failed on a stale layout
	// waits for the reload before it gives up and returns its error.
	resendWait = reloadGap + reloadTimeout
)

// layout keeps a Cluster client's map of slots to masters fresh after a
// failover. go-redis reloads the map when a node answers MOVED or ASK,
// and otherwise once a minute (ClusterStateReloadInterval): the slots of
// a master that died stay routed to it until then, and every call on
// them fails with a refused connection, long after its replica took over
// (57 s after the promotion with the defaults: docs/reliability.md).
//
// An error that means the map may be stale (staleLayout) starts one
// goroutine per Driver that reloads it, reloadGap apart, one reload at a
// time however many calls fail, until a reload shows other masters than
// the one before and no such error came since, or staleQuiet passes
// without one. A call that failed so waits for the next reload (resend)
// and, if it moved the call's slot to another master, is sent again at
// once: renewals, releases and acquisitions then succeed on the promoted
// replica without waiting for their own retries. Every script is safe to
// send twice (a lost reply is the same case: go-redis resends too).
type layout struct {
	c      *redis.ClusterClient
	ctx    context.Context // cancelled by close: ends a reload under way
	cancel context.CancelFunc
	wg     sync.WaitGroup // the reloading goroutine

	// changes counts the reloads that found other masters than the
	// reload before them: a call sent before such a reload may have gone
	// to a master that is no longer one.
	changes atomic.Uint64

	mu        sync.Mutex
	running   bool          // the reloading goroutine is on
	closed    bool          // close was called: no more reloads
	lastStale time.Time     // when the last error of a stale layout was noted
	begun     uint64        // reloads started
	ended     uint64        // reloads done
	reloaded  chan struct{} // closed, and replaced, when a reload ends
	masters   string        // the masters the last reload found, sorted
}

// newLayout returns the layout keeper of c.
func newLayout(c *redis.ClusterClient) *layout {
	l := &layout{c: c, reloaded: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l
}

// seen returns the count of layout changes before a call is sent: resend
// compares it with the count after the call failed. Nil-safe: 0 outside
// Cluster mode.
func (l *layout) seen() uint64 {
	if l == nil {
		return 0
	}
	return l.changes.Load()
}

// resend reports whether the call on key, sent when seen was the count of
// changes, and failed with err, is to be sent again: err says the layout
// may be stale, a reload since moved key's slot to another master, and ctx
// is still on. It notes err (starting the reloads) and waits for the next
// reload to end, at most resendWait, when the answer depends on it.
func (l *layout) resend(ctx context.Context, seen uint64, err error, key string) bool {
	if l == nil || !staleLayout(err) {
		return false
	}
	before := l.masterOf(ctx, key)
	target := l.note()
	return l.awaitReload(ctx, seen, target) || l.masterOf(ctx, key) != before
}

// resendAll is resend for the calls of one pipeline: it returns those to
// send again, after one wait for one reload.
func (l *layout) resendAll(ctx context.Context, seen uint64, calls []*call) []*call {
	if l == nil {
		return nil
	}
	var stale []*call
	var before []string
	for _, cl := range calls {
		if cl.reply != nil && staleLayout(cl.reply.Err()) && len(cl.keys) > 0 {
			stale = append(stale, cl)
			before = append(before, l.masterOf(ctx, cl.keys[0]))
		}
	}
	if len(stale) == 0 {
		return nil
	}
	if l.awaitReload(ctx, seen, l.note()) {
		return stale
	}
	var again []*call
	for i, cl := range stale {
		if l.masterOf(ctx, cl.keys[0]) != before[i] {
			again = append(again, cl)
		}
	}
	return again
}

// noteErr notes err, when it says the layout may be stale, for a caller
// that does not send again (reads, subscriptions). Nil-safe.
func (l *layout) noteErr(err error) {
	if l != nil && staleLayout(err) {
		l.note()
	}
}

// note records an error of a stale layout, starts the reloading goroutine
// unless it is on, and returns the number of the next reload to start.
func (l *layout) note() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastStale = time.Now()
	if !l.running && !l.closed {
		l.running = true
		l.wg.Add(1)
		go l.reloadLoop()
	}
	return l.begun + 1
}

// awaitReload waits until reload number target has ended, the reloads
// stopped, ctx ends or resendWait passes, and reports whether a reload
// changed the masters since seen.
func (l *layout) awaitReload(ctx context.Context, seen, target uint64) bool {
	timer := time.NewTimer(resendWait)
	defer timer.Stop()
	for {
		if l.changes.Load() != seen {
			return true
		}
		l.mu.Lock()
		done := l.ended >= target || !l.running
		ch := l.reloaded
		l.mu.Unlock()
		if done {
			return l.changes.Load() != seen
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		case <-timer.C:
			return false
		}
	}
}

// masterOf returns the address of the master the client routes key to
// now, from the layout it has (no round trip), or "" if it has none.
func (l *layout) masterOf(ctx context.Context, key string) string {
	m, err := l.c.MasterForKey(ctx, key)
	if err != nil {
		return ""
	}
	return m.Options().Addr
}

// reloadLoop reloads the layout, reloadGap apart (start to start), until
// continueAfter says enough or close is called.
func (l *layout) reloadLoop() {
	defer l.wg.Done()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
		case <-l.ctx.Done():
			l.stopped()
			return
		}
		timer.Reset(reloadGap)
		l.mu.Lock()
		l.begun++
		l.mu.Unlock()
		started := time.Now()
		masters, err := l.reload()
		if !l.continueAfter(started, masters, err) {
			return
		}
	}
}

// continueAfter records the end of the reload started at started, which
// found masters (or failed with err), and reports whether to reload
// again: not once the client or the Driver is closed; nor once a reload
// found other masters than the one before and no call failed on a stale
// layout since it started (a call that did may have been routed by the
// layout before it, and its retry finds the next); nor staleQuiet after
// the last such failure.
func (l *layout) continueAfter(started time.Time, masters string, err error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	changed := false
	if err == nil && masters != l.masters {
		// The first reload has nothing to compare with: the client's own
		// layout is not readable.
		changed = l.masters != ""
		if changed {
			l.changes.Add(1)
		}
		l.masters = masters
	}
	l.ended++
	close(l.reloaded)
	l.reloaded = make(chan struct{})
	stop := l.closed || errors.Is(err, redis.ErrClosed) || time.Since(l.lastStale) > staleQuiet ||
		changed && l.lastStale.Before(started)
	if stop {
		l.running = false
	}
	return !stop
}

// stopped marks the goroutine off, after close.
func (l *layout) stopped() {
	l.mu.Lock()
	l.running = false
	close(l.reloaded)
	l.reloaded = make(chan struct{})
	l.mu.Unlock()
}

// reload has the client reload its layout, and returns its masters.
// ForEachMaster reloads the layout before it visits the masters, and
// waits for that, unlike ReloadState, which only starts it.
func (l *layout) reload() (string, error) {
	ctx, cancel := context.WithTimeout(l.ctx, reloadTimeout)
	defer cancel()
	var mu sync.Mutex
	var addrs []string
	err := l.c.ForEachMaster(ctx, func(_ context.Context, m *redis.Client) error {
		mu.Lock()
		addrs = append(addrs, m.Options().Addr)
		mu.Unlock()
		return nil
	})
	slices.Sort(addrs)
	return strings.Join(addrs, ","), err
}

// close stops the reloads and waits for the goroutine. Nil-safe.
func (l *layout) close() {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.cancel()
	l.wg.Wait()
}

// staleLayout reports whether err may mean that the client routes a slot
// to a node that no longer serves it: the connection to the node was
// refused, reset or closed, or could not be made or used at all (a master
// that died, or was cut off and is being replaced), or the node answered
// that the slot moved (MOVED, after go-redis followed its redirects),
// that the cluster is down (CLUSTERDOWN: a master failed and is not
// replaced yet), or that it is a replica now (READONLY). The caller's own
// cancellation is not.
func staleLayout(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ne *net.OpError
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	for _, p := range []string{"MOVED ", "CLUSTERDOWN ", "READONLY "} {
		if redis.HasErrorPrefix(err, strings.TrimSpace(p)) {
			return true
		}
	}
	return false
}
