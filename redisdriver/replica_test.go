package redisdriver_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/redis/go-redis/v9"
)

// newSentinelLocker returns a Client through a Sentinel failover client of
// dep, with the driver's opts.
func newSentinelLocker(t *testing.T, dep *redisserver.SentinelDeployment, opts ...redisdriver.Option) *dlock.Client {
	t.Helper()
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    redisserver.SentinelName,
		SentinelAddrs: []string{dep.Sentinel.Addr()},
	})
	t.Cleanup(func() { _ = rdb.Close() })
	return newLockerWith(t, rdb, opts...)
}

// The failover hole, and its closing by WithReplicaAck, on a master with
// one replica and a Sentinel. A lock is taken on the master while the
// replication link is cut, so the replica never has it, and the Sentinel
// promotes the replica: without the option, a second Client takes the
// lock on the new master while the first still holds its lease (its
// token is higher: the fencing token is what tells them apart). With the
// option, that first acquisition fails (too few replicas acknowledged it)
// and never counts; with the link up, the replica has the lock, and it
// survives the failover.
func TestReplicaAckAndFailover(t *testing.T) {
	const name, ttl = "replicated", 30 * time.Second
	t.Run("without the option, the lock is granted twice", func(t *testing.T) {
		dep := redisserver.StartSentinel(t)
		ctx := ctxTimeout(t, 60*time.Second)
		dep.Link.Blackhole(true)
		first := got(t)(newSentinelLocker(t, dep).TryLock(ctx, name, dlock.WithTTL(ttl)))
		start := time.Now()
		dep.Failover(t)
		t.Logf("SENTINEL FAILOVER: the replica is the master %v later", time.Since(start).Round(time.Millisecond))
		second := got(t)(newSentinelLocker(t, dep).TryLock(ctx, name, dlock.WithTTL(ttl)))
		select {
		case <-first.Done():
			t.Fatalf("the first lease ended: %v", first.Err())
		default: // both Clients hold the lock: the hole
		}
		if second.Token() <= first.Token() {
			t.Fatalf("the second holder's token %d is not above the first's %d", second.Token(), first.Token())
		}
		t.Logf("two holders: tokens %d then %d (higher by %d)", first.Token(), second.Token(), second.Token()-first.Token())
		// The first holder learns of it at its next renewal, which finds the
		// lock another's: the overlap lasts until then, at most TTL/3.
		acquiredAgain := time.Now()
		waitDone(t, first, ttl/3+5*time.Second)
		if !errors.Is(first.Err(), dlock.ErrLockLost) {
			t.Fatalf("first lease ended with %v, want ErrLockLost", first.Err())
		}
		t.Logf("the first holder lost its lease %v after the second took the lock", time.Since(acquiredAgain).Round(time.Millisecond))
	})
	t.Run("with the option, an unreplicated acquisition fails", func(t *testing.T) {
		dep := redisserver.StartSentinel(t)
		ctx := ctxTimeout(t, 60*time.Second)
		a := newSentinelLocker(t, dep, redisdriver.WithReplicaAck(1, 200*time.Millisecond))
		dep.Link.Blackhole(true)
		_, err := a.TryLock(ctx, name, dlock.WithTTL(ttl))
		if !errors.Is(err, redisdriver.ErrReplicaAck) || !errors.Is(err, dlock.ErrBackend) {
			t.Fatalf("TryLock with the replica cut off: %v, want ErrReplicaAck and ErrBackend", err)
		}
		_, err = a.Lock(ctx, name, dlock.WithTTL(ttl))
		if !errors.Is(err, redisdriver.ErrReplicaAck) {
			t.Fatalf("Lock with the replica cut off: %v, want ErrReplicaAck", err)
		}
		// Released on the master, by its owner id, in the background.
		master := dep.Master.Client(t)
		eventuallyFree(t, master, name)
		dep.Failover(t)
		unlock(t, got(t)(newSentinelLocker(t, dep).TryLock(ctx, name, dlock.WithTTL(ttl))))
	})
	t.Run("with the option, the lock survives the failover", func(t *testing.T) {
		dep := redisserver.StartSentinel(t)
		ctx := ctxTimeout(t, 60*time.Second)
		first := got(t)(newSentinelLocker(t, dep, redisdriver.WithReplicaAck(1, time.Second)).TryLock(ctx, name, dlock.WithTTL(ttl)))
		dep.Failover(t)
		if _, err := newSentinelLocker(t, dep).TryLock(ctx, name, dlock.WithTTL(ttl)); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("second TryLock after the failover: %v, want ErrNotAcquired", err)
		}
		select {
		case <-first.Done():
			t.Fatalf("the lease ended: %v", first.Err())
		default:
		}
	})
}

// A renewal that the replica did not acknowledge does not move the
// lease's validity deadline: with the replication link cut, the lease is
// lost at its deadline (the master ran every renewal; only WAIT failed).
func TestUnacknowledgedRenewalsDoNotExtendTheLease(t *testing.T) {
	const name, ttl = "renewed", 1500 * time.Millisecond
	dep := redisserver.StartSentinel(t)
	ctx := ctxTimeout(t, 30*time.Second)
	l := got(t)(newSentinelLocker(t, dep, redisdriver.WithReplicaAck(1, time.Second)).TryLock(ctx, name, dlock.WithTTL(ttl)))
	dep.Link.Blackhole(true)
	waitDone(t, l, 10*time.Second)
	if err := l.Err(); !errors.Is(err, dlock.ErrLockLost) || !strings.Contains(err.Error(), "deadline passed") {
		t.Fatalf("lease ended with %v, want ErrLockLost at its validity deadline", err)
	}
}

// WithAOFAck sends WAITAOF, which Redis has from 7.2 on: a server without
// it refuses every acquisition, with an error that says so, and nothing
// stays held; one with it grants the lock (the master fsyncs with
// appendonly on).
func TestAOFAck(t *testing.T) {
	srv := redisserver.Start(t, redisserver.WithArgs("--appendonly", "yes"))
	ctx := ctxTimeout(t, 10*time.Second)
	c := newLockerWith(t, srv.Client(t), redisdriver.WithAOFAck(1, 0, time.Second))
	version := serverVersion(t, srv.Client(t))
	l, err := c.TryLock(ctx, "aof")
	if version < "7.2" { // versions compare as strings for 6.x and 7.x
		if !errors.Is(err, redisdriver.ErrReplicaAck) || !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("TryLock on Redis %s: %v, want ErrReplicaAck and ErrUnsupported", version, err)
		}
		eventuallyFree(t, srv.Client(t), "aof")
		return
	}
	unlock(t, got(t)(l, err))
}

// The options refuse what they cannot do with errors, never at the first
// lock.
func TestReplicaAckOptionsRefused(t *testing.T) {
	srv := redisserver.Start(t)
	for _, c := range []struct {
		name string
		rdb  redis.UniversalClient
		opt  redisdriver.Option
		want []error
	}{
		{"no replica", srv.Client(t), redisdriver.WithReplicaAck(0, time.Second), []error{driver.ErrInvalid}},
		{"no timeout", srv.Client(t), redisdriver.WithReplicaAck(1, 0), []error{driver.ErrInvalid}},
		{"timeout past the read timeout", redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: time.Second}),
			redisdriver.WithReplicaAck(1, time.Second), []error{driver.ErrInvalid}},
		{"ring", redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": srv.Addr()}}),
			redisdriver.WithReplicaAck(1, time.Second), []error{driver.ErrInvalid, errors.ErrUnsupported}},
		{"AOF local 2", srv.Client(t), redisdriver.WithAOFAck(2, 0, time.Second), []error{driver.ErrInvalid}},
		{"AOF nothing", srv.Client(t), redisdriver.WithAOFAck(0, 0, time.Second), []error{driver.ErrInvalid}},
	} {
		t.Cleanup(func() { _ = c.rdb.Close() })
		_, err := redisdriver.New(c.rdb, c.opt)
		for _, want := range c.want {
			if !errors.Is(err, want) {
				t.Errorf("%s: %v, want %v", c.name, err, want)
			}
		}
	}
}

// newLockerWith returns a Client on rdb through a Driver with opts.
func newLockerWith(t *testing.T, rdb redis.UniversalClient, opts ...redisdriver.Option) *dlock.Client {
	t.Helper()
	drv, err := redisdriver.New(rdb, opts...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := dlock.New(drv, dlock.WithLogger(leasecheck.QuietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// serverVersion returns the redis_version INFO reports.
func serverVersion(t *testing.T, rdb *redis.Client) string {
	t.Helper()
	info, err := rdb.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	t.Fatal("no redis_version in INFO")
	return ""
}

// In a Cluster each call goes, with its WAIT, to the master of its slot:
// with the master's replica up, Lock, TryLock and their renewals work;
// with it down, an acquisition fails with ErrReplicaAck and nothing stays
// held.
func TestClusterReplicaAck(t *testing.T) {
	cl := redisserver.StartReplicatedCluster(t, 1, 5*time.Second)
	ctx := ctxTimeout(t, 30*time.Second)
	c := newLockerWith(t, redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()}),
		redisdriver.WithReplicaAck(1, time.Second))
	unlock(t, got(t)(c.TryLock(ctx, "cluster-ack")))
	l := got(t)(c.Lock(ctx, "cluster-ack", dlock.WithTTL(1500*time.Millisecond)))
	select { // renewals every 500 ms, each with its WAIT
	case <-l.Done():
		t.Fatalf("lease lost: %v", l.Err())
	case <-time.After(2 * time.Second):
	}
	unlock(t, l)
	cl.Replicas[0].Kill()
	if _, err := c.TryLock(ctx, "cluster-ack"); !errors.Is(err, redisdriver.ErrReplicaAck) {
		t.Fatalf("TryLock with the replica down: %v, want ErrReplicaAck", err)
	}
	eventuallyFree(t, cl.Masters[0].Client(t), "cluster-ack")
}

// eventuallyFree waits, for up to 5 s, until no one holds name on rdb.
func eventuallyFree(t *testing.T, rdb *redis.Client, name string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for isHeld(t, rdb, name) {
		if time.Now().After(deadline) {
			t.Fatalf("%q still held on %s", name, rdb.Options().Addr)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not a synchronisation
	}
}

// An acquisition sent again after its reply was lost (go-redis resends it
// on another connection when the first one broke) finds its own lock and
// answers it again; with WithReplicaAck it writes it again. WAIT counts the
// writes of the connection it follows, up to its last one: on a pooled
// connection opened before the first try, a try again that wrote nothing
// would have WAIT confirm at once a lock the replicas never received. The
// write shows as the lock's TTL counted again from the try again. Before,
// the try again wrote nothing. (Without WithReplicaAck it still writes
// nothing: see TestOutOfMemoryAnswersAsScriptsDo.)
func TestRetriedAcquisitionIsWrittenAgain(t *testing.T) {
	dep := redisserver.StartSentinel(t)
	ctx := ctxTimeout(t, 30*time.Second)
	master := dep.Master.Client(t)
	d, err := redisdriver.New(master, redisdriver.WithReplicaAck(1, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	req := driver.AcquireRequest{Key: "retried", ID: "0123456789abcdef0123456789abcdef", TTL: 30 * time.Second}
	first, err := d.Acquire(ctx, req)
	if err != nil || !first.Acquired {
		t.Fatalf("first try: %+v, %v", first, err)
	}
	// Shorten the lock's TTL in the store: a write of the try again
	// counts it from the try again, 30 s.
	key := redisdriver.DefaultPrefix + "{retried}"
	if ok, err := master.PExpire(ctx, key, 10*time.Second).Result(); err != nil || !ok {
		t.Fatalf("PEXPIRE %s: %v, %v", key, ok, err)
	}
	again, err := d.Acquire(ctx, req)
	if err != nil || !again.Acquired || again.Token != first.Token {
		t.Fatalf("the try again: %+v, %v; want the first try's lock, token %d", again, err, first.Token)
	}
	if ttl := master.PTTL(ctx, key).Val(); ttl <= 10*time.Second {
		t.Fatalf("the lock's TTL after the try again is %v: it wrote nothing, so a WAIT after it would not wait for the lock to reach a replica", ttl)
	}

	// LockAll's call the same.
	all := []driver.AcquireRequest{
		{Key: "{set}a", ID: "1123456789abcdef0123456789abcdef", TTL: 30 * time.Second},
		{Key: "{set}b", ID: "2123456789abcdef0123456789abcdef", TTL: 30 * time.Second},
	}
	if res, err := d.AcquireAll(ctx, all); err != nil || !res.Acquired {
		t.Fatalf("AcquireAll: %+v, %v", res, err)
	}
	keyA := redisdriver.DefaultPrefix + "{{set}a}"
	if ok, err := master.PExpire(ctx, keyA, 10*time.Second).Result(); err != nil || !ok {
		t.Fatalf("PEXPIRE %s: %v, %v", keyA, ok, err)
	}
	if res, err := d.AcquireAll(ctx, all); err != nil || !res.Acquired {
		t.Fatalf("AcquireAll again: %+v, %v", res, err)
	}
	if ttl := master.PTTL(ctx, keyA).Val(); ttl <= 10*time.Second {
		t.Fatalf("a lock's TTL after LockAll's try again is %v: it wrote nothing", ttl)
	}
}
