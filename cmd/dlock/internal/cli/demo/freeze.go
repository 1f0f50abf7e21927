package demo

import (
	"context"
	"net"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// gate freezes one simulated instance's network traffic the way a
// stop-the-world pause freezes a whole process: while frozen, reads and
// writes on the instance's connections wait until it thaws or their
// deadline passes. That is what keeps dlock's watchdog from renewing
// during the pause, so the lock really expires in Redis.
type gate struct {
	mu     sync.Mutex
	thawed chan struct{} // nil while running; closed when a freeze ends
}

// freeze blocks the caller and the instance's traffic for d.
func (g *gate) freeze(ctx context.Context, d time.Duration) {
	ch := make(chan struct{})
	g.mu.Lock()
	g.thawed = ch
	g.mu.Unlock()
	sleep(ctx, d)
	g.mu.Lock()
	g.thawed = nil
	g.mu.Unlock()
	close(ch)
}

// wait returns once the gate is open, or os.ErrDeadlineExceeded (a
// timeout error, as the real socket would give) at deadline.
func (g *gate) wait(deadline time.Time) error {
	g.mu.Lock()
	ch := g.thawed
	g.mu.Unlock()
	if ch == nil {
		return nil
	}
	if deadline.IsZero() {
		<-ch
		return nil
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-t.C:
		return os.ErrDeadlineExceeded
	}
}

func (g *gate) wrap(c net.Conn) net.Conn { return &gatedConn{Conn: c, g: g} }

// attach makes every connection rdb dials from now on, pub/sub included,
// go through the gate. Call it before rdb's first command.
func (g *gate) attach(rdb redis.UniversalClient) {
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		// A Cluster client dials through its node clients, made on demand.
		cc.OnNewNode(func(node *redis.Client) { node.AddHook(gateHook{g}) })
		return
	}
	rdb.AddHook(gateHook{g})
}

// gateHook wraps the connections a go-redis client dials.
type gateHook struct{ g *gate }

func (h gateHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return h.g.wrap(c), nil
	}
}

func (gateHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (gateHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// gatedConn passes deadlines through and remembers them for the gate.
type gatedConn struct {
	net.Conn
	g *gate

	mu     sync.Mutex
	rd, wd time.Time
}

func (c *gatedConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	d := c.rd
	c.mu.Unlock()
	if err := c.g.wait(d); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c *gatedConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	d := c.wd
	c.mu.Unlock()
	if err := c.g.wait(d); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

func (c *gatedConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.rd, c.wd = t, t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

func (c *gatedConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.rd = t
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

func (c *gatedConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.wd = t
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

// sleep waits for d or until ctx ends; it reports whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
