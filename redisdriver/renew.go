package redisdriver

import (
	"context"
	"fmt"
	"strings"

	"github.com/dlockio/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// Renew implements driver.Driver: one renew script call per Cluster slot
// (one call in total otherwise), all calls sent in one pipeline.
func (d *Driver) Renew(ctx context.Context, reqs []driver.RenewRequest) ([]bool, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	groups := d.groupBySlot(reqs)
	keys := make([][]string, len(groups))
	args := make([][]any, len(groups))
	for gi, g := range groups {
		keys[gi] = make([]string, len(g))
		args[gi] = make([]any, 0, 2*len(g))
		for i, ri := range g {
			keys[gi][i] = d.lockKey(reqs[ri].Key)
			args[gi] = append(args[gi], idPrefix(reqs[ri].ID), reqs[ri].TTL.Milliseconds())
		}
	}

	// EVAL with the script body, not EVALSHA: the body costs a few hundred
	// bytes per batch of up to a thousand leases, and it saves the extra
	// NOSCRIPT round trip after every restart or failover — the moment a
	// renewal is most likely to be racing its deadline.
	pipe := d.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(groups))
	for gi := range groups {
		cmds[gi] = pipe.Eval(ctx, renewLua, keys[gi], args[gi]...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	held := make([]bool, len(reqs))
	for gi, g := range groups {
		v, err := cmds[gi].Int64Slice()
		if err != nil {
			return nil, err
		}
		if len(v) != len(g) {
			return nil, fmt.Errorf("renew script: %d answers for %d keys", len(v), len(g))
		}
		for i, ri := range g {
			held[ri] = v[i] == 1
		}
	}
	return held, nil
}

// groupBySlot returns indexes into reqs, grouped so that each group's keys
// live in one Cluster slot. Outside Cluster mode every key is one group.
func (d *Driver) groupBySlot(reqs []driver.RenewRequest) [][]int {
	if d.cluster == nil {
		all := make([]int, len(reqs))
		for i := range all {
			all[i] = i
		}
		return [][]int{all}
	}
	bySlot := make(map[uint16]int) // slot -> group index
	var groups [][]int
	for i, r := range reqs {
		s := slot(d.lockKey(r.Key))
		gi, ok := bySlot[s]
		if !ok {
			gi = len(groups)
			bySlot[s] = gi
			groups = append(groups, nil)
		}
		groups[gi] = append(groups[gi], i)
	}
	return groups
}

// slot computes a key's Redis Cluster hash slot: CRC16 (XMODEM) of its hash
// tag, or of the whole key if it has none, modulo 16384.
func slot(key string) uint16 {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			key = key[open+1 : open+1+end]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}
