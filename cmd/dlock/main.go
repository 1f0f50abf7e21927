// Command dlock runs commands under a distributed lock held in Redis,
// shows and breaks locks, and demonstrates why naive Redis locks fail.
// Run "dlock --help" for usage.
package main

import (
	"context"
	"os"

	"github.com/dlockio/dlock/internal/cli"
	"github.com/redis/go-redis/v9"
)

func main() {
	// go-redis logs every failed dial on its own; dlock reports a failure
	// once, as its exit message, so the library's log would only repeat it.
	redis.SetLogger(silent{})
	os.Exit(cli.Main(context.Background(), os.Args[1:], cli.OSEnv()))
}

type silent struct{}

func (silent) Printf(context.Context, string, ...any) {}
