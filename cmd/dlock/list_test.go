package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	dl "github.com/dlockio/dlock"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/redis/go-redis/v9"
)

// listEntry is one object of list --json, every field optional so that
// the test sees which ones are there.
type listEntry struct {
	Key     string  `json:"key"`
	Held    bool    `json:"held"`
	Token   *uint64 `json:"token"`
	PID     *int    `json:"pid"`
	Holders []struct {
		ID    string `json:"id"`
		Mode  string `json:"mode"`
		Token uint64 `json:"token"`
		Host  string `json:"host"`
		PID   int    `json:"pid"`
		Meta  string `json:"meta"`
		TTLMS int64  `json:"ttl_ms"`
	} `json:"holders"`
	Waiters []struct {
		Mode    string `json:"mode"`
		Permits int    `json:"permits"`
		Meta    string `json:"meta"`
	} `json:"waiters"`
}

// testClient is a Client of the test's own on rdb, closed when the test
// ends.
func testClient(t *testing.T, rdb *redis.Client) *dl.Client {
	t.Helper()
	drv, err := redisdriver.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	c, err := dl.New(drv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitWaiters waits until the store reports n waiters of name.
func waitWaiters(t *testing.T, c *dl.Client, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		q, _, err := c.InspectQueue(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if len(q.Waiters) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q: %d waiters, want %d", name, len(q.Waiters), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// list shows readers, permits and waiters after the plain locks, in text
// and JSON, and "no locks held" only once there is nothing at all.
// queuedFixture holds, from the test process, a reader, a permit, a plain
// lock and a lock with a queued writer, plus a waiting permit.
type queuedFixture struct {
	reader, permit, plain, fair *dl.Lease
	host                        string
	pid                         int
}

func TestListQueued(t *testing.T) {
	t.Parallel()
	_, rdb := server(t)
	url := "redis://" + rdb.Options().Addr + "/0"
	c := testClient(t, rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	must := func(l *dl.Lease, err error) *dl.Lease {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	f := queuedFixture{
		reader: must(c.RWMutex("jobs/catalog").RLock(ctx, dl.WithMeta("reader"))),
		permit: must(c.Semaphore("jobs/gpu", 1).Acquire(ctx, dl.WithMeta("permit"))),
		plain:  must(c.Lock(ctx, "jobs/plain")),
		fair:   must(c.Lock(ctx, "jobs/fair")),
		pid:    os.Getpid(),
	}
	f.host, _ = os.Hostname()
	wctx, stopWaiters := context.WithCancel(ctx)
	defer stopWaiters()
	waited := make(chan error, 2)
	go func() {
		_, err := c.Semaphore("jobs/gpu", 1).Acquire(wctx, dl.WithMeta("gpu waiter"))
		waited <- err
	}()
	go func() {
		_, err := c.RWMutex("jobs/fair").Lock(wctx, dl.WithMeta("writer waiter"))
		waited <- err
	}()
	waitWaiters(t, c, "jobs/gpu", 1)
	waitWaiters(t, c, "jobs/fair", 1)

	checkListQueuedText(t, url, f)
	checkListQueuedJSON(t, url, f)

	stopWaiters()
	for range 2 {
		if err := <-waited; err == nil {
			t.Fatal("a cancelled waiter was granted")
		}
	}
	// Their places are given up in the background: wait for that, or the
	// leases released below would pass to them for a moment.
	waitWaiters(t, c, "jobs/gpu", 0)
	waitWaiters(t, c, "jobs/fair", 0)
	for _, l := range []*dl.Lease{f.reader, f.permit, f.plain, f.fair} {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	code, stdout, _ := dlock(t, url, "list", "jobs/")
	if code != 0 || stdout != "no locks held with a name starting with \"jobs/\"\n" {
		t.Errorf("list once all left: %d %q", code, stdout)
	}
	code, stdout, _ = dlock(t, url, "list", "--json", "jobs/")
	if code != 0 || strings.TrimSpace(stdout) != "[]" {
		t.Errorf("list --json once all left: %d %q", code, stdout)
	}
}

// checkListQueuedText checks list's text for f: both tables, and a prefix
// with queued names only.
func checkListQueuedText(t *testing.T, url string, f queuedFixture) {
	t.Helper()
	code, stdout, stderr := dlock(t, url, "list", "jobs/")
	if code != 0 {
		t.Fatalf("list: %d; stderr %q", code, stderr)
	}
	host, pid := f.host, f.pid
	want := []string{
		"KEY TOKEN HOST PID HELD TTL META",
		fmt.Sprintf("jobs/fair %d %s %d", f.fair.Token(), host, pid),
		fmt.Sprintf("jobs/plain %d %s %d", f.plain.Token(), host, pid),
		"",
		"QUEUED MODE ID TOKEN HOST PID TTL WAITERS META",
		fmt.Sprintf("jobs/catalog shared %s %d %s %d", f.reader.ID(), f.reader.Token(), host, pid),
		fmt.Sprintf("jobs/fair exclusive %s %d %s %d", f.fair.ID(), f.fair.Token(), host, pid),
		fmt.Sprintf("jobs/gpu permit %s - %s %d", f.permit.ID(), host, pid),
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("list text has %d lines, want %d:\n%s", len(lines), len(want), stdout)
	}
	for i, l := range lines {
		if got := strings.Join(strings.Fields(l), " "); !strings.HasPrefix(got, want[i]) {
			t.Errorf("list line %d = %q, want it to start with %q", i, got, want[i])
		}
	}
	// The waiters column: none behind the reader, one behind the others;
	// the meta text last.
	for i, tail := range map[int]string{5: " 0 reader", 6: " 1", 7: " 1 permit"} {
		if got := strings.Join(strings.Fields(lines[i]), " "); !strings.HasSuffix(got, tail) {
			t.Errorf("list line %d = %q, want it to end with %q", i, got, tail)
		}
	}
	// A prefix with queued names only: no plain table.
	code, stdout, _ = dlock(t, url, "list", "jobs/g")
	if lines := strings.Split(strings.TrimSpace(stdout), "\n"); code != 0 || len(lines) != 2 ||
		!strings.HasPrefix(lines[0], "QUEUED ") || !strings.HasPrefix(lines[1], "jobs/gpu ") {
		t.Errorf("list jobs/g: %d %q", code, stdout)
	}
}

// checkListQueuedJSON checks list --json for f: one object per name, in
// order, with its holders and waiters.
func checkListQueuedJSON(t *testing.T, url string, f queuedFixture) {
	t.Helper()
	code, stdout, stderr := dlock(t, url, "list", "--json", "jobs/")
	var entries []listEntry
	if err := json.Unmarshal([]byte(stdout), &entries); code != 0 || err != nil {
		t.Fatalf("list --json: %d %q %v; stderr %q", code, stdout, err, stderr)
	}
	byKey := map[string]listEntry{}
	var keys []string
	for _, e := range entries {
		byKey[e.Key] = e
		keys = append(keys, e.Key)
	}
	if strings.Join(keys, " ") != "jobs/catalog jobs/fair jobs/gpu jobs/plain" {
		t.Fatalf("list --json names %v, want catalog, fair, gpu, plain in order", keys)
	}
	reader, permit, plain, fair, host, pid := f.reader, f.permit, f.plain, f.fair, f.host, f.pid
	cat, fj, gpu, pl := byKey["jobs/catalog"], byKey["jobs/fair"], byKey["jobs/gpu"], byKey["jobs/plain"]
	switch {
	case !cat.Held || cat.Token != nil || len(cat.Holders) != 1 || len(cat.Waiters) != 0:
		t.Errorf("catalog %+v: want held, no plain token field, one holder, no waiter", cat)
	case cat.Holders[0].ID != reader.ID() || cat.Holders[0].Mode != "shared" || cat.Holders[0].Token != reader.Token() ||
		cat.Holders[0].Host != host || cat.Holders[0].PID != pid || cat.Holders[0].Meta != "reader" || cat.Holders[0].TTLMS <= 0:
		t.Errorf("catalog holder %+v, want the reader %s token %d", cat.Holders[0], reader.ID(), reader.Token())
	}
	switch {
	case !gpu.Held || len(gpu.Holders) != 1 || len(gpu.Waiters) != 1:
		t.Errorf("gpu %+v: want one holder and one waiter", gpu)
	case gpu.Holders[0].ID != permit.ID() || gpu.Holders[0].Mode != "permit" || gpu.Holders[0].Meta != "permit":
		t.Errorf("gpu holder %+v, want the permit %s", gpu.Holders[0], permit.ID())
	case gpu.Waiters[0].Mode != "permit" || gpu.Waiters[0].Permits != 1 || gpu.Waiters[0].Meta != "gpu waiter":
		t.Errorf("gpu waiter %+v", gpu.Waiters[0])
	}
	switch {
	case fj.Token == nil || *fj.Token != fair.Token() || fj.PID == nil || *fj.PID != pid:
		t.Errorf("fair %+v: want the plain fields of the holder, token %d", fj, fair.Token())
	case len(fj.Holders) != 1 || fj.Holders[0].Mode != "exclusive" || fj.Holders[0].ID != fair.ID() ||
		len(fj.Waiters) != 1 || fj.Waiters[0].Mode != "exclusive" || fj.Waiters[0].Meta != "writer waiter":
		t.Errorf("fair's queue %+v: want its holder and the waiting writer", fj)
	}
	if pl.Token == nil || *pl.Token != plain.Token() || pl.Holders != nil || pl.Waiters != nil {
		t.Errorf("plain %+v: want the plain lock's fields only", pl)
	}
}
