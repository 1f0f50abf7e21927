package redisdriver

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/dlockio/dlock/driver"
)

// Acquire implements driver.Driver with one call of acquire.lua, which
// takes a free lock and issues its token from the server clock and the
// last released lock's token (see the script for why tokens increase).
//
// The lock value starts with the request's id, so a repeated request —
// go-redis resends a command whose reply was lost — finds its own lock and
// answers Acquired with the token it was issued, instead of busy.
func (d *Driver) Acquire(ctx context.Context, req driver.AcquireRequest) (driver.AcquireResult, error) {
	return d.acquire(ctx, req, 0)
}

// acquire is Acquire with a floor for the token issued (0 for none): a
// quorum proposes one so that its masters issue the same token
// (quorum.go). The floor goes to acquire.lua as a fifth argument only when
// set or when a sixth follows, so the single Driver's request is unchanged.
func (d *Driver) acquire(ctx context.Context, req driver.AcquireRequest, floor uint64) (driver.AcquireResult, error) {
	if err := checkID(req.ID); err != nil {
		return driver.AcquireResult{}, err
	}
	if err := checkTTL(req.TTL); err != nil {
		return driver.AcquireResult{}, err
	}
	waiting := "0"
	if req.Waiting {
		waiting = "1"
	}
	lock, last := d.lockAndLast(req.Key)
	args := []any{idPrefix(req.ID), req.TTL.Milliseconds(), d.valueRest(time.Now(), req.Owner), waiting}
	if floor != 0 || d.ack != nil {
		args = append(args, strconv.FormatUint(floor, 10))
	}
	if d.ack != nil {
		args = append(args, "1") // a retry writes its lock again, for the WAIT (acquire.lua)
	}
	reply, err := d.run(ctx, acquireScript, []string{lock, last, lock + queueSuffix}, args...).Result()
	if err != nil {
		return driver.AcquireResult{}, err
	}
	switch r := reply.(type) {
	case string: // acquired: the token
		tok, err := parseToken(r)
		if err != nil {
			return driver.AcquireResult{}, fmt.Errorf("acquire script: %w", err)
		}
		return driver.AcquireResult{Acquired: true, Token: tok}, nil
	case int64: // busy: the holder's PTTL
		return driver.AcquireResult{RetryAfter: retryAfter(r)}, nil
	}
	return driver.AcquireResult{}, fmt.Errorf("acquire script: unexpected reply %#v", reply)
}

// retryAfter maps a PTTL answer to AcquireResult.RetryAfter.
func retryAfter(pttl int64) time.Duration {
	switch {
	case pttl == ttlGone:
		return 0 // expired meanwhile: try again at once
	case pttl < 0:
		return -1 // no expiry, or not asked for: unknown
	}
	return time.Duration(pttl) * time.Millisecond
}
