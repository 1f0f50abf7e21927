// Command dlock runs commands under a distributed lock held in Redis (or
// etcd, with --etcd),
// shows and breaks locks, and demonstrates why naive Redis locks fail.
// Run "dlock --help" for usage.
package main

import (
	"context"
	"os"

	dl "github.com/dlockio/dlock"
	"github.com/dlockio/dlock/etcddriver"
	"github.com/dlockio/dlock/internal/cli"
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
	// Other stores and a metrics exporter are wired in here, through
	// cli.Options, from their own modules: this module requires them, the
	// library's never does.
	os.Exit(cli.Main(context.Background(), os.Args[1:], env, cli.Options{
		Backends: []cli.Backend{{
			Flag: "etcd", Arg: "ENDPOINTS", Open: etcddriver.Open,
			Usage: "etcd endpoints: host:2379,host2:2379, http(s)://host:2379,..., etcd(s)://[user:password@]host:2379,...",
		}},
	}))
}

type silent struct{}

func (silent) Printf(context.Context, string, ...any) {}
