package main

import (
	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/redisdriver"
)

// The dlock-inline peer is dlock with the Redis driver claiming to be
// ContextAware, so that the engine makes every driver call on the caller's
// goroutine instead of handing it to another one: a floor, which shows
// what that hand-off costs. Not a usable lock: its Lock no longer returns
// when ctx ends while Redis does not answer (go-redis does not abort a
// read on cancellation), the promise the hand-off keeps.
type inlineDriver struct{ *redisdriver.Driver }

func (d inlineDriver) Capabilities() driver.Capabilities {
	c := d.Driver.Capabilities()
	c.ContextAware = true
	return c
}

func newInlineDlockWorker(e env) (worker, error) {
	rdb := newRedisClient(e.redisAddr)
	drv, err := redisdriver.New(rdb)
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	c, err := dlock.New(inlineDriver{drv})
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	return &dlockWorker{rdb: rdb, c: c, ttl: e.ttl}, nil
}
