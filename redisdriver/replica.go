package redisdriver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// ErrReplicaAck is the error of an acquisition or renewal that fewer
// replicas acknowledged than WithReplicaAck (or WithAOFAck) asks for
// within its timeout. A dlock Client reports it wrapped in
// dlock.ErrBackend, so errors.Is matches both. The acquisition is released
// (as every acquisition that fails is, by its owner id), and the renewal
// does not move the lease's validity deadline.
var ErrReplicaAck = errors.New("redisdriver: too few replicas acknowledged the write")

// replicaAck is what WithReplicaAck and WithAOFAck ask of every call that
// takes or extends a lease.
type replicaAck struct {
	replicas int           // replicas that must acknowledge (WAIT), or have fsynced (WAITAOF)
	local    int           // WAITAOF only: 1 when the master must have fsynced too
	aof      bool          // WAITAOF rather than WAIT
	timeout  time.Duration // how long the server waits for them
}

// WithReplicaAck makes every acquisition, and every renewal that moves a
// lease's expiry, wait until at least replicas replicas have acknowledged
// it, or timeout passes: the Driver sends WAIT replicas timeout after the
// call, in the same pipeline (one round trip), on the connection that made
// the write. Redis replicates asynchronously: a lock written on a master
// that fails over before any replica has it is lost, and the promoted
// replica grants it again (docs/reliability.md). With the option, an
// acquisition that too few replicas confirmed fails with an error matching
// ErrReplicaAck (and dlock.ErrBackend), and is released; Lock returns it
// rather than waiting on (the replicas it needs are down or far behind,
// which the next try would meet again; the caller decides whether to wait
// for them). A renewal that too few confirmed does not extend the lease's
// validity deadline: renewals go on, and the lease is lost at its deadline
// if none is confirmed before. The deadline still counts from before the
// request was sent, so the time WAIT takes comes off it.
//
// It does not make Redis consistent: a failover may still promote a
// replica that missed the write (Sentinel and Cluster prefer the one that
// has the most), and a replica's acknowledgement is not a write to its
// disk (WithAOFAck). Fencing tokens cover what is left
// (docs/fencing.md). The cost per cycle is in docs/benchmarks.md.
//
// The option is the Driver's, so every lock of the dlock Client made with
// it: for some locks only, make a second Client with a Driver with the
// option over the same go-redis client (both share its connections; locks
// of one name must all be taken through one of them to get the promise).
// It needs a client of one master (a plain client, or a Sentinel failover
// client) or a Cluster client, whose calls then go to the master of their
// slot directly, each with its WAIT; New refuses it on a Ring. It has no URL
// parameter: ParseURL makes the go-redis client, which carries no driver
// options, and Open uses the defaults; pass the option to New with a
// client from ParseURL. timeout must be
// at least a millisecond, and below the client's ReadTimeout, which
// bounds the pipeline's reply.
func WithReplicaAck(replicas int, timeout time.Duration) Option {
	return func(d *Driver) error {
		if replicas < 1 || timeout < time.Millisecond {
			return fmt.Errorf("%w: replica ack of %d replicas within %v (want at least 1, and 1ms)", driver.ErrInvalid, replicas, timeout)
		}
		d.ack = &replicaAck{replicas: replicas, timeout: timeout}
		return nil
	}
}

// WithAOFAck is WithReplicaAck with WAITAOF (Redis 7.2 and later) instead
// of WAIT: every acquisition and renewal waits until the master (when
// local is 1) and replicas replicas have written it to their append-only
// files, with their appendfsync policy. Whether the server has WAITAOF is
// learnt from its answer, never assumed: on a server without it every
// acquisition fails with an error matching ErrReplicaAck and
// errors.ErrUnsupported. local is 0 or 1; replicas and local are not both
// 0.
func WithAOFAck(local, replicas int, timeout time.Duration) Option {
	return func(d *Driver) error {
		if local < 0 || local > 1 || replicas < 0 || local+replicas == 0 || timeout < time.Millisecond {
			return fmt.Errorf("%w: AOF ack of %d local and %d replicas within %v", driver.ErrInvalid, local, replicas, timeout)
		}
		d.ack = &replicaAck{replicas: replicas, local: local, aof: true, timeout: timeout}
		return nil
	}
}

// checkAck refuses a replica ack the client cannot give (called by New).
func (d *Driver) checkAck() error {
	if d.ack == nil {
		return nil
	}
	var read time.Duration
	switch c := d.rdb.(type) {
	case *redis.Client:
		read = c.Options().ReadTimeout
	case *redis.ClusterClient:
		read = c.Options().ReadTimeout
	default:
		return fmt.Errorf("%w: %w: redisdriver: replica acknowledgement needs a client of one master or a Cluster client (not %T)",
			driver.ErrInvalid, errors.ErrUnsupported, d.rdb)
	}
	if read == 0 {
		read = 3 * time.Second // go-redis's default
	}
	if read > 0 && d.ack.timeout >= read {
		return fmt.Errorf("%w: redisdriver: replica ack timeout %v not below the client's ReadTimeout %v",
			driver.ErrInvalid, d.ack.timeout, read)
	}
	return nil
}

// acked reports whether calls of s take or extend leases, and so wait for
// the replicas under WithReplicaAck.
func acked(s *script) bool {
	switch s {
	case acquireScript, enqueueScript, acquireAllScript, renewScript, queueRenewScript:
		return true
	}
	return false
}

// runAcked is runCode for a call of s (acked) on a Driver with a replica
// ack: the call and the WAIT (or WAITAOF) in one pipeline, on one
// connection, whose writes are the ones WAIT counts. A reply that holds a
// lease (holds) the replicas did not confirm becomes an ErrReplicaAck.
func (d *Driver) runAcked(ctx context.Context, s *script, keys []string, args ...any) *redis.Cmd {
	loads, functions := d.useFunctions(ctx)
	body := false // EVAL rather than EVALSHA: the server lacks the script
	for try := 0; ; try++ {
		p, err := d.ackPipeline(ctx, keys)
		if err != nil {
			cmd := redis.NewCmd(ctx)
			cmd.SetErr(err)
			return cmd
		}
		var cmd *redis.Cmd
		switch {
		case functions:
			cmd = p.FCall(ctx, s.fn, keys, args...)
		case body:
			cmd = p.Eval(ctx, s.src, keys, args...)
		default:
			cmd = p.EvalSha(ctx, s.sha, keys, args...)
		}
		confirmed := d.ack.send(ctx, p)
		_, _ = p.Exec(ctx)
		if e := cmd.Err(); try < 2 {
			switch {
			case !functions && isNoScript(e):
				body = true
				continue
			case functions && isNoFunction(e):
				if err := d.load(ctx, loads); err != nil {
					functions = false // as a script this once (runCode)
					if errors.Is(err, errNoFunctions) {
						d.noFunctions.Store(true)
					}
				}
				continue
			case functions && (refusedCall(e) || refusedByFlags(e)):
				if refusedCall(e) {
					d.noFunctions.Store(true)
				}
				functions = false
				continue
			}
		}
		if cmd.Err() == nil && holds(s, cmd.Val()) {
			if err := confirmed(); err != nil {
				cmd.SetErr(err)
			}
		}
		return cmd
	}
}

// ackPipeline returns a pipeline on one connection to the master of
// keys[0]: the client's own, or in a Cluster that master's. A WAIT has no
// key, so a Cluster client would send it to another node than the write's.
// A node that no longer serves the slot answers MOVED (or, mid-migration,
// ASK or TRYAGAIN) before the script runs; run then reloads the layout or
// waits for the migration, and tries again.
func (d *Driver) ackPipeline(ctx context.Context, keys []string) (redis.Pipeliner, error) {
	if d.cluster == nil {
		return d.rdb.Pipeline(), nil
	}
	node, err := d.cluster.MasterForKey(ctx, keys[0])
	if err != nil {
		return nil, err
	}
	return node.Pipeline(), nil
}

// send adds the WAIT (or WAITAOF) to p, and returns what reads its answer:
// nil when enough replicas confirmed.
func (a *replicaAck) send(ctx context.Context, p redis.Pipeliner) func() error {
	if !a.aof {
		wait := p.Do(ctx, "WAIT", a.replicas, a.timeout.Milliseconds())
		return func() error {
			n, err := wait.Int64()
			if err != nil {
				return fmt.Errorf("%w: WAIT: %w", ErrReplicaAck, err)
			}
			if int(n) < a.replicas {
				return fmt.Errorf("%w: %d of %d replicas within %v", ErrReplicaAck, n, a.replicas, a.timeout)
			}
			return nil
		}
	}
	wait := p.Do(ctx, "WAITAOF", a.local, a.replicas, a.timeout.Milliseconds())
	return func() error {
		n, err := wait.Int64Slice()
		switch {
		case err != nil && strings.HasPrefix(err.Error(), "ERR unknown command"):
			return fmt.Errorf("%w: %w: the server has no WAITAOF (Redis 7.2 and later): %w", ErrReplicaAck, errors.ErrUnsupported, err)
		case err != nil:
			return fmt.Errorf("%w: WAITAOF: %w", ErrReplicaAck, err)
		case len(n) != 2:
			return fmt.Errorf("%w: WAITAOF answered %v", ErrReplicaAck, n)
		case int(n[0]) < a.local || int(n[1]) < a.replicas:
			return fmt.Errorf("%w: fsynced locally %d of %d, on %d of %d replicas within %v",
				ErrReplicaAck, n[0], a.local, n[1], a.replicas, a.timeout)
		}
		return nil
	}
}

// holds reports whether reply, of a call of s, says the caller holds or
// extended a lease: a token (acquire.lua, enqueue.lua, acquire_all.lua),
// or a renewal's digits with at least one EXTENDED. A refusal or a queued
// place needs no replica: it gives the caller nothing to lose.
func holds(s *script, reply any) bool {
	str, ok := reply.(string)
	if !ok {
		return false
	}
	if s == renewScript || s == queueRenewScript {
		for i := 0; i < len(str); i++ {
			if int(str[i]-'0') == replyExtended {
				return true
			}
		}
		return false
	}
	return true
}
