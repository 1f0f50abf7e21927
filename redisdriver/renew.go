package redisdriver

import (
	"context"
	"strings"

	"github.com/dlockio/dlock/driver"
)

// Renew implements driver.Driver: per Cluster slot (one in total
// otherwise) one renew.lua call for exclusive locks and one
// queue_renew.lua call for queued leases, all sent in one pipeline.
func (d *Driver) Renew(ctx context.Context, reqs []driver.RenewRequest) ([]bool, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	for _, r := range reqs {
		if err := checkLease(r.Kind, r.ID); err != nil {
			return nil, err
		}
		if err := checkTTL(r.TTL); err != nil {
			return nil, err
		}
	}
	held := make([]bool, len(reqs))
	err := d.runBatch(ctx, batch{
		n:      len(reqs),
		key:    func(i int) string { return reqs[i].Key },
		isLock: func(i int) bool { return reqs[i].Kind == driver.KindLock },
		lockCall: func(idx []int) *call {
			cl := &call{s: renewScript, keys: make([]string, len(idx)), args: make([]any, 0, 2*len(idx))}
			for i, ri := range idx {
				cl.keys[i] = d.lockKey(reqs[ri].Key)
				cl.args = append(cl.args, idPrefix(reqs[ri].ID), reqs[ri].TTL.Milliseconds())
			}
			return cl
		},
		queueCall: func(idx []int) *call {
			cl := &call{s: queueRenewScript, keys: make([]string, len(idx)), args: make([]any, 0, 3*len(idx))}
			for i, ri := range idx {
				cl.keys[i] = d.lockKey(reqs[ri].Key)
				cl.args = append(cl.args, reqs[ri].ID, reqs[ri].TTL.Milliseconds(), leaseTag(reqs[ri].Kind))
			}
			return cl
		},
	}, func(i int, digit byte) error {
		held[i] = int(digit-'0') == replyExtended
		return nil
	})
	if err != nil {
		return nil, err
	}
	return held, nil
}

// groupBySlot returns the indexes 0..n-1 grouped so that each group's
// keys (key(i)) live in one Cluster slot, in order of first appearance.
// Outside Cluster mode all are one group.
func (d *Driver) groupBySlot(n int, key func(int) string) [][]int {
	if d.cluster == nil {
		all := make([]int, n)
		for i := range all {
			all[i] = i
		}
		return [][]int{all}
	}
	bySlot := make(map[uint16]int) // slot -> group index
	var groups [][]int
	for i := range n {
		s := slot(d.lockKey(key(i)))
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
