package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dlockio/dlock/driver"
)

// Group is the holds of one multi-key acquisition (multi.go), which users
// see as one lease: it ends when any of its holds ends.
//
// Its holds share one inner context, so the end of any of them — the
// renewal loop finding one lost, a deadline noticed by Err, Close —
// closes the group's Done in the same call, with that hold's end reason as
// cause. The other holds are then ended and released off that path, by a
// function context.AfterFunc runs (see watch).
type Group struct {
	e     *Engine
	holds []*Hold // in the order of the request
	renew bool    // renew the holds every TTL/3 until released

	inner  context.Context
	cancel context.CancelCauseFunc
	stop   func() bool // stops watch's AfterFunc

	mu         sync.Mutex
	unlockDone bool
	unlockErr  error
	unlock     unlockTurn
}

func (e *Engine) newGroup(ctx context.Context, n int, renew bool) *Group {
	g := &Group{e: e, holds: make([]*Hold, 0, n), renew: renew}
	g.inner, g.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	return g
}

// Holds returns the group's holds, in the order of the request.
func (g *Group) Holds() []*Hold { return g.holds }

// TTL returns the holds' time-to-live in the store (one TTL for all).
func (g *Group) TTL() time.Duration { return g.holds[0].TTL() }

// Done returns a channel closed when the group ends.
func (g *Group) Done() <-chan struct{} { return g.inner.Done() }

// Context returns a context that is done when the group ends; its Err
// checks every hold's deadline on every call.
func (g *Group) Context() context.Context { return leaseContext[*Group]{g} }

// Deadline returns the earliest validity deadline of the holds.
func (g *Group) Deadline() time.Time {
	d := g.holds[0].Deadline()
	for _, h := range g.holds[1:] {
		if hd := h.Deadline(); hd.Before(d) {
			d = hd
		}
	}
	return d
}

// Err returns nil while every hold is valid, else why the group ended:
// the end reason of the first hold that ended.
func (g *Group) Err() error {
	if err := context.Cause(g.inner); err != nil {
		return err
	}
	for _, h := range g.holds {
		if err := h.Err(); err != nil {
			// h.end cancelled g.inner, or is about to: make sure Done is
			// closed before Err reports.
			g.cancel(err)
			return context.Cause(g.inner)
		}
	}
	return nil
}

// watch starts ending the group as a unit once it is complete: when one
// hold ends as lost, the others end too, stop being renewed and are
// released in the background. A release or Close ends them itself.
func (g *Group) watch() {
	g.stop = context.AfterFunc(g.inner, func() {
		cause := context.Cause(g.inner)
		if errors.Is(cause, ErrReleased) || errors.Is(cause, ErrClosed) {
			return
		}
		for _, h := range g.holds {
			g.e.renewer.remove(h)
			// Lost, counted and in the events like any lost lease: no
			// Close or Release reports its end later.
			if h.lose(LostGroup) {
				g.e.releaser.add(h.releaseRequest())
			}
		}
	})
}

// abandon ends the holds taken so far and releases them, bounded by ctx
// (or in the background if it is done): a multi-key acquisition that
// failed leaves nothing held.
func (g *Group) abandon(ctx context.Context) {
	if len(g.holds) > 0 {
		_ = g.e.ReleaseGroup(ctx, g)
	}
	g.cancel(ErrReleased)
}

// ReleaseGroup releases every hold of g still held, in as few driver calls
// as the batch limit allows (one, usually), and ends g either way. Its
// answers are Release's: nil when every lock was released, ErrNotHeld
// (naming the keys) when one had been lost — the others are released all
// the same — a backend or ctx error, in which case the releases are also
// queued in the background and calling again retries. A definitive answer
// is remembered.
func (e *Engine) ReleaseGroup(ctx context.Context, g *Group) error {
	g.mu.Lock()
	answered := g.unlockDone
	g.mu.Unlock()
	if answered {
		return e.releaseGroup(ctx, g) // the remembered answer: nothing to observe
	}
	defer e.observing()()
	start := e.observeStart()
	err := e.releaseGroup(ctx, g)
	e.releasedGroup(ctx, g, start, err)
	return err
}

func (e *Engine) releaseGroup(ctx context.Context, g *Group) error {
	_ = g.Err() // ends a hold past its deadline as lost
	g.mu.Lock()
	answered := g.unlockDone
	g.mu.Unlock()
	if !answered {
		giveBack, err := g.unlock.take(ctx, e, groupName(g))
		if err != nil {
			return err
		}
		defer giveBack()
	}
	g.mu.Lock()
	if g.unlockDone {
		err := g.unlockErr
		g.mu.Unlock()
		return err
	}
	g.mu.Unlock()
	lost := g.lostKeys()
	if !e.beginOp() {
		return ErrClosed
	}
	defer e.ops.Done()
	if g.stop != nil {
		g.stop()
	}
	reqs := make([]driver.ReleaseRequest, len(g.holds))
	for i, h := range g.holds {
		e.renewer.remove(h)
		h.end(ErrReleased)
		reqs[i] = h.releaseRequest()
	}
	g.cancel(ErrReleased)
	name := groupName(g)
	background := func() {
		for _, r := range reqs {
			e.releaser.add(r)
		}
	}
	if ctx == nil {
		background()
		return fmt.Errorf("%w: unlock %s: nil context (released in the background)", driver.ErrInvalid, name)
	}
	if ctx.Err() != nil {
		background()
		return ctxError("unlock", name, ctx.Err())
	}
	lost, err := e.releaseBatches(ctx, name, reqs, lost)
	if err != nil {
		return err
	}
	var answer error
	if len(lost) > 0 {
		answer = fmt.Errorf("%w: %s", ErrNotHeld, quoteAll(lost))
	}
	g.mu.Lock()
	g.unlockDone, g.unlockErr = true, answer
	g.mu.Unlock()
	return answer
}

// lostKeys returns the keys of g's holds that were lost before its Unlock.
func (g *Group) lostKeys() []string {
	var lost []string
	for _, h := range g.holds {
		h.mu.Lock()
		if errors.Is(h.reason, ErrLost) {
			lost = append(lost, h.key)
		}
		h.mu.Unlock()
	}
	return lost
}

// releaseBatches releases a group's reqs in driver batches and returns
// lost with the keys the store no longer held added. A batch that fails
// leaves it and the rest to the background releaser.
func (e *Engine) releaseBatches(ctx context.Context, name string, reqs []driver.ReleaseRequest, lost []string) ([]string, error) {
	for start := 0; start < len(reqs); start += e.caps.MaxBatch {
		batch := reqs[start:min(start+e.caps.MaxBatch, len(reqs))]
		res, err := call(e, ctx, func(ctx context.Context) ([]driver.ReleaseResult, error) {
			return e.drv.Release(ctx, batch)
		}, nil)
		if err == nil && len(res) != len(batch) {
			err = fmt.Errorf("driver answered %d results for %d releases", len(res), len(batch))
		}
		if err != nil {
			for _, r := range reqs[start:] {
				e.releaser.add(r)
			}
			switch {
			case ctx.Err() != nil:
				return nil, ctxError("unlock", name, ctx.Err())
			case e.isClosed():
				return nil, ErrClosed
			}
			return nil, WrapBackend("unlock", name, err)
		}
		for i, r := range res {
			if r == driver.NotHeld && !slices.Contains(lost, batch[i].Key) {
				lost = append(lost, batch[i].Key)
			}
		}
	}
	return lost, nil
}

// groupName names g's keys in errors (which quote it).
func groupName(g *Group) string {
	keys := make([]string, len(g.holds))
	for i, h := range g.holds {
		keys[i] = h.key
	}
	return strings.Join(keys, ", ")
}

func quoteAll(keys []string) string {
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", k)
	}
	return b.String()
}

func (g *Group) base() (context.Context, context.CancelCauseFunc) { return g.inner, g.cancel }
