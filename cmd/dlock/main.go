// Command dlock runs commands under a distributed lock held in Redis,
// shows and breaks locks, and demonstrates why naive Redis locks fail.
// Run "dlock --help" for usage.
package main

import (
	"context"
	"os"

	dl "github.com/dlockio/dlock"
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
	os.Exit(cli.Main(context.Background(), os.Args[1:], env, cli.Options{}))
}

type silent struct{}

func (silent) Printf(context.Context, string, ...any) {}
