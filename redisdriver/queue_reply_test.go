package redisdriver

import (
	"context"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
)

// A queued request's retry time comes back as an integer (replyQueued
// minus it): the holder's remaining TTL for a waiter joining a held name,
// in both code modes, and a refused one's as the plain retry time.
func TestQueuedReplyCarriesRetry(t *testing.T) {
	for _, m := range codeModes {
		t.Run(m.name, func(t *testing.T) {
			srv := redisserver.Start(t)
			d := newDriver(t, srv.Client(t), m.opts...)
			ctx := context.Background()
			req := func(id string, wait bool) driver.QueueRequest {
				return driver.QueueRequest{Key: "k", ID: id, TTL: 10 * time.Second, Mode: driver.ModeExclusive,
					Wait: wait, Inbox: "in"}
			}
			if res, err := d.Enqueue(ctx, req("holder", true)); err != nil || !res.Granted {
				t.Fatalf("holder: %+v, %v", res, err)
			}
			for _, id := range []string{"w1", "w2"} { // the first creates the queue, the second joins it
				res, err := d.Enqueue(ctx, req(id, true))
				if err != nil || !res.Queued || res.RetryAfter <= 9*time.Second || res.RetryAfter > 10*time.Second {
					t.Fatalf("%s: %+v, %v; want queued, retry in (9s, 10s]", id, res, err)
				}
			}
			res, err := d.Enqueue(ctx, req("try", false))
			if err != nil || res.Queued || res.Granted || res.RetryAfter <= 9*time.Second || res.RetryAfter > 10*time.Second {
				t.Fatalf("refused: %+v, %v; want neither queued nor granted, retry in (9s, 10s]", res, err)
			}
		})
	}
}
