package redisserver

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// verifyNoLeaks registers a goroutine leak check. Register it first: cleanups
// run last-in first-out, so it runs after clients, proxies and servers are
// closed.
func verifyNoLeaks(t *testing.T) {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t) })
}

func isDeadline(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

func TestProxyFaults(t *testing.T) {
	verifyNoLeaks(t)
	srv := Start(t)
	p := NewProxy(t, srv.Addr())
	c := NewClient(t, p.Addr())
	ctx := t.Context()

	// (a) plain forwarding.
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING through proxy: %v", err)
	}

	// (b) latency is a lower bound on a round trip.
	const latency = 200 * time.Millisecond
	p.SetLatency(latency)
	start := time.Now()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING with latency: %v", err)
	}
	if el := time.Since(start); el < latency {
		t.Fatalf("PING with %v latency took only %v", latency, el)
	}
	p.SetLatency(0)

	// (c) blackhole: the request times out without a connection error.
	p.Blackhole(true)
	tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	start = time.Now()
	err := c.Ping(tctx).Err()
	cancel()
	if !isDeadline(err) {
		t.Fatalf("PING in blackhole: err = %v, want a deadline error", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("PING in blackhole took %v, want about 300ms", el)
	}
	p.Blackhole(false)
	p.CloseAll()
	tctx, cancel = context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Ping(tctx).Err(); err != nil {
		t.Fatalf("PING after blackhole and CloseAll: %v", err)
	}
}

// startEcho starts a line echo server, shut down when t ends. Every echoed
// line is written separately and then announced on the returned channel.
func startEcho(t *testing.T) (string, <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	echoed := make(chan struct{}, 1024)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := io.WriteString(c, line); err != nil {
						return
					}
					echoed <- struct{}{}
				}
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String(), echoed
}

func TestProxyLatencyKeepsOrderWithoutSerialising(t *testing.T) {
	verifyNoLeaks(t)
	echo, echoed := startEcho(t)
	p := NewProxy(t, echo)
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	r := bufio.NewReader(conn)

	const latency = 150 * time.Millisecond
	const msgs = 20
	p.SetLatency(latency)
	start := time.Now()
	for i := range msgs {
		if _, err := conn.Write([]byte(strconv.Itoa(i) + "\n")); err != nil {
			t.Fatal(err)
		}
		// Let the echo server answer before sending the next line, so the
		// replies are (almost always) separate chunks queued in the proxy.
		<-echoed
	}
	for i := range msgs {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line != strconv.Itoa(i)+"\n" {
			t.Fatalf("got %q, want %d (order not kept)", line, i)
		}
	}
	el := time.Since(start)
	if el < latency {
		t.Fatalf("took %v, want at least %v", el, latency)
	}
	if el > 6*latency {
		t.Fatalf("took %v: delays look serialised (latency %v, %d messages)", el, latency, msgs)
	}
}

func TestProxyCloseStopsEverything(t *testing.T) {
	verifyNoLeaks(t)
	echo, _ := startEcho(t)
	p := NewProxy(t, echo)
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("x\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(conn, make([]byte, 2)); err != nil {
		t.Fatal(err)
	}

	p.CloseAll()
	if _, err := io.ReadFull(conn, make([]byte, 1)); err == nil {
		t.Fatal("read succeeded after CloseAll")
	}

	p.Close()
	p.Close() // idempotent
	if c, err := net.Dial("tcp", p.Addr()); err == nil {
		c.Close()
		t.Fatal("dial succeeded after Close")
	}
}

// While Refuse is on, a new connection through the proxy fails and the
// connections open before stay up; once it is off, new ones get through.
func TestProxyRefuse(t *testing.T) {
	verifyNoLeaks(t)
	srv := Start(t)
	p := NewProxy(t, srv.Addr())
	before := NewClient(t, p.Addr())
	ctx := t.Context()
	if err := before.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING through proxy: %v", err)
	}
	p.Refuse(true)
	if _, err := command(p.Addr(), time.Second, "PING"); err == nil {
		t.Fatal("PING on a new connection while refusing: no error")
	}
	if err := before.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING on a connection made before the refusal: %v", err)
	}
	p.Refuse(false)
	if got, err := command(p.Addr(), time.Second, "PING"); err != nil || got != "PONG" {
		t.Fatalf("PING on a new connection after the refusal: %q, %v", got, err)
	}
}
