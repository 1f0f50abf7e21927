package redisfence_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/fence"
	"github.com/dlockio/dlock/fence/redisfence"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/redis/go-redis/v9"
)

func newFenced(t *testing.T) (*redisfence.Client, *redis.Client) {
	t.Helper()
	rdb := redisserver.Start(t).Client(t)
	f, err := redisfence.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	return f, rdb
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func wantStale(t *testing.T, err error, key string, tok, highest fence.Token) {
	t.Helper()
	var stale *fence.StaleTokenError
	if !errors.Is(err, fence.ErrStaleToken) || !errors.As(err, &stale) ||
		*stale != (fence.StaleTokenError{Resource: key, Token: tok, Highest: highest}) {
		t.Fatalf("got %v, want a stale token %d for %q below %d", err, tok, key, highest)
	}
}

// TestWrites: every write accepts equal and higher tokens and refuses lower
// ones without touching the data; the mark is shared by all writes to a key.
func TestWrites(t *testing.T) {
	f, rdb := newFenced(t)
	ctx := testCtx(t)

	if err := f.Set(ctx, "order:42", 10, "paid", 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Set(ctx, "order:42", 10, "paid again", 0); err != nil { // same holder
		t.Fatal(err)
	}
	wantStale(t, f.Set(ctx, "order:42", 9, "stale", 0), "order:42", 9, 10)
	if v := rdb.Get(ctx, "order:42").Val(); v != "paid again" {
		t.Fatalf("value %q after a stale SET", v)
	}
	v, err := f.Get(ctx, "order:42", 11)
	if err != nil || v != "paid again" {
		t.Fatalf("fenced GET: %q %v", v, err)
	}
	// The read registered 11: a write with 10 is now stale.
	wantStale(t, f.Set(ctx, "order:42", 10, "x", 0), "order:42", 10, 11)
	if _, err := f.Get(ctx, "missing", 1); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET of a missing key: %v", err)
	}

	if err := f.Set(ctx, "cart:1", 1, "v", 150*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if pttl := rdb.PTTL(ctx, "cart:1").Val(); pttl <= 0 || pttl > 150*time.Millisecond {
		t.Fatalf("PTTL %v after SET with a 150ms expiry", pttl)
	}

	n, err := f.HSet(ctx, "user:{7}:profile", 5, map[string]any{"name": "ann", "age": 40})
	if err != nil || n != 2 {
		t.Fatalf("HSET: %d %v", n, err)
	}
	_, err = f.HSet(ctx, "user:{7}:profile", 4, map[string]any{"name": "old"})
	wantStale(t, err, "user:{7}:profile", 4, 5)
	if name := rdb.HGet(ctx, "user:{7}:profile", "name").Val(); name != "ann" {
		t.Fatalf("name %q after a stale HSET", name)
	}

	if got, err := f.IncrBy(ctx, "stock", 3, 5); err != nil || got != 5 {
		t.Fatalf("INCRBY: %d %v", got, err)
	}
	_, err = f.IncrBy(ctx, "stock", 2, 100)
	wantStale(t, err, "stock", 2, 3)
	if got, err := f.IncrBy(ctx, "stock", 3, -1); err != nil || got != 4 {
		t.Fatalf("INCRBY: %d %v", got, err)
	}

	wantStale(t, func() error { _, err := f.Del(ctx, "stock", 1); return err }(), "stock", 1, 3)
	if ok, err := f.Del(ctx, "stock", 4); !ok || err != nil {
		t.Fatalf("DEL: %v %v", ok, err)
	}
	// The mark survives the data: the stale holder cannot bring it back.
	_, err = f.IncrBy(ctx, "stock", 3, 1)
	wantStale(t, err, "stock", 3, 4)
	if rdb.Exists(ctx, "stock").Val() != 0 {
		t.Fatal("a stale INCRBY recreated deleted data")
	}
	if h, err := f.Highest(ctx, "stock"); err != nil || h != 4 {
		t.Fatalf("Highest: %d %v", h, err)
	}

	if err := f.Advance(ctx, "order:43", 8); err != nil {
		t.Fatal(err)
	}
	wantStale(t, f.Set(ctx, "order:43", 7, "x", 0), "order:43", 7, 8)
}

// TestTokensAbove2To53: tokens are compared exactly, not as doubles.
func TestTokensAbove2To53(t *testing.T) {
	f, _ := newFenced(t)
	ctx := testCtx(t)
	const big = fence.Token(1<<53 + 1)
	if err := f.Set(ctx, "k", big, "a", 0); err != nil {
		t.Fatal(err)
	}
	// As doubles, 2^53 and 2^53+1 are equal: a compare of numbers lets it in.
	wantStale(t, f.Set(ctx, "k", big-1, "b", 0), "k", big-1, big)
	if err := f.Set(ctx, "k", math.MaxUint64, "c", 0); err != nil {
		t.Fatal(err)
	}
	wantStale(t, f.Set(ctx, "k", math.MaxUint64-1, "d", 0), "k", math.MaxUint64-1, math.MaxUint64)
	wantStale(t, f.Set(ctx, "k", 99, "e", 0), "k", 99, math.MaxUint64) // shorter number
}

// TestFailedWriteKeepsMark: a write Redis refuses (wrong type) raises no mark.
func TestFailedWriteKeepsMark(t *testing.T) {
	f, rdb := newFenced(t)
	ctx := testCtx(t)
	if err := f.Set(ctx, "s", 1, "text", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.IncrBy(ctx, "s", 5, 1); !errors.Is(err, dlock.ErrBackend) {
		t.Fatalf("INCRBY on text: %v, want a backend error", err)
	}
	if err := f.Set(ctx, "s", 2, "still mine", 0); err != nil {
		t.Fatalf("after the failed write: %v", err)
	}
	if v := rdb.Get(ctx, "s").Val(); v != "still mine" {
		t.Fatalf("value %q", v)
	}
}

func TestBadInput(t *testing.T) {
	f, _ := newFenced(t)
	ctx := testCtx(t)
	if _, err := redisfence.New(nil); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("nil client: %v", err)
	}
	if err := f.Set(ctx, "", 1, "v", 0); !errors.Is(err, dlock.ErrInvalidKey) {
		t.Errorf("empty key: %v", err)
	}
	if err := f.Set(ctx, "a}b", 1, "v", 0); !errors.Is(err, dlock.ErrInvalidKey) {
		t.Errorf("key with '}' and no tag: %v", err)
	}
	if err := f.Set(ctx, "k", 1, "v", -time.Second); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("negative expiry: %v", err)
	}
	if _, err := f.HSet(ctx, "k", 1, nil); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("no fields: %v", err)
	}
	//lint:ignore SA1012 a nil context is the bad input under test
	if err := f.Advance(nil, "k", 1); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("nil ctx: %v", err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := f.Advance(done, "k", 1); !errors.Is(err, context.Canceled) || errors.Is(err, dlock.ErrBackend) {
		t.Errorf("done ctx: %v", err)
	}
	// A ctx ended with a cause of its own (fence.Do's, when the lease is
	// lost) still matches ctx.Err(), and its cause.
	caused, stop := context.WithCancelCause(ctx)
	stop(dlock.ErrLockLost)
	if err := f.Set(caused, "k", 1, "v", 0); !errors.Is(err, context.Canceled) || !errors.Is(err, dlock.ErrLockLost) {
		t.Errorf("ctx cancelled with a cause: %v, want it to match context.Canceled and the cause", err)
	}
	timed, stop2 := context.WithTimeoutCause(ctx, time.Nanosecond, dlock.ErrLockLost)
	defer stop2()
	<-timed.Done()
	if err := f.Set(timed, "k", 1, "v", 0); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, dlock.ErrLockLost) {
		t.Errorf("ctx past its deadline, with a cause: %v, want it to match context.DeadlineExceeded and the cause", err)
	}
}

// TestFenceKeySlots: on a real server, every fence key hashes to its data
// key's Cluster slot, and different data keys get different fence keys.
func TestFenceKeySlots(t *testing.T) {
	rdb := redisserver.StartCluster(t, 1)[0].Client(t)
	ctx := testCtx(t)
	keys := []string{"order:42", "{order:42}", "user:{7}:profile", "a{b", "{a}{b}", "é{ü}", "k{v}:", "x{y}}"}
	seen := map[string]string{}
	for _, k := range keys {
		fk, err := redisfence.FenceKey(k)
		if err != nil {
			t.Fatalf("%q: %v", k, err)
		}
		if other, dup := seen[fk]; dup {
			t.Fatalf("%q and %q share the fence key %q", k, other, fk)
		}
		seen[fk] = k
		ks, err1 := rdb.ClusterKeySlot(ctx, k).Result()
		fs, err2 := rdb.ClusterKeySlot(ctx, fk).Result()
		if err1 != nil || err2 != nil || ks != fs {
			t.Errorf("%q in slot %d, its fence key %q in slot %d (%v %v)", k, ks, fk, fs, err1, err2)
		}
	}
	for _, k := range []string{"}", "a}b", "{}x", "x{}y{z}"} { // no tag, and a }
		if _, err := redisfence.FenceKey(k); !errors.Is(err, dlock.ErrInvalidKey) {
			t.Errorf("%q: %v, want ErrInvalidKey", k, err)
		}
	}
}

// A data key in the marks' namespace is refused: written through the
// guard, "dlock:fence{order:42}" would overwrite order:42's mark (its own
// mark is elsewhere) and let a stale token in.
func TestDataKeyInMarkNamespaceRefused(t *testing.T) {
	f, rdb := newFenced(t)
	ctx := testCtx(t)
	if err := f.Set(ctx, "order:42", 100, "v", 0); err != nil {
		t.Fatal(err)
	}
	mark, err := redisfence.FenceKey("order:42")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{mark, "dlock:fence:user:{7}:p", "dlock:fence"} {
		if err := f.Set(ctx, k, 1, "1", 0); !errors.Is(err, dlock.ErrInvalidKey) {
			t.Errorf("Set of %q: %v, want ErrInvalidKey", k, err)
		}
	}
	wantStale(t, f.Set(ctx, "order:42", 50, "stale", 0), "order:42", 50, 100)
	if v := rdb.Get(ctx, "order:42").Val(); v != "v" {
		t.Errorf("order:42 = %q after a stale write, want v", v)
	}
}

// TestCluster: fenced writes run on a three-node Cluster (one script per
// key, both keys in one slot).
func TestCluster(t *testing.T) {
	nodes := redisserver.StartCluster(t, 3)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{nodes[0].Addr()}})
	t.Cleanup(func() { _ = cc.Close() })
	f, err := redisfence.New(cc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	for i, k := range []string{"order:1", "order:2", "order:3", "user:{9}:a", "user:{9}:b"} {
		tok := fence.Token(100 + i)
		if err := f.Set(ctx, k, tok, "v", 0); err != nil {
			t.Fatalf("%q: %v", k, err)
		}
		wantStale(t, f.Set(ctx, k, tok-1, "old", 0), k, tok-1, tok)
		if _, err := f.HSet(ctx, k+":h", tok, map[string]any{"f": 1}); err != nil {
			t.Fatalf("%q: %v", k, err)
		}
	}
}

// TestRace: read-modify-write increments through fenced GET and SET from
// racing writers with interleaved tokens: no accepted increment is lost,
// and a writer whose token is passed is refused.
func TestRace(t *testing.T) {
	f, rdb := newFenced(t)
	ctx := testCtx(t)
	const workers, per = 6, 60
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		accepted int
		tokMu    sync.Mutex
		next     fence.Token
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				tokMu.Lock()
				next++
				tok := next
				tokMu.Unlock()
				v, err := f.Get(ctx, "counter", tok)
				n := 0
				if err == nil {
					for _, c := range v {
						n = n*10 + int(c-'0')
					}
				} else if !errors.Is(err, redis.Nil) {
					if !errors.Is(err, fence.ErrStaleToken) {
						t.Error(err)
					}
					continue
				}
				err = f.Set(ctx, "counter", tok, n+1, 0)
				switch {
				case err == nil:
					mu.Lock()
					accepted++
					mu.Unlock()
				case !errors.Is(err, fence.ErrStaleToken):
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	got, err := rdb.Get(ctx, "counter").Int()
	if err != nil {
		t.Fatal(err)
	}
	if got != accepted || accepted == workers*per {
		t.Fatalf("counter %d, %d increments accepted of %d: want equal (none lost) and some refused", got, accepted, workers*per)
	}
	t.Logf("%d of %d increments accepted", accepted, workers*per)
}
