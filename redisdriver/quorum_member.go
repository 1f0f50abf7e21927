package redisdriver

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// member is one master of a Quorum: its Driver, and what the Quorum knows
// of the server's last restart. A master that restarted without its data
// has forgotten the locks and tokens it granted, so it must stay out of
// votes until every lock it granted would have expired anyway (Redlock's
// delayed restart; docs/quorum.md). A restart always drops the client's
// connections, so the restart time is read again (INFO server: run_id,
// uptime_in_seconds) before the first vote after any new connection.
type member struct {
	d     *Driver
	index int       // in the Quorum's list, for messages
	peers []*member // every member of the Quorum, this one included
	// dials counts the connections the client made; checked is its value
	// when the restart time was last read.
	dials   atomic.Uint64
	mu      sync.Mutex
	checked uint64
	known   bool
	runID   string
	upSince time.Time // the latest the server can have started, by our clock
	// dup is set for good once another member is found to reach the same
	// server (sameServerAs): such a member never votes again.
	dup error
}

func newMember(d *Driver, index int) *member {
	m := &member{d: d, index: index}
	d.rdb.AddHook(dialCounter{&m.dials})
	return m
}

// close forgets the restart time: nothing to stop (the hook stays with the
// client, which may outlive the Quorum, and only counts).
func (m *member) close() {
	m.mu.Lock()
	m.known = false
	m.mu.Unlock()
}

// dialCounter is a go-redis hook that counts the connections made.
type dialCounter struct{ n *atomic.Uint64 }

func (h dialCounter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err == nil {
			h.n.Add(1)
		}
		return c, err
	}
}

func (h dialCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h dialCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// votes reports whether the master may vote on a request when it must have
// been up for at least delay: reading its restart time first if a
// connection was made since it was last read. The read costs a round trip,
// only after a (re)connection. dials is the count of connections the
// answer covers: see recheck.
func (m *member) votes(ctx context.Context, delay time.Duration) (ok bool, dials uint64, err error) {
	m.mu.Lock()
	dials = m.dials.Load()
	fresh := m.known && m.checked == dials
	upSince, dup := m.upSince, m.dup
	m.mu.Unlock()
	if dup != nil {
		return false, 0, dup
	}
	if !fresh {
		if upSince, dials, err = m.readRestart(ctx); err != nil {
			return false, 0, err
		}
	}
	return time.Since(upSince) >= delay, dials, nil
}

// stillVotes reports whether a vote given after votes answered true, with
// dials, still counts. go-redis sends a command again on a new connection
// when the one it used broke, as a restart breaks them all: a grant from a
// master that restarted after votes read its restart time would otherwise
// count. So when a connection was made meanwhile, the restart time is read
// again.
func (m *member) stillVotes(ctx context.Context, delay time.Duration, dials uint64) (bool, error) {
	if m.dials.Load() == dials {
		return true, nil
	}
	ok, _, err := m.votes(ctx, delay)
	return ok && err == nil, err
}

// readRestart reads the server's run id and uptime and records when it
// started, by this machine's clock: now less the uptime, whose whole
// seconds make it the latest the restart can have been.
//
// The connections counted are read after the answer: the INFO itself may
// have made one, and counting it after would make every next vote read
// again. A connection made after a restart that came between the answer
// and that read is missed; but the restart broke the connection the INFO
// used, whose next use fails, and the reconnection is counted.
func (m *member) readRestart(ctx context.Context) (time.Time, uint64, error) {
	info, err := m.d.rdb.Info(ctx, "server").Result()
	if err != nil {
		return time.Time{}, 0, err
	}
	dials := m.dials.Load()
	runID, uptime, err := parseServerInfo(info)
	if err != nil {
		return time.Time{}, 0, err
	}
	upSince := time.Now().Add(-time.Duration(uptime) * time.Second)
	m.mu.Lock()
	if m.known && m.runID == runID && m.upSince.Before(upSince) {
		upSince = m.upSince // same run: keep the earlier reading, as exact
	}
	m.known, m.checked, m.runID, m.upSince = true, dials, runID, upSince
	m.mu.Unlock()
	if err := m.sameServerAs(runID); err != nil {
		return time.Time{}, 0, err
	}
	return upSince, dials, nil
}

// sameServerAs refuses a master whose server another member reaches too
// (two URLs of one server, such as localhost and 127.0.0.1): it would vote
// twice, and a single server would make a majority of three. Called
// without m.mu held.
func (m *member) sameServerAs(runID string) error {
	for _, o := range m.peers {
		if o == m {
			continue
		}
		o.mu.Lock()
		same := o.known && o.runID == runID
		o.mu.Unlock()
		if same {
			err := fmt.Errorf("%w: masters %d and %d of a quorum are one server (run id %s): it would vote twice",
				driver.ErrInvalid, min(m.index, o.index), max(m.index, o.index), runID)
			for _, x := range []*member{m, o} {
				x.mu.Lock()
				x.dup = err
				x.mu.Unlock()
			}
			return err
		}
	}
	return nil
}

// parseServerInfo takes run_id and uptime_in_seconds from INFO server.
func parseServerInfo(info string) (runID string, uptime int64, err error) {
	uptime = -1
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimRight(line, "\r\n"), ":")
		if !ok {
			continue
		}
		switch k {
		case "run_id":
			runID = v
		case "uptime_in_seconds":
			if uptime, err = strconv.ParseInt(v, 10, 64); err != nil {
				return "", 0, fmt.Errorf("INFO server: uptime_in_seconds %q: %w", v, err)
			}
		}
	}
	if runID == "" || uptime < 0 {
		return "", 0, fmt.Errorf("INFO server: no run_id or uptime_in_seconds")
	}
	return runID, uptime, nil
}
