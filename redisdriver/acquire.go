package redisdriver

import (
	"context"
	"fmt"
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
	v, err := acquireScript.run(ctx, d.rdb, []string{d.lockKey(req.Key), d.lastKey(req.Key)},
		idPrefix(req.ID), req.TTL.Milliseconds(), d.valueRest(time.Now(), req.Owner), waiting).Int64Slice()
	if err != nil {
		return driver.AcquireResult{}, err
	}
	if len(v) != 2 {
		return driver.AcquireResult{}, fmt.Errorf("acquire script: unexpected reply %v", v)
	}
	switch v[0] {
	case replyAcquired:
		if v[1] <= 0 {
			return driver.AcquireResult{}, fmt.Errorf("acquire script: token %d", v[1])
		}
		return driver.AcquireResult{Acquired: true, Token: uint64(v[1])}, nil
	case replyBusy:
		return driver.AcquireResult{RetryAfter: retryAfter(v[1])}, nil
	}
	return driver.AcquireResult{}, fmt.Errorf("acquire script: unexpected reply %v", v)
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
