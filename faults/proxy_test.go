package faults

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// switchProxy forwards TCP connections to a target that can be changed, to
// move workers to a promoted replica without reconfiguring them, and that can
// be partitioned. During a partition the bytes of both directions are held;
// when it heals they are delivered in order, as TCP's retransmissions deliver
// them once a network black hole is repaired. Connections are never reset by a
// partition: a client that gives up closes its side, and what it had sent
// still arrives, late. (redisserver.Proxy's Blackhole drops bytes instead, a
// black hole followed by resets.)
type switchProxy struct {
	ln net.Listener

	mu     sync.Mutex
	target string
	heal   chan struct{} // non-nil while partitioned; closed when it heals
	conns  map[*pipeConn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// newSwitchProxy starts a proxy to target, closed when t ends.
func newSwitchProxy(t testing.TB, target string) *switchProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &switchProxy{ln: ln, target: target, conns: make(map[*pipeConn]struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

func (p *switchProxy) Addr() string { return p.ln.Addr().String() }

// SetTarget sends new connections to addr. Existing ones keep their server;
// CloseAll resets them.
func (p *switchProxy) SetTarget(addr string) {
	p.mu.Lock()
	p.target = addr
	p.mu.Unlock()
}

// Partition starts (on) or heals a partition.
func (p *switchProxy) Partition(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case on && p.heal == nil:
		p.heal = make(chan struct{})
	case !on && p.heal != nil:
		close(p.heal)
		p.heal = nil
	}
}

// CloseAll resets every current connection; held bytes are dropped.
func (p *switchProxy) CloseAll() {
	p.mu.Lock()
	conns := make([]*pipeConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.abort(true)
	}
}

// Close stops the proxy and waits for its goroutines. It is idempotent.
func (p *switchProxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	_ = p.ln.Close()
	p.CloseAll()
	p.wg.Wait()
}

func (p *switchProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = c.Close()
			return
		}
		pc := &pipeConn{client: c, done: make(chan struct{})}
		p.conns[pc] = struct{}{}
		target := p.target
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(pc, target)
	}
}

func (p *switchProxy) serve(pc *pipeConn, target string) {
	defer p.wg.Done()
	defer func() {
		pc.abort(false)
		p.mu.Lock()
		delete(p.conns, pc)
		p.mu.Unlock()
	}()
	srv, err := net.DialTimeout("tcp", target, 2*time.Second)
	if err != nil || !pc.setServer(srv) {
		return
	}
	var pumps sync.WaitGroup
	pumps.Add(2)
	go func() { defer pumps.Done(); p.pump(pc, srv, pc.client) }()
	go func() { defer pumps.Done(); p.pump(pc, pc.client, srv) }()
	pumps.Wait()
}

// pump copies src to dst, holding data during partitions. When dst fails it
// keeps reading src (discarding), so the other direction can still deliver
// what it holds; at EOF it half-closes dst.
func (p *switchProxy) pump(pc *pipeConn, dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	broken := false
	for {
		n, err := src.Read(buf)
		if n > 0 && !broken {
			if !p.pass(pc) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				broken = true
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
			} else {
				pc.abort(false)
			}
			return
		}
	}
}

// pass waits out a partition. It reports false if the connection was
// aborted meanwhile.
func (p *switchProxy) pass(pc *pipeConn) bool {
	p.mu.Lock()
	heal := p.heal
	p.mu.Unlock()
	if heal == nil {
		return true
	}
	select {
	case <-heal:
		return true
	case <-pc.done:
		return false
	}
}

// pipeConn is one proxied connection.
type pipeConn struct {
	client net.Conn
	done   chan struct{}

	mu      sync.Mutex
	server  net.Conn
	aborted bool
}

func (c *pipeConn) setServer(s net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.aborted {
		_ = s.Close()
		return false
	}
	c.server = s
	return true
}

// abort closes both sides, with a reset if asked. Safe to repeat.
func (c *pipeConn) abort(reset bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.aborted {
		return
	}
	c.aborted = true
	close(c.done)
	for _, nc := range []net.Conn{c.client, c.server} {
		if nc == nil {
			continue
		}
		if tc, ok := nc.(*net.TCPConn); ok && reset {
			_ = tc.SetLinger(0)
		}
		_ = nc.Close()
	}
}
