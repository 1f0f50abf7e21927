package redisdriver

import (
	"context"
	"fmt"
)

// batch describes a batch of n requests for runBatch, by index.
type batch struct {
	n      int
	key    func(i int) string // request i's lock name
	isLock func(i int) bool   // request i is of an exclusive lock, not of a queued lease
	// lockCall and queueCall make the script call for the requests idx, all
	// of one slot: exclusive locks, and queued leases.
	lockCall, queueCall func(idx []int) *call
}

// runBatch sends a batch as Renew and Release do: per Cluster slot (one in
// total otherwise) one call for the exclusive locks and one for the queued
// leases, all in one pipeline. It hands answer every request's one-digit
// reply; an error from answer ends the batch, named after its script.
func (d *Driver) runBatch(ctx context.Context, b batch, answer func(i int, digit byte) error) error {
	if b.n == 1 {
		return d.runSingle(ctx, b, answer)
	}
	type part struct {
		cl  *call
		idx []int
	}
	var parts []part
	for _, g := range d.groupBySlot(b.n, b.key) {
		var locks, queued []int
		for _, ri := range g {
			if b.isLock(ri) {
				locks = append(locks, ri)
			} else {
				queued = append(queued, ri)
			}
		}
		if len(locks) > 0 {
			parts = append(parts, part{b.lockCall(locks), locks})
		}
		if len(queued) > 0 {
			parts = append(parts, part{b.queueCall(queued), queued})
		}
	}
	calls := make([]*call, len(parts))
	for i, p := range parts {
		calls[i] = p.cl
	}
	if len(calls) == 1 {
		// One script call (several requests in one slot): a pipeline would
		// only add its own work.
		if err := d.runOne(ctx, calls[0]); err != nil {
			return err
		}
	} else if err := d.runCalls(ctx, calls); err != nil {
		return err
	}
	for _, p := range parts {
		if err := answerAll(p.cl, p.idx, answer); err != nil {
			return err
		}
	}
	return nil
}

// runSingle is runBatch for a batch of one request, the common case (one
// lease released or renewed): one script call, without grouping by slot
// or a pipeline, which would only add their own work.
func (d *Driver) runSingle(ctx context.Context, b batch, answer func(i int, digit byte) error) error {
	newCall := b.queueCall
	if b.isLock(0) {
		newCall = b.lockCall
	}
	idx := []int{0}
	cl := newCall(idx)
	if err := d.runOne(ctx, cl); err != nil {
		return err
	}
	return answerAll(cl, idx, answer)
}

// runOne runs cl alone and returns its reply's error.
func (d *Driver) runOne(ctx context.Context, cl *call) error {
	cl.reply = d.run(ctx, cl.s, cl.keys, cl.args...)
	return cl.reply.Err()
}

// answerAll hands answer the one-digit reply of each request idx[i] from
// cl's reply, a batch script's: one digit per request.
func answerAll(cl *call, idx []int, answer func(i int, digit byte) error) error {
	s, err := cl.reply.Text()
	if err != nil {
		return err
	}
	if len(s) != len(idx) {
		return fmt.Errorf("%s script: %d answers for %d keys", cl.s.name, len(s), len(idx))
	}
	for i, ri := range idx {
		if err := answer(ri, s[i]); err != nil {
			return fmt.Errorf("%s script: %w", cl.s.name, err)
		}
	}
	return nil
}
