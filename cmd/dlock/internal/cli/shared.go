package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
)

// leaseKind is what "dlock run" takes: the exclusive lock (the default),
// a read lease of the read-write lock KEY (--shared), or one of N permits
// of the semaphore KEY (--permits N).
type leaseKind struct {
	shared    *bool
	permits   *int // 0: not a semaphore
	exclusive bool // -x was given
}

func (k leaseKind) isShared() bool { return k.shared != nil && *k.shared }
func (k leaseKind) n() int {
	if k.permits == nil {
		return 0
	}
	return *k.permits
}

func (k leaseKind) check() error {
	switch {
	case k.isShared() && k.n() > 0:
		return usageErrorf("--shared and --permits are exclusive: a read lease or a permit (see dlock run --help)")
	case k.exclusive && k.n() > 0:
		return usageErrorf("--exclusive and --permits are exclusive: the lock or a permit (see dlock run --help)")
	}
	return nil
}

// take acquires the lease; try makes one attempt.
func (k leaseKind) take(ctx context.Context, c *dlock.Client, key string, try bool, opts ...dlock.LockOption) (*dlock.Lease, error) {
	switch {
	case k.isShared() && try:
		return c.RWMutex(key).TryRLock(ctx, opts...)
	case k.isShared():
		return c.RWMutex(key).RLock(ctx, opts...)
	case k.n() > 0 && try:
		return c.Semaphore(key, k.n()).TryAcquire(ctx, opts...)
	case k.n() > 0:
		return c.Semaphore(key, k.n()).Acquire(ctx, opts...)
	case try:
		return c.TryLock(ctx, key, opts...)
	}
	// In the store's queue on every backend, whatever a driver's default:
	// runs are served in the order they asked, and --shared runs
	// that come later wait behind this one instead of overtaking it. A
	// store without a queue (a quorum of Redis masters) refuses that at
	// once, before any wait: there runs wait the plain way.
	l, err := c.Lock(ctx, key, append(opts, dlock.WithFIFO())...)
	if errors.Is(err, dlock.ErrUnsupported) {
		return c.Lock(ctx, key, opts...)
	}
	return l, err
}

// busy says why a lease of this kind was refused.
func (k leaseKind) busy() string {
	switch {
	case k.isShared():
		return "a writer holds it or is queued"
	case k.n() > 0:
		return fmt.Sprintf("all %d permits held or others queued", k.n())
	}
	return "held by another owner"
}

const queueJSONHelp = `
status --json of a KEY with readers, permits or waiters:
  key, held    as above (held: some holder)
  holders      [{id, mode, token, host, pid, meta, ttl_ms}]; id is the
               holder's lease id (it tells permits apart); mode is
               exclusive, shared (a reader: token is its write epoch) or
               permit (its token means nothing)
  waiters      [{mode, permits, host, pid, meta, ttl_ms}] in queue order;
               permits is the N a permit waiter asks with
`

// queueHolderJSON is one holder in status --json of a name with readers,
// permits or waiters.
type queueHolderJSON struct {
	ID    string `json:"id"`   // the holder's owner id: tells permits apart
	Mode  string `json:"mode"` // exclusive, shared or permit
	Token uint64 `json:"token"`
	Host  string `json:"host"`
	PID   int    `json:"pid"`
	Meta  string `json:"meta"`
	TTLMS int64  `json:"ttl_ms"`
}

// queueWaiterJSON is one waiter, in queue order.
type queueWaiterJSON struct {
	Mode    string `json:"mode"`
	Permits int    `json:"permits,omitempty"` // the N it asks with
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Meta    string `json:"meta"`
	TTLMS   int64  `json:"ttl_ms"`
}

// queueJSON is status --json of a name that has readers, permits or
// waiters.
type queueJSON struct {
	Key     string            `json:"key"`
	Held    bool              `json:"held"`
	Holders []queueHolderJSON `json:"holders"`
	Waiters []queueWaiterJSON `json:"waiters"`
}

func modeName(m driver.Mode) string { return m.String() }

func toQueueJSON(q dlock.QueueInfo) queueJSON {
	out := queueJSON{Key: q.Key, Held: len(q.Holders) > 0, Holders: []queueHolderJSON{}, Waiters: []queueWaiterJSON{}}
	for _, h := range q.Holders {
		out.Holders = append(out.Holders, queueHolderJSON{ID: h.ID, Mode: modeName(h.Mode), Token: h.Token,
			Host: h.Owner.Host, PID: h.Owner.PID, Meta: h.Owner.Meta, TTLMS: h.TTL.Milliseconds()})
	}
	for _, w := range q.Waiters {
		out.Waiters = append(out.Waiters, queueWaiterJSON{Mode: modeName(w.Mode), Permits: w.Limit,
			Host: w.Owner.Host, PID: w.Owner.PID, Meta: w.Owner.Meta, TTLMS: w.TTL.Milliseconds()})
	}
	return out
}

// inspectQueue returns the queue side of key, or ok=false when it has no
// reader, permit or waiter (or the store keeps no queues).
func inspectQueue(ctx context.Context, c *dlock.Client, key string) (dlock.QueueInfo, bool, error) {
	q, ok, err := c.InspectQueue(ctx, key)
	if errors.Is(err, dlock.ErrUnsupported) {
		return dlock.QueueInfo{}, false, nil
	}
	if err != nil || !ok {
		return dlock.QueueInfo{}, false, err
	}
	shared := len(q.Waiters) > 0
	for _, h := range q.Holders {
		shared = shared || h.Mode != driver.ModeExclusive
	}
	return q, shared, nil
}

// writeQueueText prints holders and waiters as tables.
func writeQueueText(w io.Writer, q dlock.QueueInfo) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "key:\t%s\n", shown(q.Key))
	fmt.Fprintf(tw, "holders:\t%s\n", countOf(len(q.Holders), "holder"))
	fmt.Fprintf(tw, "waiters:\t%s\n", countOf(len(q.Waiters), "waiter"))
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(q.Holders) > 0 {
		fmt.Fprintln(tw, "\nMODE\tID\tTOKEN\tHOST\tPID\tTTL\tMETA")
		for _, h := range q.Holders {
			tok := fmt.Sprint(h.Token)
			if h.Mode == driver.ModePermit {
				tok = "-" // a permit's token means nothing
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", modeName(h.Mode), shown(h.ID), tok, shown(h.Owner.Host), h.Owner.PID,
				roundDur(h.TTL), shown(h.Owner.Meta))
		}
	}
	if len(q.Waiters) > 0 {
		fmt.Fprintln(tw, "\nWAITING\tPERMITS\tHOST\tPID\tTTL\tMETA")
		for _, x := range q.Waiters {
			n := "-"
			if x.Limit > 0 {
				n = fmt.Sprint(x.Limit)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", modeName(x.Mode), n, shown(x.Owner.Host), x.Owner.PID,
				roundDur(x.TTL), shown(x.Owner.Meta))
		}
	}
	return tw.Flush()
}

func countOf(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// queueStatus prints status for a name with readers, permits or waiters,
// as text or, when jsonOut is set, through it.
func (s *invocation) queueStatus(q dlock.QueueInfo, jsonOut func(any) error) error {
	var err error
	if jsonOut != nil {
		err = jsonOut(toQueueJSON(q))
	} else {
		err = writeQueueText(s.env.Stdout, q)
	}
	if err != nil {
		return err
	}
	if len(q.Holders) == 0 {
		return &exitError{code: ExitNotHeld, err: fmt.Errorf("lock %q is not held (%s)", q.Key, countOf(len(q.Waiters), "waiter"))}
	}
	return nil
}
