package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/redis/go-redis/v9"
)

// replicaAckTimeout is how long the dlock-replica-ack peer lets WAIT wait
// for its replica: well above a local replica's acknowledgement, so that a
// cycle never fails for it.
const replicaAckTimeout = time.Second

// replicaPeers are the peers that need the bench's Redis to have a
// replica, which bench starts when one is named in -peers (every peer of
// that run then runs on a master with one replica: name dlock beside it
// for the cost of the option).
func replicaPeers() []peer {
	return []peer{
		{name: "dlock-replica-ack", waits: "as dlock, with redisdriver.WithReplicaAck(1, 1s): WAIT 1 after every acquisition and renewal, in the same pipeline", newWorker: newDlockReplicaAckWorker, replica: true},
	}
}

func newDlockReplicaAckWorker(e env) (worker, error) {
	rdb := newRedisClient(e.redisAddr)
	drv, err := redisdriver.New(rdb, redisdriver.WithReplicaAck(1, replicaAckTimeout))
	if err != nil {
		rdb.Close()
		return nil, err
	}
	c, err := dlock.New(drv)
	if err != nil {
		rdb.Close()
		return nil, err
	}
	return &dlockWorker{rdb: rdb, c: c, ttl: e.ttl}, nil
}

// startReplica starts a redis-server replicating master, and waits until
// it is in sync.
func startReplica(master string) (*server, error) {
	host, port, err := net.SplitHostPort(master)
	if err != nil {
		return nil, err
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found: %w", err)
	}
	admin := redis.NewClient(&redis.Options{Addr: master})
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A master waits 5 s by default before it sends a new replica its data.
	if err := admin.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err(); err != nil {
		return nil, err
	}
	return startProcess("redis-replica", bin, func(dir string, p [2]int) []string {
		return []string{"--port", strconv.Itoa(p[0]), "--bind", "127.0.0.1", "--save", "",
			"--appendonly", "no", "--dir", dir, "--loglevel", "warning", "--replicaof", host, port}
	}, func(addr string) error {
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		defer rdb.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		info, err := rdb.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "master_link_status:up") {
			return errors.New("replica not in sync yet")
		}
		return nil
	})
}
