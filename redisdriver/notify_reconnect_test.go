package redisdriver_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/redis/go-redis/v9"
)

// rearmBound is how soon after its connection is back a waiter must have a
// lock whose announcement it missed. The target is 200 ms; the bound
// leaves room for a loaded machine and stays far below the renewal
// interval of the waiter's place (TTL/3, 10 s with the default TTL), which
// is how it learnt of the grant before.
const rearmBound = 2 * time.Second

// A waiter whose Client lost its connections while the lock was handed to
// it (its grant announced to nobody), or released for it (a plain Lock),
// gets the lock as soon as its Client is connected again: the driver wakes
// every waiter of a subscription that was lost, once it is subscribed
// again.
func TestWaiterWokenAfterReconnect(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    []dlock.LockOption
		channel string // what the waiter subscribes to
	}{
		{"fair", nil, redisdriver.DefaultPrefix + "inbox:*"},
		{"plain", []dlock.LockOption{dlock.WithoutFIFO()}, lockKey("rearm") + ":released"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redisserver.Start(t)
			p := redisserver.NewProxy(t, srv.Addr())
			a := newLocker(t, srv.Addr())
			b := newLocker(t, p.Addr())
			ctx := ctxTimeout(t, time.Minute)
			const name = "rearm"
			h := got(t)(a.Lock(ctx, name, tc.opts...))
			rdb := srv.Client(t)
			before := scriptCallsOn(t, rdb)
			ch := acquired(t, func() (*dlock.Lease, error) { return b.Lock(ctx, name, tc.opts...) })
			// b waits once it has subscribed and then asked again: a
			// waiter's second call comes after its subscription is
			// confirmed.
			deadline := time.Now().Add(10 * time.Second)
			for scriptCallsOn(t, rdb) < before+2 || !subscribed(t, rdb, tc.channel) {
				if time.Now().After(deadline) {
					t.Fatal("waiter not subscribed and waiting")
				}
				time.Sleep(5 * time.Millisecond) // polling interval, not a synchronisation
			}
			p.Refuse(true)
			p.CloseAll() // b's connections, its subscription's among them
			unlock(t, h)
			p.Refuse(false)
			back := time.Now()
			l := receive(t, ch, "waiter")
			took := time.Since(back)
			t.Logf("waiter has the lock %v after its connection is back", took.Round(time.Millisecond))
			if took > rearmBound {
				t.Errorf("waiter had the lock %v after its connection was back, want within %v", took, rearmBound)
			}
			if l.Token() <= h.Token() {
				t.Errorf("token %d not above %d", l.Token(), h.Token())
			}
			unlock(t, l)
		})
	}
}

// scriptCallsOn returns how many script calls the server of rdb has run.
func scriptCallsOn(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	info, err := rdb.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(info, "\n") {
		for _, cmd := range []string{"cmdstat_evalsha:calls=", "cmdstat_eval:calls=", "cmdstat_fcall:calls="} {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), cmd); ok {
				calls, _, _ := strings.Cut(rest, ",")
				c, _ := strconv.Atoi(calls)
				n += c
			}
		}
	}
	return n
}

// subscribed reports whether a client of the server of rdb is subscribed
// to a channel matching pattern.
func subscribed(t *testing.T, rdb *redis.Client, pattern string) bool {
	t.Helper()
	chans, err := rdb.PubSubChannels(t.Context(), pattern).Result()
	if err != nil {
		t.Fatal(err)
	}
	return len(chans) > 0
}
