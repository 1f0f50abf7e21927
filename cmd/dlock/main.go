// Command dlock runs commands under a distributed lock held in Redis (or
// etcd, with --etcd, or ZooKeeper, with --zk), shows and breaks locks, and demonstrates why naive
// Redis locks fail.
// Run "dlock --help" for usage.
package main

import (
	"context"
	"net/http"
	"os"

	dl "github.com/dlockio/dlock"
	"github.com/dlockio/dlock/cmd/dlock/internal/cli"
	"github.com/dlockio/dlock/etcddriver"
	dlockprom "github.com/dlockio/dlock/prometheus"
	"github.com/dlockio/dlock/zkdriver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
)

// version is what dlock --version prints. Release builds may set it:
// go build -ldflags "-X main.version=1.2.3" ./cmd/dlock
var version = dl.Version

func main() {
	// go-redis logs every failed dial on its own; dlock reports a failure
	// once, as its exit message, so the library's log would only repeat it.
	redis.SetLogger(silent{})
	env := cli.OSEnv()
	env.Version = version
	// Other stores and the metrics exporter are wired in here, through
	// cli.Options, from their own modules: this module requires them, the
	// library's never does.
	os.Exit(cli.Main(context.Background(), os.Args[1:], env, cli.Options{
		Backends: []cli.Backend{{
			Flag: "etcd", Arg: "ENDPOINTS", Open: etcddriver.Open,
			Usage: "etcd endpoints: host:2379,host2:2379, http(s)://host:2379,..., etcd(s)://[user:password@]host:2379,...",
		}, {
			Flag: "zk", Arg: "SERVERS", Open: zkdriver.Open,
			Usage: "ZooKeeper servers: host:2181,host2:2181 (--ttl at most two thirds of the session timeout granted)",
		}},
		Metrics: promMetrics,
	}))
}

// promMetrics is the exporter of run --metrics-addr: the dlock collector
// in a registry of its own, so /metrics shows exactly the run's lock
// metrics and nothing registered globally by any package leaks in.
func promMetrics() (http.Handler, dl.Observer, error) {
	col, err := dlockprom.New()
	if err != nil {
		return nil, nil, err
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(col); err != nil {
		return nil, nil, err
	}
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return h, col, nil
}

type silent struct{}

func (silent) Printf(context.Context, string, ...any) {}
