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
		cl := calls[0]
		cl.reply = d.run(ctx, cl.s, cl.keys, cl.args...)
		if err := cl.reply.Err(); err != nil {
			return err
		}
	} else if err := d.runCalls(ctx, calls); err != nil {
		return err
	}
	for _, p := range parts {
		digits, err := replyDigits(p.cl, len(p.idx))
		if err != nil {
			return err
		}
		for i, ri := range p.idx {
			if err := answer(ri, digits[i]); err != nil {
				return fmt.Errorf("%s script: %w", p.cl.s.name, err)
			}
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
	cl := newCall([]int{0})
	cl.reply = d.run(ctx, cl.s, cl.keys, cl.args...)
	if err := cl.reply.Err(); err != nil {
		return err
	}
	digits, err := replyDigits(cl, 1)
	if err != nil {
		return err
	}
	if err := answer(0, digits[0]); err != nil {
		return fmt.Errorf("%s script: %w", cl.s.name, err)
	}
	return nil
}

// replyDigits returns the reply of a batch script: one digit per request.
func replyDigits(cl *call, n int) (string, error) {
	s, err := cl.reply.Text()
	if err != nil {
		return "", err
	}
	if len(s) != n {
		return "", fmt.Errorf("%s script: %d answers for %d keys", cl.s.name, len(s), n)
	}
	return s, nil
}
