package redisdriver

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"strconv"
	"sync"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// Acquire implements driver.Driver.
//
// A lock name this driver has acquired before is taken with one pipeline
// of plain commands — SET NX PX, INCR of the fencing counter, GET, and PTTL
// when the caller will wait — instead of a script: on Redis 7 a script call
// costs the server a few microseconds before it runs anything, and every
// redis.call inside it, writes with an expiry most, a few more. The pipeline increments the counter even when the lock
// is busy; tokens still strictly increase from one holder to the next,
// because a holder's INCR runs before its release, and the next holder's
// after its own SET. On one server the commands of a pipeline run in order;
// in Cluster mode they are wrapped in MULTI/EXEC, because a slot migration
// could otherwise redirect the SET to another node and run it after the
// INCR. A new name (or one the driver has forgotten) goes through
// acquire.lua, which also seeds a missing counter in the same round trip.
//
// Both paths treat a lock that holds exactly this request's value as
// acquired: go-redis retries a command whose reply was lost, and the retry
// must not report our own lock as busy.
func (d *Driver) Acquire(ctx context.Context, req driver.AcquireRequest) (driver.AcquireResult, error) {
	value := req.ID + ":" + strconv.FormatInt(time.Now().UnixMilli(), 10) + ":" + d.ownerJSON(req.Owner)
	return d.acquire(ctx, req, value)
}

// acquire is Acquire with the lock value given, so tests can send the same
// request twice, as a client library's retry does.
func (d *Driver) acquire(ctx context.Context, req driver.AcquireRequest, value string) (driver.AcquireResult, error) {
	lock, fence := d.lockKey(req.Key), d.fenceKey(req.Key)
	if !d.known.has(req.Key) {
		res, err := d.acquireByScript(ctx, lock, fence, value, req.TTL)
		if err == nil {
			d.known.add(req.Key)
		}
		return res, err
	}
	var incr *redis.IntCmd
	var pttl *redis.DurationCmd
	var get *redis.StringCmd
	pipelined := d.rdb.Pipelined
	if d.cluster != nil {
		pipelined = d.rdb.TxPipelined
	}
	_, err := pipelined(ctx, func(p redis.Pipeliner) error {
		p.SetNX(ctx, lock, value, req.TTL)
		incr = p.Incr(ctx, fence)
		get = p.Get(ctx, lock)
		if req.Waiting {
			pttl = p.PTTL(ctx, lock)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) { // Nil: GET found no lock (it was freed meanwhile)
		return driver.AcquireResult{}, err
	}
	if get.Val() != value {
		var retry time.Duration
		if pttl != nil {
			retry = max(pttl.Val(), 0)
		}
		return driver.AcquireResult{RetryAfter: retry}, nil
	}
	token := incr.Val()
	if token >= unseeded {
		return driver.AcquireResult{Acquired: true, Token: uint64(token)}, nil
	}
	// The counter was lost since this driver last saw it: seed it (one more
	// round trip, only after a restart, failover or eviction).
	t, err := seedScript.Run(ctx, d.rdb, []string{lock, fence}, idPrefix(req.ID)).Int64()
	if errors.Is(err, redis.Nil) {
		return driver.AcquireResult{}, errors.New("lock lost while seeding its fencing counter")
	}
	if err != nil {
		return driver.AcquireResult{}, err
	}
	return driver.AcquireResult{Acquired: true, Token: uint64(t)}, nil
}

func (d *Driver) acquireByScript(ctx context.Context, lock, fence, value string, ttl time.Duration) (driver.AcquireResult, error) {
	v, err := acquireScript.Run(ctx, d.rdb, []string{lock, fence}, value, ttl.Milliseconds()).Int64Slice()
	if err != nil {
		return driver.AcquireResult{}, err
	}
	if len(v) != 2 {
		return driver.AcquireResult{}, fmt.Errorf("acquire script: unexpected reply %v", v)
	}
	if v[0] == 1 {
		return driver.AcquireResult{Acquired: true, Token: uint64(v[1])}, nil
	}
	return driver.AcquireResult{RetryAfter: max(time.Duration(v[1])*time.Millisecond, 0)}, nil
}

// maxKnownNames bounds the memory of nameSet.
const maxKnownNames = 4096

// nameSet remembers lock names the driver has acquired (or found held), so
// that their fencing counter exists and their next acquisition can use the
// pipeline. It is only a hint: the pipeline notices a lost counter by
// itself. Names are kept as 64-bit hashes; a collision merely sends a new
// name down the pipeline path, which then seeds its counter.
type nameSet struct {
	seed maphash.Seed
	mu   sync.Mutex
	m    map[uint64]struct{}
}

func newNameSet() *nameSet {
	return &nameSet{seed: maphash.MakeSeed(), m: make(map[uint64]struct{})}
}

func (s *nameSet) has(name string) bool {
	h := maphash.String(s.seed, name)
	s.mu.Lock()
	_, ok := s.m[h]
	s.mu.Unlock()
	return ok
}

func (s *nameSet) add(name string) {
	h := maphash.String(s.seed, name)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= maxKnownNames {
		for k := range s.m { // forget an arbitrary name
			delete(s.m, k)
			break
		}
	}
	s.m[h] = struct{}{}
}
