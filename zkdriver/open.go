package zkdriver

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// DefaultConnectTimeout bounds how long OpenContext waits for a session
// when its ctx has no earlier deadline.
const DefaultConnectTimeout = 10 * time.Second

// ParseServers splits a server list, host:port,host2:port as ZooKeeper's
// own clients take it, into its addresses. A missing port is 2181.
// Errors match driver.ErrInvalid (dlock.ErrInvalidArgument).
func ParseServers(servers string) ([]string, error) {
	s := strings.TrimSpace(servers)
	if s == "" {
		return nil, fmt.Errorf("%w: empty ZooKeeper server list", driver.ErrInvalid)
	}
	if strings.ContainsAny(s, "/?@ ") {
		return nil, fmt.Errorf("%w: ZooKeeper server list %q: want host:port,host:port (no scheme, path or spaces)", driver.ErrInvalid, servers)
	}
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a == "" {
			return nil, fmt.Errorf("%w: ZooKeeper server list %q has an empty entry", driver.ErrInvalid, servers)
		}
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			// No port: the default one. An IPv6 address is bracketed,
			// and JoinHostPort adds the brackets again.
			host, port = strings.TrimSuffix(strings.TrimPrefix(a, "["), "]"), "2181"
			if strings.Contains(a, ":") && !(strings.HasPrefix(a, "[") && strings.HasSuffix(a, "]")) {
				return nil, fmt.Errorf("%w: ZooKeeper server %q: %v", driver.ErrInvalid, a, err)
			}
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" {
			return nil, fmt.Errorf("%w: ZooKeeper server %q: want host:port with a port in 1-65535", driver.ErrInvalid, a)
		}
		out = append(out, net.JoinHostPort(host, port))
	}
	return out, nil
}

// Open is OpenContext with a background context.
func Open(servers string, opts ...dlock.Option) (*dlock.Client, error) {
	return OpenContext(context.Background(), servers, opts...)
}

// OpenContext is the one-call setup: it connects to servers (see
// ParseServers), waits for a session (until ctx ends, at most
// DefaultConnectTimeout), and returns a dlock Client on a Driver that owns
// the connection: closing the Client ends the session. The Client's
// default TTL is the lesser of dlock.DefaultTTL and the Driver's MaxTTL
// for the session timeout the servers granted; opts come after it, so
// dlock.WithDefaultTTL overrides it.
func OpenContext(ctx context.Context, servers string, opts ...dlock.Option) (*dlock.Client, error) {
	addrs, err := ParseServers(servers)
	if err != nil {
		return nil, err
	}
	conn, granted, err := connect(ctx, addrs, DefaultSessionTimeout, slog.Default())
	if err != nil {
		return nil, err
	}
	d, err := New(conn, WithSessionTimeout(granted))
	if err != nil {
		conn.Close()
		return nil, err
	}
	d.ownsConn = true
	all := append([]dlock.Option{dlock.WithDefaultTTL(min(dlock.DefaultTTL, d.MaxTTL()))}, opts...)
	c, err := dlock.New(d, all...)
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	return c, nil
}

// sessionLog is go-zookeeper's logger for a connection: it learns the
// session timeout the servers granted from the handshake's line (the
// client exposes it no other way) and passes every line to slog at debug
// level.
type sessionLog struct {
	log     *slog.Logger
	mu      sync.Mutex
	granted time.Duration
	// learned is closed once granted is known: the line comes just after
	// the client announces the session (StateHasSession), not before it.
	learned chan struct{}
	once    sync.Once
}

func newSessionLog(log *slog.Logger) *sessionLog {
	return &sessionLog{log: log, learned: make(chan struct{})}
}

func (l *sessionLog) Printf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if strings.HasPrefix(format, "authenticated: id=%d, timeout=%d") && len(args) == 2 {
		if ms, ok := args[1].(int32); ok {
			l.mu.Lock()
			l.granted = time.Duration(ms) * time.Millisecond
			l.mu.Unlock()
			l.once.Do(func() { close(l.learned) })
		}
	}
	l.log.Debug("zookeeper client", "msg", msg)
}

func (l *sessionLog) timeout() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.granted
}

// connect dials addrs and waits for a session; it returns the session
// timeout the servers granted.
func connect(ctx context.Context, addrs []string, timeout time.Duration, log *slog.Logger) (*zk.Conn, time.Duration, error) {
	sl := newSessionLog(log)
	conn, _, err := zk.Connect(addrs, timeout, zk.WithLogger(sl))
	if err != nil {
		return nil, 0, fmt.Errorf("%w: ZooKeeper %s: %w", dlock.ErrBackend, strings.Join(addrs, ","), err)
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultConnectTimeout)
	defer cancel()
	// The session is there once its granted timeout is known: the
	// handshake's line (see sessionLog).
	select {
	case <-sl.learned:
	case <-ctx.Done():
		conn.Close()
		return nil, 0, fmt.Errorf("%w: ZooKeeper %s: no session: %w", dlock.ErrBackend, strings.Join(addrs, ","), ctx.Err())
	}
	return conn, sl.timeout(), nil
}
