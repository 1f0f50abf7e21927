package redisdriver

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/redis/go-redis/v9"
)

//go:embed acquire_all.lua
var acquireAllLua string

var acquireAllScript = newScript("acquire_all", queueLibLua, acquireAllLua)

var _ driver.MultiAcquirer = (*Driver)(nil)

// Atomic implements driver.MultiAcquirer. One server (plain or behind
// Sentinel) runs a script on any keys. A Cluster runs it only on keys of
// one slot: lock names whose text before their first '}' is the same —
// names that start with the same hash tag, like "{order:42}:items" and
// "{order:42}:payment" (every key of a lock is hashed on "{" + name + "}",
// so the slot is that of the name up to its first '}'). A Ring shards keys
// by a hash of its own: never atomic.
func (d *Driver) Atomic(keys []string) bool {
	if _, ring := d.rdb.(*redis.Ring); ring {
		return false
	}
	if d.cluster == nil || len(keys) == 0 {
		return true
	}
	s := slot(d.lockKey(keys[0]))
	for _, k := range keys[1:] {
		if slot(d.lockKey(k)) != s {
			return false
		}
	}
	return true
}

// AcquireAll implements driver.MultiAcquirer with one call of
// acquire_all.lua: one round trip for every lock, and as acquire.lua, a
// retried call finds its own locks and answers their tokens.
func (d *Driver) AcquireAll(ctx context.Context, reqs []driver.AcquireRequest) (driver.AcquireAllResult, error) {
	if err := d.checkAll(reqs); err != nil {
		return driver.AcquireAllResult{}, err
	}
	keys := make([]string, 0, 2*len(reqs))
	args := make([]any, 1, 1+3*len(reqs))
	args[0] = "0"
	if reqs[0].Waiting {
		args[0] = "1"
	}
	if d.ack != nil {
		args[0] = args[0].(string) + "a" // a retry writes its locks again, for the WAIT (acquire_all.lua)
	}
	now := time.Now()
	for _, r := range reqs {
		keys = append(keys, d.lockKey(r.Key), d.lastKey(r.Key))
		args = append(args, idPrefix(r.ID), r.TTL.Milliseconds(), d.valueRest(now, r.Owner))
	}
	reply, err := d.run(ctx, acquireAllScript, keys, args...).Result()
	if err != nil {
		return driver.AcquireAllResult{}, err
	}
	switch r := reply.(type) {
	case string: // acquired: the tokens
		fields := strings.Fields(r)
		if len(fields) != len(reqs) {
			return driver.AcquireAllResult{}, fmt.Errorf("acquire all script: %d tokens for %d locks", len(fields), len(reqs))
		}
		tokens := make([]uint64, len(fields))
		for i, f := range fields {
			if tokens[i], err = parseToken(f); err != nil {
				return driver.AcquireAllResult{}, fmt.Errorf("acquire all script: %w", err)
			}
		}
		return driver.AcquireAllResult{Acquired: true, Tokens: tokens}, nil
	case []any: // busy: {index from 1, PTTL}
		if len(r) == 2 {
			i, ok1 := r[0].(int64)
			pttl, ok2 := r[1].(int64)
			if ok1 && ok2 && i >= 1 && int(i) <= len(reqs) {
				return driver.AcquireAllResult{Busy: int(i) - 1, RetryAfter: retryAfter(pttl)}, nil
			}
		}
	}
	return driver.AcquireAllResult{}, fmt.Errorf("acquire all script: unexpected reply %#v", reply)
}

// checkAll rejects what AcquireAll cannot take: no requests, more than
// MaxBatch, keys of several slots, a bad id or TTL, a key named twice.
func (d *Driver) checkAll(reqs []driver.AcquireRequest) error {
	if len(reqs) == 0 || len(reqs) > MaxBatch {
		return fmt.Errorf("%w: acquire all of %d locks (must be 1 to %d)", driver.ErrInvalid, len(reqs), MaxBatch)
	}
	seen := make(map[string]bool, len(reqs))
	keys := make([]string, len(reqs))
	for i, r := range reqs {
		if err := checkID(r.ID); err != nil {
			return err
		}
		if err := checkTTL(r.TTL); err != nil {
			return err
		}
		if seen[r.Key] {
			return fmt.Errorf("%w: acquire all: key %q named twice", driver.ErrInvalid, r.Key)
		}
		seen[r.Key] = true
		keys[i] = r.Key
	}
	if !d.Atomic(keys) {
		return fmt.Errorf("%w: acquire all: the keys are not in one Cluster slot", driver.ErrInvalid)
	}
	return nil
}
