package etcddriver

import (
	"context"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
)

// The etcd client sends every call with gRPC's wait-for-ready: while no
// endpoint accepts connections, a call waits for one until its deadline
// (the driver's request timeout), then fails with a bare "context deadline
// exceeded". The clients of ParseEndpoints' configurations instead fail a
// call at once once gRPC's connection attempts to every endpoint have
// failed, with the last attempt's error (a refused connection, a TLS
// handshake that failed), naming the endpoints. A call still waits while a
// connection is being made, and a call to a connected endpoint is not
// affected: an etcd member that answers "unavailable" (no leader) is
// retried by the etcd client as before. Watches wait as before.

// Reconnection of the clients of ParseEndpoints' configurations. gRPC
// waits longer after each failed connection attempt, up to two minutes by
// default: after an outage of a minute, calls would go on failing for
// tens of seconds after etcd is back, every lock's renewal with them. A
// fail-fast call fails at once in that time, so the wait is kept short.
const (
	reconnectDelay = time.Second
	// connectTimeout is gRPC's default, which ConnectParams replaces:
	// how long one connection attempt (TCP and TLS handshakes) may take.
	connectTimeout = 20 * time.Second
)

// failFastDialOptions are the gRPC options that make an etcd client's
// calls fail fast, and its connection attempts frequent; shown is the
// endpoint list for messages.
func failFastDialOptions(shown string) []grpc.DialOption {
	ff := failFast{shown: shown}
	bc := backoff.DefaultConfig
	bc.BaseDelay, bc.MaxDelay = reconnectDelay, reconnectDelay
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(ff.unary),
		grpc.WithChainStreamInterceptor(ff.stream),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bc, MinConnectTimeout: connectTimeout}),
	}
}

// failFast turns the calls of one etcd client into fail-fast calls.
type failFast struct {
	shown string
}

func (f failFast) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	// The last option of a kind wins: this one overrides the etcd
	// client's wait-for-ready, which comes with opts.
	err := invoker(ctx, method, req, reply, cc, append(opts, grpc.WaitForReady(false))...)
	return f.check(cc, err)
}

func (f failFast) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
	streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if method == pb.Watch_Watch_FullMethodName {
		// A watch has no deadline: it waits for a connection, as the etcd
		// client means it to, and the driver's watches (expiry,
		// wake-ups) resume when one is made.
		return streamer(ctx, desc, cc, method, opts...)
	}
	// The other streams are calls: a lease keep-alive, sent once.
	s, err := streamer(ctx, desc, cc, method, append(opts, grpc.WaitForReady(false))...)
	return s, f.check(cc, err)
}

// check returns err, or an unreachableError if err is gRPC's failure of a
// call that found no connection to make it on.
func (f failFast) check(cc *grpc.ClientConn, err error) error {
	st, ok := status.FromError(err)
	if err == nil || !ok || st.Code() != codes.Unavailable || cc.GetState() != connectivity.TransientFailure {
		return err
	}
	return &unreachableError{endpoints: f.shown, cause: connectionCause(st.Message())}
}

// connectionCause is the useful part of gRPC's message for a failed
// connection attempt, such as
//
//	connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:2379: connect: connection refused"
//
// whose end is the dial error; a message of another form is kept whole.
func connectionCause(msg string) string {
	const dialing = "Error while dialing: "
	if i := strings.Index(msg, dialing); i >= 0 {
		return strings.TrimSuffix(msg[i+len(dialing):], `"`)
	}
	return msg
}

// unreachableError is a call that failed because no endpoint of the etcd
// client accepted a connection. It is deliberately not a gRPC status
// error: the etcd client retries calls that fail with status Unavailable,
// for as long as their context allows, which is what failing fast avoids.
type unreachableError struct {
	endpoints string
	cause     string
}

func (e *unreachableError) Error() string {
	return "no connection to etcd at " + e.endpoints + ": " + e.cause
}
