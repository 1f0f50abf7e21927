package etcddriver

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockio/dlock/etcddriver/internal/etcdserver"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// rpcCounter counts the gRPC calls (once answered) and streams an etcd
// client makes, by method name (the part after the last slash, e.g. "Txn", "LeaseGrant",
// "LeaseKeepAlive").
type rpcCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *rpcCounter) add(method string) {
	c.mu.Lock()
	c.n[method[strings.LastIndex(method, "/")+1:]]++
	c.mu.Unlock()
}

// count returns the count of method so far.
func (c *rpcCounter) count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[method]
}

// take returns the counts so far and resets them.
func (c *rpcCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = make(map[string]int)
	return n
}

// countingClient is an etcd client for endpoints whose calls are counted.
func countingClient(t testing.TB, endpoints ...string) (*clientv3.Client, *rpcCounter) {
	t.Helper()
	rc := &rpcCounter{n: make(map[string]int)}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: endpoints,
		Logger:    zap.NewNop(),
		DialOptions: []grpc.DialOption{
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
				cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				err := invoker(ctx, method, req, reply, cc, opts...)
				rc.add(method) // once answered: a test can wait for a reply
				return err
			}),
			grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn,
				method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				rc.add(method)
				return streamer(ctx, desc, cc, method, opts...)
			}),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli, rc
}

// newDriver is a Driver on a fresh prefix of m, closed when t ends.
func newDriver(t *testing.T, cli *clientv3.Client, opts ...Option) *Driver {
	t.Helper()
	opts = append([]Option{WithPrefix(t.Name() + "/")}, opts...)
	d, err := New(cli, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// member starts a single etcd member for t.
func member(t *testing.T) *etcdserver.Member {
	t.Helper()
	return etcdserver.Start(t)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
