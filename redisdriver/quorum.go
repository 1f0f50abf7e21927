package redisdriver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/options"
	"github.com/redis/go-redis/v9"
)

// ErrNoQuorum is returned by a Quorum's calls when fewer than a majority
// of its masters answered (down, unreachable, too slow, or restarted too
// recently to vote): nothing can be decided. dlock reports it as a backend
// error (dlock.ErrBackend).
var ErrNoQuorum = errors.New("redisdriver: fewer than a majority of the quorum's masters answered")

// Defaults of a Quorum's options.
const (
	// DefaultVoteTimeout is how long a Quorum waits for each master's
	// answer (WithVoteTimeout).
	DefaultVoteTimeout = time.Second
	// quorumMinTTL is a Quorum's Capabilities.MinTTL: the token proof needs
	// the TTL to exceed the masters' clock differences plus maxTokenLead
	// (docs/quorum.md), and a TTL shorter than a few vote timeouts is
	// mostly spent voting.
	quorumMinTTL = 50 * time.Millisecond
	// minTokenLead and maxTokenLead bound how far ahead of the client's
	// clock a Quorum proposes tokens: twice the time the last vote took, so
	// that every master's own next token, its clock when the request
	// reaches it, is below the proposal, and all issue the proposal itself
	// (no write-back; quorum_vote.go). The proof of the tokens' order needs
	// the masters' clock differences to stay below the TTL less the
	// greatest lead (docs/quorum.md).
	minTokenLead = time.Millisecond
	maxTokenLead = 25 * time.Millisecond
	// splitVoteRetries is how many more times one Acquire votes again after
	// a split vote: rivals that each won a minority all release it.
	splitVoteRetries = 3
	// maxMasters is the most masters a Quorum takes (a watcher keeps one
	// bit per master: quorumWatcher.notify).
	maxMasters = 64
)

// Quorum implements driver.Driver over N independent Redis masters, the
// way Redlock does, with fencing tokens that still strictly increase per
// name. Each master runs the single-master Driver's scripts; a lock is held
// when a majority of the masters granted it, and the lease's token is the
// highest of that majority's, recorded by all of it before Acquire
// returns. docs/quorum.md gives the rules, the proof of the tokens' order
// and its assumptions.
//
// Make one with NewQuorum; OpenQuorum makes one inside a dlock Client.
// A Quorum has no queue: the fair lock, RWMutex and Semaphore fail with
// dlock.ErrUnsupported, and Lock waits the plain way. The operators' view
// (Inspector) is the majority's (quorum_inspect.go).
type Quorum struct {
	members  []*member
	majority int
	cfg      quorumConfig
	// lastToken is the highest token this Quorum has seen: the next
	// proposal is above it.
	lastToken atomic.Uint64
	// voteTook is how long the last vote took, in nanoseconds: the next
	// proposal's lead is twice that (proposal).
	voteTook  atomic.Int64
	pendingMu sync.Mutex
	pending   map[string]*unsettledID // by owner ID: see unsettled
	// calls are the goroutines of fanOut, which may outlive it by the
	// store client's own timeouts, and the background releases of votes
	// that did not make a lease; Close waits for them. Each is added by a
	// call or goroutine that is itself counted, or by a driver call, which
	// the engine does not make once it closes the driver.
	calls     sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
	ownsConns bool // made by OpenQuorum: Close closes the clients
}

var (
	_ driver.Driver     = (*Quorum)(nil)
	_ driver.KeyChecker = (*Quorum)(nil)
)

type quorumConfig struct {
	driverOpts   []Option
	voteTimeout  time.Duration
	restartDelay time.Duration
	delaySet     bool // WithRestartDelay given: restartDelay, not the request's TTL
}

// QuorumOption configures a Quorum.
type QuorumOption func(*quorumConfig) error

// WithMasterOptions applies opts (WithPrefix, WithFunctions) to the Driver
// of every master.
func WithMasterOptions(opts ...Option) QuorumOption {
	return func(c *quorumConfig) error {
		c.driverOpts = append(c.driverOpts, opts...)
		return nil
	}
}

// WithVoteTimeout sets how long a Quorum waits for each master's answer to
// a request. A master that has not answered by then does not count. Default
// DefaultVoteTimeout; each Acquire also waits at most a quarter of its TTL.
func WithVoteTimeout(d time.Duration) QuorumOption {
	return func(c *quorumConfig) error {
		if d <= 0 {
			return fmt.Errorf("%w: vote timeout %v, want > 0", driver.ErrInvalid, d)
		}
		c.voteTimeout = d
		return nil
	}
}

// WithRestartDelay sets how long a master that restarted stays out of
// votes, counted from its restart (the server's uptime). By default it is
// the TTL of the request voted on, which is enough when every lock on the
// masters uses the same TTL; give the longest TTL in use when they do not
// (docs/quorum.md). 0 lets a restarted master vote at once: only for
// masters that lose nothing in a restart (appendfsync always).
func WithRestartDelay(d time.Duration) QuorumOption {
	return func(c *quorumConfig) error {
		if d < 0 {
			return fmt.Errorf("%w: restart delay %v, want >= 0", driver.ErrInvalid, d)
		}
		c.restartDelay, c.delaySet = d, true
		return nil
	}
}

// NewQuorum returns a Quorum over the masters behind clients, one
// independent master each (a standalone client; not Cluster or Sentinel
// replicas of one another). The caller keeps ownership of the clients and
// closes them after the dlock Client. No clients, a nil client or a
// Cluster client is an error matching driver.ErrInvalid. An odd number of
// masters, 3 or 5, makes the best use of them.
func NewQuorum(clients []redis.UniversalClient, opts ...QuorumOption) (*Quorum, error) {
	if len(clients) == 0 || len(clients) > maxMasters {
		return nil, fmt.Errorf("%w: a quorum of %d masters (1 to %d)", driver.ErrInvalid, len(clients), maxMasters)
	}
	q := &Quorum{majority: len(clients)/2 + 1, pending: map[string]*unsettledID{}, cfg: quorumConfig{voteTimeout: DefaultVoteTimeout}}
	if err := options.Apply(&q.cfg, opts); err != nil {
		return nil, err
	}
	for i, c := range clients {
		if _, ok := c.(*redis.ClusterClient); ok {
			return nil, fmt.Errorf("%w: master %d of a quorum is a Cluster client", driver.ErrInvalid, i)
		}
		d, err := New(c, q.cfg.driverOpts...)
		if err != nil {
			return nil, fmt.Errorf("master %d: %w", i, err)
		}
		q.members = append(q.members, newMember(d, i))
	}
	for _, m := range q.members {
		m.peers = q.members
	}
	return q, nil
}

// Capabilities implements driver.Driver. The store's facts are those of
// each master (whole milliseconds, expiry up to ExpiryMargin early): the
// engine's validity deadline counts from before the Acquire call, earlier
// than any master's request was sent, and takes 1% of the TTL off for
// clock-rate differences between the client and each master
// (docs/quorum.md). A quorum has no queue, so Lock waits the plain way.
func (q *Quorum) Capabilities() driver.Capabilities {
	return driver.Capabilities{
		TTLUnit:        time.Millisecond,
		MinTTL:         quorumMinTTL,
		ExpiryMargin:   2 * time.Millisecond,
		MaxBatch:       MaxBatch,
		ContextAware:   false,
		QueueByDefault: false,
	}
}

// CheckKey implements driver.KeyChecker with the single Driver's rule.
func (q *Quorum) CheckKey(key string) error { return q.members[0].d.CheckKey(key) }

// Close implements driver.Driver. It waits for the background releases
// of votes that did not make a lease, and for answers still on their way
// (each bounded by the store client's timeouts),
// then closes the masters' Drivers, and their clients if OpenQuorum made
// them.
func (q *Quorum) Close() error {
	q.closeOnce.Do(func() {
		q.calls.Wait()
		var errs []error
		for _, m := range q.members {
			m.close()
			if q.ownsConns {
				m.d.ownsClient = true
			}
			errs = append(errs, m.d.Close())
		}
		q.closeErr = errors.Join(errs...)
	})
	return q.closeErr
}

// answer is one master's answer to a fanned-out call.
type answer[T any] struct {
	i   int // the master's index
	v   T
	err error
}

// fanOut calls call on every master of idx at once and returns the answers
// that came within timeout (or before ctx ended), in no order: all of them,
// or those that decided the outcome. A call that fanOut is no longer
// waiting for is not cancelled (go-redis does not abort a read in flight
// when its context ends, so the wait is bounded here): late is called, on
// that call's goroutine, with every answer that came after fanOut
// returned (nil late: dropped).
//
// decided, if not nil, is asked after each answer whether those so far
// decide the outcome. Once they do, fanOut waits for the others only twice
// as long as the answers so far took (2 ms at least): masters that
// answer about as fast are all counted, and their calls are not left
// running (a straggler would meet the caller's next call on its master);
// a master that does not answer does not hold up every call.
func fanOut[T any](ctx context.Context, q *Quorum, idx []int, timeout time.Duration,
	call func(ctx context.Context, m *member) (T, error), decided func([]answer[T]) bool, late func(answer[T])) []answer[T] {
	var (
		mu     sync.Mutex
		got    = make([]answer[T], 0, len(idx))
		ended  bool
		all    = make(chan struct{})
		enough = make(chan struct{}, 1)
		left   atomic.Int32 // calls still running: the last one cancels cctx
	)
	// One deadline for every call, and for the wait below, cancelled by
	// the last call to end (calls outlive fanOut).
	cctx, cancel := context.WithTimeout(ctx, timeout)
	cancelLast := cancel
	if len(idx) == 0 {
		cancel()
		return nil
	}
	left.Store(int32(len(idx)))
	start := time.Now()
	for _, i := range idx {
		q.calls.Add(1)
		go func() {
			defer q.calls.Done()
			defer func() {
				// After the answer is in: cctx also ends the wait below.
				if left.Add(-1) == 0 {
					cancelLast()
				}
			}()
			v, err := call(cctx, q.members[i])
			a := answer[T]{i: i, v: v, err: err}
			mu.Lock()
			if ended {
				mu.Unlock()
				if late != nil {
					late(a)
				}
				return
			}
			got = append(got, a)
			if len(got) == len(idx) {
				close(all)
			} else if decided != nil && decided(got) {
				select {
				case enough <- struct{}{}:
				default:
				}
			}
			mu.Unlock()
		}()
	}
	var grace <-chan time.Time
	for waiting := true; waiting; {
		select {
		case <-all:
			waiting = false
		case <-enough:
			t := time.NewTimer(max(2*time.Since(start), 2*time.Millisecond))
			defer t.Stop()
			grace = t.C
		case <-grace:
			waiting = false
		case <-cctx.Done():
			waiting = false
		}
	}
	mu.Lock()
	defer mu.Unlock()
	ended = true
	return append([]answer[T](nil), got...)
}

// all returns the indexes of every master.
func (q *Quorum) all() []int {
	idx := make([]int, len(q.members))
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// invalid returns the first answer's error that matches driver.ErrInvalid:
// every master refuses bad input alike, and it is the caller's to fix.
func invalid[T any](answers []answer[T]) error {
	for _, a := range answers {
		if errors.Is(a.err, driver.ErrInvalid) {
			return a.err
		}
	}
	return nil
}

// noQuorum is the error of a call that fewer than a majority answered. It
// matches ErrNoQuorum alone: the masters' errors are only its text, so that
// one master's timeout (a context error) does not read as the caller's own.
func (q *Quorum) noQuorum(what string, answered int, errs []error) error {
	detail := "no answer in time"
	if len(errs) > 0 {
		detail = errors.Join(errs...).Error()
	}
	return fmt.Errorf("%s: %w (%d of %d, %d needed): %s",
		what, ErrNoQuorum, answered, len(q.members), q.majority, detail)
}
