package faults

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/dlockio/dlock/internal/testkit/redisserver"
)

// fairAcq is one fair acquisition as a worker reports it: its Enqueue
// (queued unless queued is 0), its grant, and the end of its validity.
func fairAcq(id, w string, sent, queued, granted, end int64, tok uint64) []event {
	enq := event{K: evEnq, W: w, N: id, T0: sent, T: sent + 1, Tok: tok}
	if queued != 0 {
		enq = event{K: evEnq, W: w, N: id, T0: sent, T: queued, OK: true}
	}
	return []event{enq,
		{K: evGrant, W: w, N: id, T: granted, Tok: tok},
		{K: evAcq, W: w, A: id, T: granted, Tok: tok},
		{K: evEnd, W: w, A: id, T: end},
	}
}

func concat(hs ...[]event) []event {
	var out []event
	for _, h := range hs {
		out = append(out, h...)
	}
	return out
}

// The fair checker sees what it must: a live waiter overtaken by a later
// request, overlapping validity windows, tokens out of grant order; and it
// does not blame the lock for a waiter a fault hit.
func TestCheckFairFindsViolations(t *testing.T) {
	holder := fairAcq("h", "a", 0, 0, 1, 100, 10) // granted at once, valid until 100
	waiter := fairAcq("x", "b", 10, 12, 100, 200, 11)
	later := fairAcq("y", "c", 20, 22, 200, 300, 12) // sent after x was queued
	if r := checkFair(concat(holder, waiter, later)); r.fifo != 0 || r.fifoPairs != 1 || r.overlaps != 0 || r.tokenOrder != 0 {
		t.Fatalf("clean history: %v, want 1 pair checked and no violation", r)
	}

	// y, sent after x was queued, is granted before x.
	jumped := concat(holder, fairAcq("x", "b", 10, 12, 200, 300, 12), fairAcq("y", "c", 20, 22, 100, 200, 11))
	if r := checkFair(jumped); r.fifo != 1 || r.fifoPairs != 1 {
		t.Fatalf("a later request granted first: %v, want 1 FIFO violation", r)
	}
	// The same, but b was stopped while it waited: x was not live.
	paused := concat(jumped, []event{{K: evPause, W: "b", T: 50}})
	if r := checkFair(paused); r.fifo != 0 || r.fifoPairs != 0 {
		t.Fatalf("a paused waiter overtaken: %v, want no pair checked", r)
	}
	// A store restart makes every waiter of that time not live.
	restarted := concat(jumped, []event{{K: evFault, W: storeWorker, T: 50}})
	if r := checkFair(restarted); r.fifo != 0 || r.fifoPairs != 0 {
		t.Fatalf("overtaken across a store restart: %v, want no pair checked", r)
	}
	// Sent before x's queued reply: the store may have seen y first.
	if r := checkFair(concat(holder, fairAcq("x", "b", 10, 25, 200, 300, 12), fairAcq("y", "c", 20, 22, 100, 200, 11))); r.fifo != 0 || r.fifoPairs != 0 {
		t.Fatalf("requests in flight together: %v, want no pair checked", r)
	}

	// x valid until 150 while y holds from 100; y's token is below x's.
	overlap := concat(fairAcq("x", "b", 0, 0, 1, 150, 11), fairAcq("y", "c", 90, 0, 100, 200, 10))
	if r := checkFair(overlap); r.overlaps != 1 || r.tokenOrder != 1 {
		t.Fatalf("overlapping holders, tokens out of order: %v, want 1 overlap and 1 token out of order", r)
	}
	// Equal tokens are out of order too.
	if r := checkFair(concat(fairAcq("x", "b", 0, 0, 1, 50, 11), fairAcq("y", "c", 60, 0, 70, 80, 11))); r.tokenOrder != 1 {
		t.Fatalf("a token repeated: %v", r)
	}
}

// keysLeft reports a key with no expiry and one that outlives the longest
// lease, and not one that expires in time.
func TestKeysLeftFindsLeaks(t *testing.T) {
	if testing.Short() {
		t.Skip("needs redis-server")
	}
	if os.Getenv(redisserver.EnvAddr) != "" {
		t.Skip("needs a redis-server of its own: " + redisserver.EnvAddr + " is set")
	}
	r := &run{t: t, store: redisserver.Start(t)}
	rdb := redisserver.NewClient(t, r.store.Addr())
	ctx := context.Background()
	const ttl = 100 * time.Millisecond
	if err := rdb.Set(ctx, "dlock:{job}:e", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "dlock:{job}:last", "x", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "dlock:{job}", "x", ttl/2).Err(); err != nil {
		t.Fatal(err)
	}
	left := r.keysLeft(ttl)
	slices.Sort(left)
	if want := []string{"dlock:{job}:e", "dlock:{job}:last"}; !slices.Equal(left, want) {
		t.Fatalf("keys left %v, want %v", left, want)
	}
}
