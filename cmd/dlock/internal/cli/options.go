package cli

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/dlockio/dlock"
)

// Options is what the binary links in beyond Redis: more stores and a
// metrics exporter. They live in modules of their own, with their own
// dependencies (an etcd client, a Prometheus client), which the module of
// this package never requires: the binary's main package imports them and
// hands them over here, and every flag, variable, help line and completion
// word they need follows from these declarations.
type Options struct {
	// Backends are stores besides Redis, each selected by its own flag on
	// run, status, list and unlock (and before the command name).
	Backends []Backend
	// Metrics, when set, gives run the flag --metrics-addr ADDR (variable
	// DLOCK_METRICS_ADDR), which serves the run's metrics over HTTP at
	// ADDR, path /metrics, from before the lock is requested until dlock
	// exits.
	Metrics Metrics
}

// Backend is a lock store, selected by a flag whose value is the store's
// address.
type Backend struct {
	// Flag is the long flag, without dashes: "etcd" gives --etcd VALUE and
	// the variable DLOCK_ETCD. Lowercase letters, digits and "-".
	Flag string
	// Arg names the value in help, e.g. "ENDPOINTS".
	Arg string
	// Usage is the flag's help line, e.g. "etcd endpoints (host:2379,... or etcd://...)".
	Usage string
	// Open returns a Client on the store at spec with opts applied. Like
	// redisdriver.Open it must not wait for the network: its errors are
	// reported as usage errors (64), an unreachable store by the first
	// call (69).
	Open func(spec string, opts ...dlock.Option) (*dlock.Client, error)
}

// Metrics makes a metrics exporter for one run: the handler that serves
// the metrics, and the Observer that feeds it (typically the same
// exporter). It is called once per run that has --metrics-addr, before
// the Client is opened. The Client has one Observer, so run installs a
// tee of this one and its own, which learns why a lease was lost.
type Metrics func() (http.Handler, dlock.Observer, error)

// flagNameRE is what a Backend's Flag may be.
var flagNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// errOptions marks a mistake in Options: a bug of the binary, status 70.
var errOptions = errors.New("invalid cli.Options")

// validate checks o before any flag is declared from it.
func (o Options) validate() error {
	// Names a store flag must not take: every flag of every command, as
	// a build without other stores declares them, and flag's own -h.
	seen := map[string]bool{"metrics-addr": true, "help": true, "h": true, "version": true, "V": true}
	for _, c := range completionSpec(Options{}) {
		for _, f := range c.flags {
			for _, w := range spellings(f) {
				seen[strings.TrimLeft(w, "-")] = true
			}
		}
	}
	for _, b := range o.Backends {
		pw := passwordFileFlag(b.Flag) // declared with it
		switch {
		case !flagNameRE.MatchString(b.Flag):
			return fmt.Errorf("%w: backend flag %q", errOptions, b.Flag)
		case seen[b.Flag]:
			return fmt.Errorf("%w: backend flag --%s is already a flag", errOptions, b.Flag)
		case seen[pw]:
			return fmt.Errorf("%w: backend flag --%s would declare --%s, already a flag", errOptions, b.Flag, pw)
		case b.Open == nil:
			return fmt.Errorf("%w: backend --%s has no Open", errOptions, b.Flag)
		}
		seen[b.Flag], seen[pw] = true, true
	}
	return nil
}
