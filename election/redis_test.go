package election_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/election"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/redisdriver"
)

// redisClient returns a Client on a go-redis connection to addr (a server
// or a proxy).
func redisClient(t *testing.T, addr string) *dlock.Client {
	t.Helper()
	drv, err := redisdriver.New(redisserver.NewClient(t, addr))
	if err != nil {
		t.Fatal(err)
	}
	return client(t, drv)
}

// On a real Redis: a leader cut off from the store (a partition, or a
// process frozen or dead as far as the store can tell) steps down before
// its lease can expire; the next leader wins only after that, with a
// higher term. The old leader's term ends with ErrSteppedDown, while the
// lock is still its own in Redis.
func TestRedisLeaderCutOff(t *testing.T) {
	srv := redisserver.Start(t)
	proxy := redisserver.NewProxy(t, srv.Addr())
	ttl := 600 * time.Millisecond
	a := newElection(t, redisClient(t, proxy.Addr()), "a", election.WithLockOptions(dlock.WithTTL(ttl)))
	bc := redisClient(t, srv.Addr())
	b := newElection(t, bc, "b", election.WithLockOptions(dlock.WithTTL(ttl)))
	ctx := ctxTimeout(t, 20*time.Second)

	aTerm := make(chan uint64, 1)
	aEnded := make(chan error, 1)
	aRun := make(chan error, 1)
	actx, stopA := context.WithCancel(ctx)
	defer stopA()
	go func() {
		aRun <- a.Run(actx, func(ctx context.Context, term uint64) error {
			aTerm <- term
			<-ctx.Done()
			// Still in Redis: a stepped down before its lock could expire.
			info, held, err := bc.Inspect(context.Background(), "leader")
			if err != nil || !held || info.Token != term {
				t.Errorf("when a's term ended the lock was %+v held=%v (%v), want a's", info, held, err)
			}
			aEnded <- context.Cause(ctx)
			return nil
		})
	}()
	first := recv(t, aTerm, 5*time.Second, "a to lead")
	bWon := make(chan *election.Leadership, 1)
	go func() {
		lb, err := b.Campaign(ctx)
		if err != nil {
			t.Error(err)
		}
		bWon <- lb
	}()
	proxy.Blackhole(true)
	cause := recv(t, aEnded, 5*time.Second, "a's term to end")
	select {
	case <-bWon:
		t.Fatal("b won before a's term ended")
	default:
	}
	if !errors.Is(cause, election.ErrSteppedDown) {
		t.Errorf("a's term ended with %v, want ErrSteppedDown", cause)
	}
	lb := recv(t, bWon, 5*time.Second, "b to win")
	if lb == nil {
		t.FailNow()
	}
	if lb.Term() <= first {
		t.Errorf("b's term %d not above a's %d", lb.Term(), first)
	}
	who, ok, err := b.Leader(ctx)
	if err != nil || !ok || who.Term != lb.Term() || who.Identity != "b" {
		t.Errorf("Leader = %+v ok=%v %v", who, ok, err)
	}
	if err := lb.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	// a reconnects and leads again, with a term above b's.
	proxy.Blackhole(false)
	proxy.CloseAll()
	if again := recv(t, aTerm, 10*time.Second, "a to lead again"); again <= lb.Term() {
		t.Errorf("a's new term %d not above b's %d", again, lb.Term())
	}
	stopA()
	recv(t, aEnded, 5*time.Second, "a's second term to end")
	if err := recv(t, aRun, 5*time.Second, "a's Run to return"); !errors.Is(err, context.Canceled) {
		t.Errorf("a's Run: %v", err)
	}
}

// A Redis restarted empty loses the leader's lock: another candidate can
// win at once (no lock can prevent that), but its term is still higher,
// and the old leader's term ends at its next renewal.
func TestRedisRestartEmpty(t *testing.T) {
	srv := redisserver.Start(t)
	ttl := 600 * time.Millisecond
	a := newElection(t, redisClient(t, srv.Addr()), "a", election.WithLockOptions(dlock.WithTTL(ttl)))
	b := newElection(t, redisClient(t, srv.Addr()), "b", election.WithLockOptions(dlock.WithTTL(ttl)))
	ctx := ctxTimeout(t, 20*time.Second)
	la, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Resign(ctx)
	srv.RestartEmpty()
	lb, err := b.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Resign(ctx)
	if lb.Term() <= la.Term() {
		t.Errorf("term after an empty restart %d not above %d", lb.Term(), la.Term())
	}
	recv(t, la.Done(), 5*time.Second, "the old leader's term to end")
	if !errors.Is(la.Err(), dlock.ErrLockLost) {
		t.Errorf("old term ended with %v, want dlock.ErrLockLost", la.Err())
	}
}
