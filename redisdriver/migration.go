package redisdriver

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// migrationWait bounds how long a call refused because its slot is
	// being migrated is tried again, within the caller's ctx: a slot of
	// lock keys moves in milliseconds; one that takes longer fails the call
	// as before, rather than hold it up for as long as the migration lasts.
	migrationWait = 5 * time.Second
	// migrationBackoff is the wait before the first retry of such a call;
	// it doubles up to migrationBackoffMax.
	migrationBackoff    = 10 * time.Millisecond
	migrationBackoffMax = 200 * time.Millisecond
)

// migrating reports whether err is a Cluster node's refusal of a call on a
// slot being migrated, made before the call ran (so sending it again is
// safe whatever it does): TRYAGAIN, when the keys it names are not all on
// the node (some moved, or do not exist yet), and ASK, when go-redis ran
// out of redirects to the importing node. go-redis tries such a call four
// times over about 50 ms, and then fails it, while a migration moves a
// slot's keys one batch at a time.
func migrating(err error) bool {
	if err == nil {
		return false
	}
	if redis.HasErrorPrefix(err, "TRYAGAIN") {
		return true
	}
	_, ask := redis.IsAskError(err)
	return ask
}

// migrationRetry paces the retries of one call refused during a slot
// migration. The zero value is ready.
type migrationRetry struct {
	first   time.Time // the first refusal
	backoff time.Duration
}

// again waits before the next try of a call refused with err, and reports
// whether to make it: err is a migration's refusal (or, after one, MOVED:
// the migration ended while go-redis was following the refusals, and it
// ran out of redirects before it followed the slot to its new node), ctx
// has not ended, and the next try comes within migrationWait of the first
// refusal.
func (m *migrationRetry) again(ctx context.Context, err error) bool {
	if !migrating(err) && (m.first.IsZero() || !isMoved(err)) {
		return false
	}
	if m.first.IsZero() {
		m.first, m.backoff = time.Now(), migrationBackoff
	} else {
		m.backoff = min(2*m.backoff, migrationBackoffMax)
	}
	if time.Since(m.first)+m.backoff > migrationWait {
		return false
	}
	timer := time.NewTimer(m.backoff)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// isMoved reports whether err is a node's MOVED answer: the call did not
// run there.
func isMoved(err error) bool {
	_, moved := redis.IsMovedError(err)
	return moved
}
