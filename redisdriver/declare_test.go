package redisdriver

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/redis/go-redis/v9"
)

// In a Cluster, every key a script touches is one its call named
// (declare), but the record a release moves the previous releaser's value
// to, which is named after an id only the script reads. MONITOR shows each
// script call and then each command the script sends; COMMAND GETKEYS
// names the keys of each. The calls cover every script: plain and waiting
// acquisitions, the fair lock's join and hand-off, readers, permits,
// renewals and releases of each, several locks at once, a forced release.
func TestScriptsNameEveryKeyTheyTouch(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts []Option
	}{{"scripts", nil}, {"functions", []Option{WithFunctions()}}} {
		t.Run(mode.name, func(t *testing.T) {
			nodes := redisserver.StartCluster(t, 1)
			d := newDriver(t, newClusterClient(t, nodes), mode.opts...)
			lines := monitor(t, nodes[0].Addr())
			exerciseScripts(t, d)
			checkDeclared(t, nodes[0].Client(t), lines())
		})
	}
}

// exerciseScripts makes every script call the driver has, on names of one
// slot.
func exerciseScripts(t *testing.T, d *Driver) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	check := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	const k, r, p = "{dk}:lock", "{dk}:read", "{dk}:permit"
	q := func(key, id string, mode driver.Mode, wait bool) driver.QueueRequest {
		return driver.QueueRequest{Key: key, ID: id, TTL: time.Minute, Mode: mode, Wait: wait, Inbox: "box", Limit: 2}
	}
	rel := func(kind driver.Kind, key, id string) {
		t.Helper()
		_, err := d.Release(ctx, []driver.ReleaseRequest{{Kind: kind, Key: key, ID: id}})
		check("release "+id, err)
	}
	mustAcquire(t, d, k, "a")
	mustWaitFor(t, d, k) // the waiting mark
	mustRelease(t, d, k, "a")
	mustAcquire(t, d, k, "b") // :last holds a's release
	mustRelease(t, d, k, "b") // a's record moves to its own key
	for _, id := range []string{"c", "d", "e"} {
		_, err := d.Enqueue(ctx, q(k, id, driver.ModeExclusive, true))
		check("enqueue "+id, err)
	}
	rel(driver.KindLock, k, "c")   // hand-off to d
	rel(driver.KindWaiter, k, "e") // a waiter leaves
	_, err := d.Renew(ctx, []driver.RenewRequest{{Key: k, ID: "d", TTL: time.Minute}})
	check("renew", err)
	rel(driver.KindLock, k, "d")
	for _, id := range []string{"r1", "r2"} {
		_, err := d.Enqueue(ctx, q(r, id, driver.ModeShared, false))
		check("read "+id, err)
		_, err = d.Enqueue(ctx, q(p, id, driver.ModePermit, false))
		check("permit "+id, err)
	}
	_, err = d.Renew(ctx, []driver.RenewRequest{{Kind: driver.KindRead, Key: r, ID: "r1", TTL: time.Minute},
		{Kind: driver.KindPermit, Key: p, ID: "r1", TTL: time.Minute}, {Key: k, ID: "nobody", TTL: time.Minute}})
	check("renew batch", err)
	_, err = d.Release(ctx, []driver.ReleaseRequest{{Kind: driver.KindRead, Key: r, ID: "r1"},
		{Kind: driver.KindPermit, Key: p, ID: "r1"}, {Key: k, ID: "nobody"}})
	check("release batch", err)
	_, err = d.AcquireAll(ctx, []driver.AcquireRequest{{Key: "{dk}:x", ID: "m", TTL: time.Minute}, {Key: r, ID: "m", TTL: time.Minute}})
	check("acquire all", err)
	mustAcquire(t, d, k, "f")
	_, _, err = d.ForceRelease(ctx, k)
	check("force release", err)
}

// monitor starts MONITOR on addr and returns what reads the lines it has
// sent so far, once the server answers a PING after them.
func monitor(t *testing.T, addr string) func() []string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(conn)
	if line, err := rd.ReadString('\n'); err != nil || line != "+OK\r\n" {
		t.Fatalf("MONITOR: %q, %v", line, err)
	}
	var mu sync.Mutex
	var lines []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			mu.Lock()
			lines = append(lines, strings.TrimSuffix(line, "\r\n"))
			mu.Unlock()
		}
	}()
	return func() []string {
		// An ECHO of a mark is the last line to wait for.
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		if err := c.Echo(context.Background(), "monitor-end").Err(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			n := len(lines)
			end := n > 0 && strings.Contains(lines[n-1], `"monitor-end"`)
			mu.Unlock()
			if end {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("MONITOR did not show the end mark")
			}
			time.Sleep(5 * time.Millisecond) // polling interval, not a synchronisation
		}
		_ = conn.Close()
		<-done
		return lines
	}
}

// checkDeclared checks, in MONITOR's lines, that each command a script
// sent touched only keys its call named.
func checkDeclared(t *testing.T, rdb *redis.Client, lines []string) {
	t.Helper()
	ctx := context.Background()
	var declared map[string]bool
	calls := 0
	for _, line := range lines {
		args, lua, err := parseMonitorLine(line)
		if err != nil {
			t.Fatalf("%v in %q", err, line)
		}
		if len(args) == 0 {
			continue
		}
		if !lua {
			declared = nil
			switch strings.ToUpper(args[0]) {
			case "EVALSHA", "EVAL", "FCALL":
				n, _ := strconv.Atoi(args[2])
				declared = map[string]bool{}
				for _, k := range args[3 : 3+n] {
					declared[k] = true
				}
				calls++
			}
			continue
		}
		if declared == nil {
			t.Fatalf("a script's command without a script call: %q", line)
		}
		getkeys := append([]any{"COMMAND", "GETKEYS"}, toAny(args)...)
		keys, err := rdb.Do(ctx, getkeys...).StringSlice()
		if err != nil {
			continue // no keys (TIME, PUBLISH)
		}
		for i, k := range keys {
			previousRecord := strings.ToUpper(args[0]) == "RENAME" && i == 1 && strings.Contains(k, releaseInfix)
			if !declared[k] && !previousRecord {
				t.Errorf("undeclared key %q in %q", k, line)
			}
		}
	}
	if calls < 20 {
		t.Fatalf("%d script calls seen, want at least 20", calls)
	}
}

func toAny(s []string) []any {
	a := make([]any, len(s))
	for i, v := range s {
		a[i] = v
	}
	return a
}

// parseMonitorLine reads a MONITOR line: `<time> [<db> <client>] "arg" ...`,
// the client "lua" for a script's commands. Arguments are quoted with
// backslash escapes (\" \\ \n \r \t \a \b \xHH).
func parseMonitorLine(line string) (args []string, lua bool, err error) {
	open := strings.IndexByte(line, '[')
	end := strings.IndexByte(line, ']')
	if open < 0 || end < open {
		return nil, false, fmt.Errorf("no client")
	}
	lua = strings.HasSuffix(line[open:end], " lua")
	rest := line[end+1:]
	for i := 0; i < len(rest); i++ {
		if rest[i] != '"' {
			continue
		}
		var b strings.Builder
		for i++; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] != '\\' || i+1 >= len(rest) {
				b.WriteByte(rest[i])
				continue
			}
			i++
			switch rest[i] {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 'x':
				v, err := strconv.ParseUint(rest[i+1:i+3], 16, 8)
				if err != nil {
					return nil, false, err
				}
				b.WriteByte(byte(v))
				i += 2
			default:
				b.WriteByte(rest[i])
			}
		}
		args = append(args, b.String())
	}
	return args, lua, nil
}
