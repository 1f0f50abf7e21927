//go:build snippets

// The preamble of every Go fragment in the repository's Markdown (see
// snippets_test.go for the rules): the packages a fragment may name
// without importing them, and the names it may use without declaring
// them. The build constraint keeps it out of every build; the test
// type-checks it together with each fragment.

package snippets

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/election"
	"github.com/dlockio/dlock/etcddriver"
	"github.com/dlockio/dlock/fence"
	"github.com/dlockio/dlock/fence/redisfence"
	"github.com/dlockio/dlock/fence/sqlfence"
	"github.com/dlockio/dlock/memdriver"
	"github.com/dlockio/dlock/once"
	"github.com/dlockio/dlock/once/redisonce"
	"github.com/dlockio/dlock/once/sqlonce"
	dlockotel "github.com/dlockio/dlock/otel"
	dlockprom "github.com/dlockio/dlock/prometheus"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/dlockio/dlock/zkdriver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
)

// Every package above may be named by a fragment, used or not.
var (
	_ = errors.Is
	_ = fmt.Errorf
	_ = slog.New
	_ = http.Handle
	_ = time.Second
	_ = election.New
	_ = etcddriver.Open
	_ = redisfence.New
	_ = sqlfence.InTx
	_ = memdriver.New
	_ = once.New
	_ = redisonce.New
	_ = sqlonce.New
	_ = dlockotel.New
	_ = dlockprom.New
	_ = redisdriver.Open
	_ = zkdriver.Open
	_ = prometheus.MustRegister
	_ = promhttp.Handler
)

// What the application has at hand where a fragment runs.
var (
	ctx    context.Context // the caller's context
	locker *dlock.Client   // a Client, from redisdriver.Open or dlock.New
	rdb    *redis.Client   // the application's Redis client
	db     *sql.DB         // the application's PostgreSQL database
	url    string          // a Redis URL, "redis://localhost:6379/0"
	guard  fence.Guard     // a fenced resource of the application's own
)

// The application's data, and its work done under a lock: each a stand-in
// with the signature the fragments call it with.
var (
	order   Order  // the order being processed
	orderID int64  // its id
	payload []byte // the message that asked for the work
	job     Job    // a transcoding job
)

// Order is the application's order.
type Order struct{ ID int64 }

// Job is the application's transcoding job.
type Job struct{ Input, Output string }

func process(ctx context.Context, o Order, token uint64) error          { return nil }
func charge(ctx context.Context, o Order, token uint64) ([]byte, error) { return nil, nil }
func markPaid(ctx context.Context, tx *sql.Tx, orderID int64) error     { return nil }
func publish(ctx context.Context) error                                 { return nil }
func lead(ctx context.Context, term uint64) error                       { return nil }
func transfer(ctx context.Context, fromToken, toToken uint64) error     { return nil }
func readCatalog(ctx context.Context, token uint64) error               { return nil }
func writeCatalog(ctx context.Context, token uint64) error              { return nil }
func transcode(ctx context.Context, j Job) error                        { return nil }
