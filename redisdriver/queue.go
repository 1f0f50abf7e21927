package redisdriver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/redis/go-redis/v9"
)

var (
	_ driver.Queuer       = (*Driver)(nil)
	_ driver.QueueBatcher = (*Driver)(nil)
)

const (
	// inboxInfix is between the prefix and an inbox in a grant channel's name.
	inboxInfix = "inbox:"
	// queueSuffix is after the lock key: the name's queue marker.
	queueSuffix = ":q"
)

func (d *Driver) inboxChannel(inbox string) string { return d.prefix + inboxInfix + inbox }

// Enqueue implements driver.Queuer with one call of enqueue.lua; see
// queue_lib.lua for the keys of a name and how grants are made.
func (d *Driver) Enqueue(ctx context.Context, req driver.QueueRequest) (driver.QueueResult, error) {
	if err := checkQueueRequest(req); err != nil {
		return driver.QueueResult{}, err
	}
	cl := d.enqueueCall(req)
	res, err := enqueueAnswer(req, d.run(ctx, cl.s, cl.keys, cl.args...))
	d.waiters.answered(req, res, err)
	return res, err
}

// EnqueueBatch implements driver.QueueBatcher: one enqueue.lua call per
// request, all in one pipeline (one call alone goes without one).
func (d *Driver) EnqueueBatch(ctx context.Context, reqs []driver.QueueRequest) ([]driver.QueueResult, []error) {
	results, errs := make([]driver.QueueResult, len(reqs)), make([]error, len(reqs))
	calls, of := make([]*call, 0, len(reqs)), make([]int, 0, len(reqs))
	for i, req := range reqs {
		if errs[i] = checkQueueRequest(req); errs[i] == nil {
			calls, of = append(calls, d.enqueueCall(req)), append(of, i)
		}
	}
	switch len(calls) {
	case 0:
		return results, errs
	case 1:
		_ = d.runOne(ctx, calls[0]) // its error is in its reply
	default:
		_ = d.runCalls(ctx, calls) // each call's error is in its reply
	}
	for j, cl := range calls {
		i := of[j]
		results[i], errs[i] = enqueueAnswer(reqs[i], cl.reply)
		d.waiters.answered(reqs[i], results[i], errs[i])
	}
	return results, errs
}

// enqueueCall is the enqueue.lua call of req.
func (d *Driver) enqueueCall(req driver.QueueRequest) *call {
	wait := "0"
	if req.Wait {
		wait = "1"
	}
	maxWaiters := ""
	if req.MaxWaiters > 0 {
		maxWaiters = strconv.Itoa(req.MaxWaiters)
	}
	return &call{s: enqueueScript, keys: []string{d.lockKey(req.Key)}, args: []any{
		idPrefix(req.ID), req.TTL.Milliseconds(), d.valueRest(time.Now(), req.Owner),
		modeCode(req.Mode) + wait + maxWaiters + sep + strconv.Itoa(req.Limit) + sep + req.Inbox,
	}}
}

// enqueueAnswer reads enqueue.lua's reply to req.
func enqueueAnswer(req driver.QueueRequest, cmd *redis.Cmd) (driver.QueueResult, error) {
	reply, err := cmd.Result()
	if err != nil {
		return driver.QueueResult{}, refusal(req, err)
	}
	switch r := reply.(type) {
	case int64:
		if r <= replyQueued-ttlGone { // queued, and the retry time
			return driver.QueueResult{Queued: true, RetryAfter: retryAfter(replyQueued - r)}, nil
		}
		return driver.QueueResult{RetryAfter: retryAfter(r)}, nil // refused: the retry time
	case string:
		tok, err := parseToken(r)
		if err != nil {
			return driver.QueueResult{}, fmt.Errorf("enqueue script: %w", err)
		}
		return driver.QueueResult{Granted: true, Token: tok}, nil
	}
	return driver.QueueResult{}, fmt.Errorf("enqueue script: unexpected reply %#v", reply)
}

// The error replies of enqueue.lua that refuse a request.
const (
	replyFull  = "DLOCK_FULL"  // the queue has MaxWaiters waiters
	replyLimit = "DLOCK_LIMIT" // then the name's permit limit
)

// refusal turns enqueue.lua's error replies that refuse req into the
// driver's errors; any other error is returned as it is.
func refusal(req driver.QueueRequest, err error) error {
	switch {
	case redis.HasErrorPrefix(err, replyFull):
		return fmt.Errorf("%w: redisdriver: %q has %d waiters", driver.ErrQueueFull, req.Key, req.MaxWaiters)
	case redis.HasErrorPrefix(err, replyLimit):
		theirs := strings.TrimSpace(strings.TrimPrefix(err.Error(), replyLimit))
		return fmt.Errorf("%w: redisdriver: %d permits asked of %q, whose holders and waiters have %s",
			driver.ErrLimitMismatch, req.Limit, req.Key, theirs)
	}
	return err
}

func checkQueueRequest(req driver.QueueRequest) error {
	if err := checkID(req.ID); err != nil {
		return err
	}
	if err := checkTTL(req.TTL); err != nil {
		return err
	}
	switch {
	case req.Mode < driver.ModeExclusive || req.Mode > driver.ModePermit:
		return fmt.Errorf("%w: redisdriver: unknown mode %v", driver.ErrInvalid, req.Mode)
	case req.Mode == driver.ModePermit && req.Limit < 1:
		return fmt.Errorf("%w: redisdriver: permit limit %d", driver.ErrInvalid, req.Limit)
	case req.MaxWaiters < 0:
		return fmt.Errorf("%w: redisdriver: most waiters %d", driver.ErrInvalid, req.MaxWaiters)
	case req.Wait && (req.Inbox == "" || strings.Contains(req.Inbox, sep)):
		return fmt.Errorf("%w: redisdriver: inbox %q (must be non-empty, without %q)", driver.ErrInvalid, req.Inbox, sep)
	}
	return nil
}

func modeCode(m driver.Mode) string { return strconv.Itoa(int(m)) }

// leaseTag is what the queue scripts compare a lease's record with: 'W'
// for a waiter place, 'H' and the mode for a holder.
func leaseTag(k driver.Kind) string {
	switch k {
	case driver.KindRead:
		return "H" + modeCode(driver.ModeShared)
	case driver.KindPermit:
		return "H" + modeCode(driver.ModePermit)
	}
	return "W"
}

// WatchGrants implements driver.Queuer: a pub/sub subscription to the
// inbox's channel, confirmed as release subscriptions are (watch.go). When
// it is subscribed again after a lost connection, every waiter the Driver
// queued with the inbox is woken (queuedWaiters): a grant announced
// meanwhile was lost.
func (d *Driver) WatchGrants(ctx context.Context, inbox string, onGrant func(driver.Grant)) (driver.GrantWatcher, error) {
	if onGrant == nil || inbox == "" {
		return nil, fmt.Errorf("%w: redisdriver: grant watcher needs an inbox and a callback", driver.ErrInvalid)
	}
	ch := d.inboxChannel(inbox)
	w := d.newWatcher(func(channel string) string { return channel }, func(channel, payload string) {
		if channel != ch {
			return
		}
		if g, ok := parseGrant(payload); ok {
			onGrant(g)
		}
	}, func([]string) {
		for _, g := range d.waiters.wakeUps(inbox) {
			onGrant(g)
		}
	})
	if err := w.Add(ctx, ch); err != nil {
		_ = w.Close() // the inbox's waiters stay known for the next subscription
		return nil, err
	}
	return grantWatcher{watcher: w, inbox: inbox}, nil
}

// parseGrant reads "<id>" SEP "<token>" SEP "<name>".
func parseGrant(p string) (driver.Grant, bool) {
	id, rest, ok := strings.Cut(p, sep)
	if !ok {
		return driver.Grant{}, false
	}
	t, name, ok := strings.Cut(rest, sep)
	if !ok {
		return driver.Grant{}, false
	}
	tok, err := parseToken(t)
	if err != nil {
		return driver.Grant{}, false
	}
	return driver.Grant{Key: name, ID: id, Token: tok}, true
}

// InspectQueue implements driver.Inspector with the reads of readQueue. The
// leases and places that expired are not shown.
func (d *Driver) InspectQueue(ctx context.Context, key string) (driver.QueueInfo, bool, error) {
	reply, err := d.readQueue(ctx, d.lockKey(key))
	if err != nil {
		return driver.QueueInfo{}, false, err
	}
	info := driver.QueueInfo{Key: key, Holders: []driver.HolderInfo{}, Waiters: []driver.WaiterInfo{}}
	if v, ok := reply[0].(string); ok && reply[1] != int64(-2) {
		var li driver.LockInfo
		if err := parseValue(v, &li); err != nil {
			return driver.QueueInfo{}, false, err
		}
		pttl, _ := reply[1].(int64)
		id, _, _ := strings.Cut(v, sep)
		info.Holders = append(info.Holders, driver.HolderInfo{ID: id, Mode: driver.ModeExclusive,
			Token: li.Token, Owner: li.Owner, TTL: time.Duration(pttl) * time.Millisecond})
	}
	now, _ := reply[2].(int64)
	order, _ := reply[3].([]any)
	exps := pairs(reply[4])
	data := pairs(reply[5])
	left := func(id string) time.Duration {
		ms, _ := strconv.ParseInt(exps[id], 10, 64)
		return time.Duration(ms-now) * time.Millisecond
	}
	for id, rec := range data {
		if !strings.HasPrefix(rec, "H") {
			continue
		}
		h, err := parseHolder(id, rec)
		if err != nil {
			return driver.QueueInfo{}, false, err
		}
		if h.TTL = left(id); h.TTL <= 0 {
			continue // expired, still on record until a call settles the name
		}
		info.Holders = append(info.Holders, h)
	}
	for _, o := range order {
		id, _ := o.(string)
		if !strings.HasPrefix(data[id], "W") {
			continue // its record went, or it was granted between the reads
		}
		w, exp, err := parseWaiter(id, data[id])
		if err != nil {
			return driver.QueueInfo{}, false, err
		}
		if exp <= now {
			// Its place expired behind a live head: out of the queue,
			// its entry goes when it reaches either end or its Client
			// comes back (queue_lib.lua).
			continue
		}
		w.TTL = time.Duration(exp-now) * time.Millisecond
		info.Waiters = append(info.Waiters, w)
	}
	slices.SortFunc(info.Holders, func(a, b driver.HolderInfo) int {
		return cmp.Or(cmp.Compare(a.Token, b.Token), strings.Compare(a.ID, b.ID))
	})
	return info, len(info.Holders)+len(info.Waiters) > 0, nil
}

// pairs turns a flat [k1 v1 k2 v2 ...] reply into a map.
func pairs(v any) map[string]string {
	a, _ := v.([]any)
	m := make(map[string]string, len(a)/2)
	for i := 0; i+1 < len(a); i += 2 {
		k, _ := a[i].(string)
		val, _ := a[i+1].(string)
		m[k] = val
	}
	return m
}

// parseHolder reads "H<mode>" SEP "<token>" SEP "<since>" SEP "<owner>".
func parseHolder(id, rec string) (driver.HolderInfo, error) {
	mode, rest, ok := strings.Cut(rec[1:], sep)
	m, err := strconv.Atoi(mode)
	if !ok || err != nil {
		return driver.HolderInfo{}, fmt.Errorf("malformed holder record %q", rec)
	}
	var li driver.LockInfo
	if err := parseValue(id+sep+rest, &li); err != nil {
		return driver.HolderInfo{}, err
	}
	return driver.HolderInfo{ID: id, Mode: driver.Mode(m), Token: li.Token, Owner: li.Owner}, nil
}

// parseWaiter reads "W<mode>" SEP "<expiry ms>" SEP "<limit>" SEP "<inbox>"
// SEP "<since>" SEP "<owner>", and returns the expiry too.
func parseWaiter(id, rec string) (driver.WaiterInfo, int64, error) {
	parts := strings.SplitN(strings.TrimPrefix(rec, "W"), sep, 6)
	if len(parts) != 6 || !strings.HasPrefix(rec, "W") {
		return driver.WaiterInfo{}, 0, fmt.Errorf("malformed waiter record %q", rec)
	}
	m, err1 := strconv.Atoi(parts[0])
	exp, err2 := strconv.ParseInt(parts[1], 10, 64)
	limit, err3 := strconv.Atoi(parts[2])
	if err := errors.Join(err1, err2, err3); err != nil {
		return driver.WaiterInfo{}, 0, fmt.Errorf("malformed waiter record %q: %w", rec, err)
	}
	w := driver.WaiterInfo{ID: id, Mode: driver.Mode(m), Limit: limit}
	if err := json.Unmarshal([]byte(parts[5]), &w.Owner); err != nil {
		return driver.WaiterInfo{}, 0, fmt.Errorf("malformed waiter record %q: %w", rec, err)
	}
	return w, exp, nil
}
