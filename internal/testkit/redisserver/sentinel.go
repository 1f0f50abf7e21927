package redisserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelName is the name under which StartSentinel's Sentinel monitors
// its master.
const SentinelName = "primary"

// SentinelDeployment is a master with one replica, monitored by one
// Sentinel, for tests of failover. The replica replicates through Link, a
// Proxy, so that a test can cut the replication link (Link.Blackhole)
// while clients still reach both servers.
type SentinelDeployment struct {
	Master   *Server
	Replica  *Server
	Link     *Proxy // between Replica and Master: the replication link
	Sentinel *Server
}

// StartSentinel starts a master, a replica of it that replicates through
// a Proxy, and a Sentinel monitoring the master as SentinelName with a
// quorum of 1 and a down-after of 1 s. It returns once the replica is in
// sync and the Sentinel knows it. It skips when DLOCK_TEST_REDIS is set.
func StartSentinel(t testing.TB) *SentinelDeployment {
	t.Helper()
	if os.Getenv(EnvAddr) != "" {
		t.Skip("redisserver: a Sentinel deployment needs servers started by the test")
	}
	d := &SentinelDeployment{Master: Start(t)}
	d.Link = NewProxy(t, d.Master.Addr())
	host, port, _ := net.SplitHostPort(d.Link.Addr())
	// A master waits 5 s by default before it sends a new replica its
	// data, for more replicas to share the transfer: none will.
	d.Master.configSet(t, "repl-diskless-sync-delay", "0")
	d.Replica = Start(t, WithArgs("--replicaof", host, port))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waitFor(ctx, t, "replica "+d.Replica.Addr()+" in sync", func() bool {
		info, err := command(d.Replica.Addr(), time.Second, "INFO", "replication")
		return err == nil && infoField(info, "master_link_status") == "up"
	})
	// Started after the replica is in sync: a Sentinel learns of replicas
	// from its master's INFO, which it reads at once and then every 10 s.
	d.Sentinel = Start(t, WithArgs("--sentinel"), WithConfigFile(fmt.Sprintf(
		"sentinel monitor %s 127.0.0.1 %d 1\nsentinel down-after-milliseconds %[1]s 1000\nsentinel failover-timeout %[1]s 5000\n",
		SentinelName, d.Master.Port())))
	sc := d.sentinelClient(t)
	waitFor(ctx, t, "the Sentinel knowing the replica", func() bool {
		replicas, err := sc.Replicas(ctx, SentinelName).Result()
		for _, r := range replicas {
			if err == nil && r["port"] == strconv.Itoa(d.Replica.Port()) && !strings.Contains(r["flags"], "disconnected") {
				return true
			}
		}
		return false
	})
	return d
}

// sentinelClient returns a client of the Sentinel, closed when t ends.
func (d *SentinelDeployment) sentinelClient(t testing.TB) *redis.SentinelClient {
	sc := redis.NewSentinelClient(&redis.Options{Addr: d.Sentinel.Addr()})
	t.Cleanup(func() { _ = sc.Close() })
	return sc
}

// Failover has the Sentinel promote the replica (SENTINEL FAILOVER, which
// needs no agreement and no failure) and waits, for up to 30 s, until the
// replica is a master and the Sentinel names it as SentinelName's.
func (d *SentinelDeployment) Failover(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sc := d.sentinelClient(t)
	if err := sc.Failover(ctx, SentinelName).Err(); err != nil {
		t.Fatalf("redisserver: SENTINEL FAILOVER: %v", err)
	}
	waitFor(ctx, t, "replica "+d.Replica.Addr()+" promoted", func() bool {
		info, err := command(d.Replica.Addr(), time.Second, "INFO", "replication")
		if err != nil || infoField(info, "role") != "master" {
			return false
		}
		addr, err := sc.GetMasterAddrByName(ctx, SentinelName).Result()
		return err == nil && len(addr) == 2 && addr[1] == strconv.Itoa(d.Replica.Port())
	})
}

// configSet sets a configuration parameter of the running server.
func (s *Server) configSet(t testing.TB, name, value string) {
	t.Helper()
	if _, err := command(s.addr, 5*time.Second, "CONFIG", "SET", name, value); err != nil {
		t.Fatalf("redisserver: CONFIG SET %s %s on %s: %v", name, value, s.addr, err)
	}
}
