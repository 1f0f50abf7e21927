package main

import (
	"context"
	"net"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"google.golang.org/grpc"
)

// roundTrips counts requests the peers' clients sent to a store; a
// pipeline counts once. Subscriptions are counted on the server (see
// readRedisStats), since go-redis sends them outside its hooks.
var roundTrips atomic.Int64

// countHook counts go-redis commands and pipelines.
type countHook struct{}

func (countHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

func (countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		roundTrips.Add(1)
		return next(ctx, cmd)
	}
}

func (countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		roundTrips.Add(1)
		return next(ctx, cmds)
	}
}

// countingRueidis counts the requests rueidislock sends (it uses Do only).
type countingRueidis struct{ rueidis.Client }

func (c countingRueidis) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	roundTrips.Add(1)
	return c.Client.Do(ctx, cmd)
}

func (c countingRueidis) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	roundTrips.Add(1)
	return c.Client.DoMulti(ctx, multi...)
}

// countUnary counts etcd's unary calls (Txn, Range, Delete, ...).
func countUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	roundTrips.Add(1)
	return invoker(ctx, method, req, reply, cc, opts...)
}

// countStream counts etcd streams opened: a LeaseKeepAliveOnce opens one
// (a round trip); a watch stream or a session's keep-alive stream counts
// once however many messages it carries.
func countStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
	streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	roundTrips.Add(1)
	return streamer(ctx, desc, cc, method, opts...)
}
