package redisdriver

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The scripts as one Redis function library (Redis 7 and later), which a
// Driver WithFunctions loads on first use (FUNCTION LOAD) and runs with
// FCALL. Not the default: see WithFunctions for who else can replace a
// function, and docs/security.md.
//
// Why: a script's top level runs again on every EVALSHA, and each helper
// of lib.lua and queue_lib.lua it defines there is a closure to create
// (scripts define only the helpers they call, and the queue's are made only
// when a call needs them: see newScript and queue_core). A library's top
// level runs once, at load: its functions find the helpers already made.
// docs/benchmarks.md has what either costs the server per cycle.
//
// The library's name carries a hash of all its code, so that two versions
// of the driver on one server each find their own, and a changed script is
// never confused with an old one. Each version leaves its library on the
// server (about 120 KB of its memory on Redis 7.0: INFO memory's
// used_memory_vm_functions and used_memory_functions grow by 78 and 42 KB),
// as EVALSHA leaves its scripts in the script cache; FUNCTION DELETE
// removes one no longer in use.
//
// Where the server refuses functions (before Redis 7, an ACL that allows
// EVALSHA but not FCALL or FUNCTION LOAD, a proxy that refuses them), or
// holds other code under the library's name, the Driver falls back to
// EVALSHA for good, at the cost of one or two refused
// calls. Refusals that pass (memory full, a flush or failover racing the
// load) send only the call at hand as a script.

// libraryCode is the source FUNCTION LOAD is given.
var libraryCode = newLibrary([]*script{
	acquireScript, releaseScript, renewScript, forceReleaseScript, enqueueScript,
	queueRenewScript, queueReleaseScript, acquireAllScript, quorumRaiseScript,
}, map[*script]bool{
	releaseScript: true, renewScript: true, forceReleaseScript: true,
	queueRenewScript: true, queueReleaseScript: true,
})

// newLibrary returns the library of scripts, and sets each script's
// function name. The functions of releases may run when the server is out
// of memory (the allow-oom flag): renewing and releasing must not wait for
// memory that the locks held keep taken, and through EVALSHA they ran, with
// only their commands that need memory refused. The others are refused
// whole then (and without the replicas min-replicas-to-write asks for);
// run sends such a refused call again as a script, which runs until it
// needs memory, as before. The name is a hash of the whole library, flags
// included.
func newLibrary(scripts []*script, releases map[*script]bool) string {
	const name = "__LIBRARY__" // replaced by the hash below
	var code strings.Builder
	code.WriteString(substitute("lib", libLua))
	code.WriteString(substitute("queue_lib", queueLibLua))
	for _, s := range scripts {
		// The script's body, unchanged, as a function of KEYS and ARGV: the
		// names it reads as globals under EVALSHA.
		fmt.Fprintf(&code, "\nlocal function script_%s(KEYS, ARGV)\n%s\nend\n", s.name, s.body)
	}
	for _, s := range scripts {
		flags := ""
		if releases[s] {
			flags = "'allow-oom'"
		}
		fmt.Fprintf(&code, "redis.register_function{function_name = '%s_%s', callback = script_%s, flags = {%s}}\n",
			name, s.name, s.name, flags)
	}
	sum := sha1.Sum([]byte(code.String()))
	lib := "dlock_" + hex.EncodeToString(sum[:6])
	for _, s := range scripts {
		s.fn = lib + "_" + s.name
	}
	return "#!lua name=" + lib + "\n" + strings.ReplaceAll(code.String(), name, lib)
}

// errNoFunctions is loadOn's answer when the server will not take the
// library; the Driver then uses scripts.
var errNoFunctions = errors.New("redisdriver: the server does not take the function library")

// run runs s with keys and args (runCode), naming in a Cluster every key
// it may touch (declare); in Cluster once more when it
// failed on a stale layout that a reload has since corrected
// (layout.resend), and again while a slot migration refuses it
// (migrationRetry).
func (d *Driver) run(ctx context.Context, s *script, keys []string, args ...any) *redis.Cmd {
	keys = d.declare(s, keys, args) // in a Cluster, every key it touches (declare.go)
	seen := d.layout.seen()
	cmd := d.runCode(ctx, s, keys, args...)
	if len(keys) > 0 && d.layout.resend(ctx, seen, cmd.Err(), keys[0]) {
		cmd = d.runCode(ctx, s, keys, args...)
	}
	var m migrationRetry
	for m.again(ctx, cmd.Err()) {
		cmd = d.runCode(ctx, s, keys, args...)
	}
	return cmd
}

// runCode runs s with keys and args: as its function if the server has
// functions, else as a script.
func (d *Driver) runCode(ctx context.Context, s *script, keys []string, args ...any) *redis.Cmd {
	if d.ack != nil && acked(s) {
		return d.runAcked(ctx, s, keys, args...) // with its WAIT (replica.go)
	}
	loads, ok := d.useFunctions(ctx)
	if !ok {
		return s.run(ctx, d.rdb, keys, args...)
	}
	cmd := d.rdb.FCall(ctx, s.fn, keys, args...)
	if isNoFunction(cmd.Err()) {
		// Not loaded on this server yet, or lost (a restart without
		// persistence, FUNCTION FLUSH, a slot moved to a master without
		// it): load it, call again.
		if err := d.load(ctx, loads); err == nil {
			cmd = d.rdb.FCall(ctx, s.fn, keys, args...)
		} else if errors.Is(err, errNoFunctions) {
			d.noFunctions.Store(true)
		}
	}
	if e := cmd.Err(); refusedCall(e) {
		d.noFunctions.Store(true)
		return s.run(ctx, d.rdb, keys, args...)
	} else if isNoFunction(e) || refusedByFlags(e) {
		// Missing still (the load failed or raced a flush or a failover),
		// or refused before it ran: this call as a script.
		return s.run(ctx, d.rdb, keys, args...)
	}
	return cmd
}

// useFunctions reports whether a call goes as FCALL, and the count of
// loads before it. The Driver's first call loads the library first, so
// that one found already loaded (planted by a user allowed FUNCTION LOAD)
// is checked before any of its code runs (loadOn); a failure that passes
// leaves that to the next call that finds the library missing.
func (d *Driver) useFunctions(ctx context.Context) (uint64, bool) {
	if d.noFunctions.Load() {
		return 0, false
	}
	loads := d.loads.Load()
	if loads == 0 {
		if err := d.load(ctx, 0); errors.Is(err, errNoFunctions) {
			d.noFunctions.Store(true)
			return 0, false
		}
		loads = d.loads.Load()
	}
	return loads, true
}

// runCalls sends calls in one pipeline (sendCalls), and in Cluster sends
// again those that failed on a stale layout or were refused by a slot
// migration, as run does. It returns the first error of a call's reply.
// Replies are left in the calls.
func (d *Driver) runCalls(ctx context.Context, calls []*call) error {
	if d.ack != nil {
		// Each call with its own WAIT, which counts its connection's
		// writes: the calls of one Renew or Release on one master, in a
		// few round trips instead of one.
		for _, cl := range calls {
			cl.reply = d.run(ctx, cl.s, cl.keys, cl.args...)
		}
		for _, cl := range calls {
			if e := cl.reply.Err(); e != nil {
				return e
			}
		}
		return nil
	}
	for _, cl := range calls {
		cl.keys = d.declare(cl.s, cl.keys, cl.args)
	}
	seen := d.layout.seen()
	err := d.sendCalls(ctx, calls)
	if err == nil {
		return nil
	}
	if again := d.layout.resendAll(ctx, seen, calls); len(again) > 0 {
		_ = d.sendCalls(ctx, again) // errors are in the replies
	}
	var m migrationRetry
	for {
		var again []*call
		for _, cl := range calls {
			if migrating(cl.reply.Err()) {
				again = append(again, cl)
			}
		}
		if len(again) == 0 || !m.again(ctx, again[0].reply.Err()) {
			break
		}
		_ = d.sendCalls(ctx, again)
	}
	for _, cl := range calls {
		if e := cl.reply.Err(); e != nil {
			return e
		}
	}
	return nil
}

// sendCalls sends calls in one pipeline, as runCode does one call (and a
// second pipeline for the calls that found the library missing, a third
// for those that must go as scripts). It returns the first error of a
// call's reply. Replies are left in the calls.
func (d *Driver) sendCalls(ctx context.Context, calls []*call) error {
	loads, ok := d.useFunctions(ctx)
	if !ok {
		return runCalls(ctx, d.rdb.Pipeline(), calls)
	}
	d.sendFCalls(ctx, calls)
	var missing []*call
	for _, cl := range calls {
		if isNoFunction(cl.reply.Err()) {
			missing = append(missing, cl)
		}
	}
	if len(missing) > 0 {
		if err := d.load(ctx, loads); err == nil {
			d.sendFCalls(ctx, missing)
		} else if errors.Is(err, errNoFunctions) {
			d.noFunctions.Store(true)
		}
	}
	var scripts []*call
	for _, cl := range calls {
		if e := cl.reply.Err(); refusedCall(e) || isNoFunction(e) || refusedByFlags(e) {
			if refusedCall(e) {
				d.noFunctions.Store(true)
			}
			scripts = append(scripts, cl)
		}
	}
	if len(scripts) > 0 {
		_ = runCalls(ctx, d.rdb.Pipeline(), scripts) // errors are in the replies
	}
	for _, cl := range calls {
		if e := cl.reply.Err(); e != nil {
			return e
		}
	}
	return nil
}

// sendFCalls sends calls as FCALL in one pipeline; the replies, errors
// included, are in the calls.
func (d *Driver) sendFCalls(ctx context.Context, calls []*call) {
	p := d.rdb.Pipeline()
	for _, cl := range calls {
		cl.reply = p.FCall(ctx, cl.s.fn, cl.keys, cl.args...)
	}
	_, _ = p.Exec(ctx)
}

// load loads the library on the Driver's server: in Cluster on every
// master, as the client finds them after reloading the cluster's layout
// (the master of a key in the layout the client had may no longer be the
// one that answered), and on every shard of a Ring.
//
// Calls that find the library missing at once (every call after a
// restart) load it once: one of them loads, the others wait for it (or for
// their ctx) and call again. missed is loads's value when the call was
// sent; a load finished since then is as good as one of its own.
func (d *Driver) load(ctx context.Context, missed uint64) error {
	select {
	case d.loading <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-d.loading }()
	if d.loads.Load() != missed {
		return nil
	}
	err := d.loadAll(ctx)
	if err == nil {
		d.loads.Add(1)
	}
	return err
}

// loadAll is load's one load.
func (d *Driver) loadAll(ctx context.Context) error {
	each := func(ctx context.Context, c *redis.Client) error { return loadOn(ctx, c) }
	switch c := d.rdb.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, each)
	case *redis.Ring:
		return c.ForEachShard(ctx, each)
	}
	return loadOn(ctx, d.rdb)
}

// loadOn loads the library on c. A library already there (loaded by
// another client meanwhile) is as good if its code is ours (checkLoaded). A refusal (NOPERM: an ACL; an
// unknown command or subcommand; a library the server will not compile or
// register) is errNoFunctions; other answers (OOM, READONLY, LOADING, BUSY,
// too many clients) and errors of the connection are returned as they
// are: they pass.
func loadOn(ctx context.Context, c redis.Cmdable) error {
	err := c.FunctionLoad(ctx, libraryCode).Err()
	if err == nil {
		return nil
	}
	msg := err.Error()
	var rerr redis.Error
	switch {
	case strings.HasPrefix(msg, "ERR Library") && strings.Contains(msg, "already exists"):
		return checkLoaded(ctx, c)
	case !errors.As(err, &rerr):
		return err
	case strings.HasPrefix(msg, "NOPERM"):
		return fmt.Errorf("%w: %v", errNoFunctions, err)
	}
	for _, p := range []string{"ERR unknown command", "ERR unknown subcommand", "ERR unsupported command",
		"ERR Error", "ERR Library", "ERR Function"} {
		if strings.HasPrefix(msg, p) {
			return fmt.Errorf("%w: %v", errNoFunctions, err)
		}
	}
	return err
}

// checkLoaded checks that the library of our name on c holds our code. A
// user allowed FUNCTION LOAD may have loaded other code under the name,
// which every FCALL would then run with the caller's rights: then, and
// when the code cannot be read (an ACL without FUNCTION LIST), it is
// errNoFunctions, so the Driver runs scripts, found by the hash of their
// own code. A replacement made after this check is not seen (WithFunctions
// says so).
func checkLoaded(ctx context.Context, c redis.Cmdable) error {
	name := strings.TrimPrefix(libraryCode[:strings.IndexByte(libraryCode, '\n')], "#!lua name=")
	libs, err := c.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: name, WithCode: true}).Result()
	if err != nil {
		var rerr redis.Error
		if errors.As(err, &rerr) {
			return fmt.Errorf("%w: reading the loaded library: %v", errNoFunctions, err)
		}
		return err
	}
	for _, l := range libs {
		if l.Name == name && l.Code == libraryCode {
			return nil
		}
	}
	return fmt.Errorf("%w: the server holds other code under the name %s", errNoFunctions, name)
}

// refusedCall reports whether err is the server refusing FCALL itself: an
// unknown command (before Redis 7; also one a proxy does not pass on), or
// an ACL that does not allow it. Errors of the connection or of a script,
// a permission on a key, and the server's other refusals are not.
func refusedCall(err error) bool {
	var rerr redis.Error
	if err == nil || !errors.As(err, &rerr) {
		return false
	}
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "ERR unknown command"), strings.HasPrefix(msg, "ERR unsupported command"):
		return true
	case strings.HasPrefix(msg, "NOPERM"):
		return strings.Contains(strings.ToLower(msg), "'fcall'")
	}
	return false
}

// refusedByFlags reports whether err is the server refusing a function
// before running it, for the flags it has not, where a script runs until
// its first command that needs them: allow-oom (used memory above
// maxmemory), and no-writes, which none has (writes stopped for a failed
// save, MISCONF; without the replicas min-replicas-to-write asks for; on a
// read-only replica). Such a refusal comes before anything ran, so the
// call can go again as a script.
func refusedByFlags(err error) bool {
	var rerr redis.Error
	if err == nil || !errors.As(err, &rerr) {
		return false
	}
	msg := err.Error()
	for _, p := range []string{"OOM ", "NOREPLICAS ", "MISCONF ", "READONLY "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// isNoFunction reports whether err is FCALL's answer for a function the
// server does not have.
func isNoFunction(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "ERR Function not found")
}
