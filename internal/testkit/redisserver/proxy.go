package redisserver

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	dialTimeout = 5 * time.Second
	chunkSize   = 32 << 10
	queueLen    = 64 // chunks buffered per connection in the server→client direction
)

// Proxy is an in-process TCP proxy on a loopback port that forwards every
// accepted connection to a target address, with switches for fault
// injection: added latency, a blackhole and connection resets. All methods
// are safe for concurrent use.
type Proxy struct {
	target string
	ln     net.Listener
	ctx    context.Context // cancelled by Close; aborts pending dials
	cancel context.CancelFunc

	latency   atomic.Int64 // time.Duration added to server→client data
	blackhole atomic.Bool
	refuse    atomic.Bool

	mu     sync.Mutex
	closed bool
	conns  map[*proxyConn]struct{}
	wg     sync.WaitGroup // every goroutine started by the proxy
}

// NewProxy starts a proxy listening on 127.0.0.1:0 that forwards to target.
// It is closed, together with all its connections and goroutines, when t
// ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redisserver: proxy listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		target: target,
		ln:     ln,
		ctx:    ctx,
		cancel: cancel,
		conns:  make(map[*proxyConn]struct{}),
	}
	p.wg.Add(1)
	go p.acceptLoop()
	t.Cleanup(p.Close)
	return p
}

// Addr returns the proxy's listening address as host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetLatency delays every chunk forwarded from the server to the client by
// d, measured from when the proxy read it. It applies to data read after the
// call; order is always preserved. Chunks are queued per connection, so the
// delay is added once rather than once per chunk. Zero disables it.
func (p *Proxy) SetLatency(d time.Duration) { p.latency.Store(int64(max(d, 0))) }

// Blackhole switches the blackhole on or off. While it is on, bytes in both
// directions are read and silently dropped (including data that was queued
// for delayed delivery) while connections stay open, like a network
// partition without resets. New connections are still accepted. Dropped
// bytes leave the protocol stream corrupted, so call CloseAll after turning
// it off.
func (p *Proxy) Blackhole(on bool) { p.blackhole.Store(on) }

// Refuse switches refusal on or off. While it is on, every new connection
// is reset as soon as it is accepted, as by a server that is down, and
// current connections are left alone (CloseAll ends them). Clients that
// reconnect meanwhile fail, and get through once it is off.
func (p *Proxy) Refuse(on bool) { p.refuse.Store(on) }

// CloseAll resets all current connections (SO_LINGER 0, so peers see a
// reset); clients get errors and must reconnect. The proxy keeps accepting.
func (p *Proxy) CloseAll() {
	for _, c := range p.snapshot() {
		c.close(true)
	}
}

// Close stops the proxy: it closes the listener and all connections and
// waits for all goroutines to exit. It is idempotent and is called
// automatically when the test ends.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	_ = p.ln.Close()
	for _, c := range p.snapshot() {
		c.close(false)
	}
	p.wg.Wait()
}

func (p *Proxy) snapshot() []*proxyConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		out = append(out, c)
	}
	return out
}

// goTracked starts fn in a goroutine counted in p.wg unless the proxy is
// closed. The caller must itself be counted in p.wg (or hold the initial
// count), which makes the Add legal while Close is waiting.
func (p *Proxy) goTracked(fn func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		fn()
	}()
	return true
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // listener closed (or broken): stop accepting
		}
		if p.refuse.Load() {
			if tc, ok := client.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // a reset, not an orderly close
			}
			_ = client.Close()
			continue
		}
		if !p.goTracked(func() { p.serve(client) }) {
			_ = client.Close()
		}
	}
}

// serve connects client to the target and pumps data until either side
// fails or the connection is closed.
func (p *Proxy) serve(client net.Conn) {
	d := net.Dialer{Timeout: dialTimeout}
	server, err := d.DialContext(p.ctx, "tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	c := &proxyConn{
		client: client,
		server: server,
		queue:  make(chan chunk, queueLen),
		done:   make(chan struct{}),
	}

	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		c.close(false)
		return
	}
	p.conns[c] = struct{}{}
	p.mu.Unlock()
	defer func() {
		c.close(false)
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()

	if !p.goTracked(func() { p.upstream(c) }) || !p.goTracked(func() { p.readDownstream(c) }) {
		return
	}
	p.writeDownstream(c)
}

// upstream copies client→server, dropping data while blackholed.
func (p *Proxy) upstream(c *proxyConn) {
	defer c.close(false)
	buf := make([]byte, chunkSize)
	for {
		n, err := c.client.Read(buf)
		if n > 0 && !p.blackhole.Load() {
			if _, werr := c.server.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// readDownstream reads server→client data and queues it with its delivery
// time. On EOF it closes the queue so the writer can drain pending chunks.
func (p *Proxy) readDownstream(c *proxyConn) {
	buf := make([]byte, chunkSize)
	for {
		n, err := c.server.Read(buf)
		if n > 0 && !p.blackhole.Load() {
			ch := chunk{
				data: append([]byte(nil), buf[:n]...),
				due:  time.Now().Add(time.Duration(p.latency.Load())),
			}
			select {
			case c.queue <- ch:
			case <-c.done:
				return
			}
		}
		if err != nil {
			close(c.queue)
			return
		}
	}
}

// writeDownstream delivers queued chunks to the client once they are due.
func (p *Proxy) writeDownstream(c *proxyConn) {
	for {
		var ch chunk
		select {
		case next, ok := <-c.queue:
			if !ok {
				return
			}
			ch = next
		case <-c.done:
			return
		}
		if wait := time.Until(ch.due); wait > 0 {
			timer := time.NewTimer(wait)
			select {
			case <-timer.C:
			case <-c.done:
				timer.Stop()
				return
			}
		}
		if p.blackhole.Load() {
			continue
		}
		if _, err := c.client.Write(ch.data); err != nil {
			return
		}
	}
}

// chunk is data read from the server, to be written to the client at due.
type chunk struct {
	data []byte
	due  time.Time
}

// proxyConn is one proxied client connection and its server connection.
type proxyConn struct {
	client, server net.Conn
	queue          chan chunk
	done           chan struct{} // closed by close
	once           sync.Once
}

// close closes both connections, optionally resetting them, and signals
// done. Safe to call repeatedly and concurrently.
func (c *proxyConn) close(reset bool) {
	c.once.Do(func() {
		if reset {
			for _, nc := range []net.Conn{c.client, c.server} {
				if tc, ok := nc.(*net.TCPConn); ok {
					_ = tc.SetLinger(0)
				}
			}
		}
		_ = c.client.Close()
		_ = c.server.Close()
		close(c.done)
	})
}
