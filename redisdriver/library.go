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

// The scripts as one Redis function library (Redis 7 and later), which
// the Driver loads on first use (FUNCTION LOAD) and runs with FCALL.
//
// Why: a script's top level runs again on every EVALSHA, and lib.lua's and
// queue_lib.lua's top level is some twenty function definitions, each a
// closure to create. A library's top level runs once, at load: its
// functions find the helpers already made. Counted in the server's own
// instructions, an FCALL of the library costs about 17,000 against 32,000
// for the same call through EVALSHA (31% of the contended fair lock's
// Redis work per cycle goes to script calls' fixed costs; see
// docs/fair-lock.md).
//
// The library's name carries a hash of its source, so that two versions of
// the driver on one server each find their own, and a changed script is
// never confused with an old one. Each version leaves its library on the
// server (a few tens of kilobytes), as EVALSHA leaves its scripts in the
// script cache; FUNCTION DELETE removes one no longer in use.
//
// Where the server has no functions (before Redis 7, an ACL that allows
// EVALSHA but not FCALL or FUNCTION LOAD, a proxy that refuses them) the
// Driver falls back to EVALSHA for good, at the cost of one refused call.

// libraryCode is the source FUNCTION LOAD is given.
var libraryCode = newLibrary([]*script{
	acquireScript, releaseScript, renewScript, forceReleaseScript, enqueueScript,
	queueRenewScript, queueReleaseScript, queueInspectScript, acquireAllScript,
}, map[*script]bool{
	releaseScript: true, renewScript: true, forceReleaseScript: true,
	queueRenewScript: true, queueReleaseScript: true,
})

// newLibrary returns the library of scripts, and sets each script's
// function name. Those in releases may run when the server is out of
// memory (the allow-oom flag), as they do through EVALSHA, where only the
// commands that need memory fail: renewing and releasing must not wait for
// memory that locks held longer keep taken. The others, which take locks,
// are refused whole then, as a script whose first write needs memory is.
func newLibrary(scripts []*script, releases map[*script]bool) string {
	var body strings.Builder
	body.WriteString(substitute("lib", libLua))
	body.WriteString(substitute("queue_lib", queueLibLua))
	for _, s := range scripts {
		// The script's body, unchanged, as a function of KEYS and ARGV: the
		// names it reads as globals under EVALSHA.
		fmt.Fprintf(&body, "\nlocal function script_%s(KEYS, ARGV)\n%s\nend\n", s.name, s.body)
	}
	sum := sha1.Sum([]byte(body.String()))
	name := "dlock_" + hex.EncodeToString(sum[:6])
	for _, s := range scripts {
		s.fn = name + "_" + s.name
		flags := ""
		if releases[s] {
			flags = "'allow-oom'"
		}
		fmt.Fprintf(&body, "redis.register_function{function_name = '%s', callback = script_%s, flags = {%s}}\n",
			s.fn, s.name, flags)
	}
	return "#!lua name=" + name + "\n" + body.String()
}

// errNoFunctions is loadOn's answer when the server will not take the
// library; the Driver then uses scripts.
var errNoFunctions = errors.New("redisdriver: the server does not take the function library")

// run runs s with keys and args: as its function if the server has
// functions, else as a script.
func (d *Driver) run(ctx context.Context, s *script, keys []string, args ...any) *redis.Cmd {
	if d.noFunctions.Load() {
		return s.run(ctx, d.rdb, keys, args...)
	}
	cmd := d.rdb.FCall(ctx, s.fn, keys, args...)
	if isNoFunction(cmd.Err()) {
		// Not loaded on this server yet, or lost (a restart without
		// persistence, FUNCTION FLUSH): load it, call again.
		if err := d.loadFor(ctx, keys[0], nil); err == nil {
			cmd = d.rdb.FCall(ctx, s.fn, keys, args...)
		} else if errors.Is(err, errNoFunctions) {
			d.noFunctions.Store(true)
		} else {
			return errCmd(ctx, err)
		}
	}
	if e := cmd.Err(); isNoFunction(e) || refusedCall(e) {
		d.giveUpFunctions(e)
		return s.run(ctx, d.rdb, keys, args...)
	}
	return cmd
}

// giveUpFunctions makes the Driver use scripts from now on, after err (a
// refusal, or a function still missing after a load) unless err is
// missing in Cluster: the load then went to the master the client
// believed serves the key, and the call to another one, as in a failover
// or a resharding. That passes; the next call loads the library again.
// Elsewhere a load that does not reach the server of the call (as a Ring
// would send it) is for good.
func (d *Driver) giveUpFunctions(err error) {
	if !isNoFunction(err) || d.cluster == nil {
		d.noFunctions.Store(true)
	}
}

// runCalls sends calls in one pipeline, as run does one call (and a second
// pipeline for the calls that found the library missing, a third for those
// that must go as scripts). It returns the first error of a call's reply.
// Replies are left in the calls.
func (d *Driver) runCalls(ctx context.Context, calls []*call) error {
	if d.noFunctions.Load() {
		return runCalls(ctx, d.rdb.Pipeline(), calls)
	}
	d.sendFCalls(ctx, calls)
	var missing []*call
	loaded := make(map[string]bool) // by node address
	for _, cl := range calls {
		if !isNoFunction(cl.reply.Err()) {
			continue
		}
		missing = append(missing, cl)
		if err := d.loadFor(ctx, cl.keys[0], loaded); errors.Is(err, errNoFunctions) {
			d.noFunctions.Store(true)
			missing = nil // they go as scripts
			break
		} else if err != nil {
			return err
		}
	}
	if len(missing) > 0 {
		d.sendFCalls(ctx, missing)
	}
	var scripts []*call
	for _, cl := range calls {
		if e := cl.reply.Err(); isNoFunction(e) || refusedCall(e) {
			d.giveUpFunctions(e)
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

// loadFor loads the library on the server that runs calls on key: in
// Cluster the master of its slot, else the Driver's client. With a
// non-nil loaded (node addresses), a node is loaded once.
func (d *Driver) loadFor(ctx context.Context, key string, loaded map[string]bool) error {
	c, addr := redis.Cmdable(d.rdb), ""
	if d.cluster != nil {
		node, err := d.cluster.MasterForKey(ctx, key)
		if err != nil {
			return err
		}
		c, addr = node, node.Options().Addr
	}
	if loaded != nil {
		if loaded[addr] {
			return nil
		}
		loaded[addr] = true
	}
	return loadOn(ctx, c)
}

// loadOn loads the library on c. A library already there (loaded by
// another client meanwhile) is as good; any other answer of the server is
// errNoFunctions. Errors of the connection are returned as they are.
func loadOn(ctx context.Context, c redis.Cmdable) error {
	err := c.FunctionLoad(ctx, libraryCode).Err()
	var rerr redis.Error
	switch {
	case err == nil || strings.Contains(err.Error(), "already exists"):
		return nil
	case errors.As(err, &rerr):
		return fmt.Errorf("%w: %v", errNoFunctions, err)
	}
	return err
}

// refusedCall reports whether err is the server refusing FCALL itself: an
// unknown command (before Redis 7), one a proxy or a managed service does
// not pass on, or a permission (an ACL). Errors of the connection, of a
// script, and the server's other refusals (OOM, READONLY, BUSY, LOADING:
// EVALSHA would meet them too) are not.
func refusedCall(err error) bool {
	var rerr redis.Error
	if err == nil || !errors.As(err, &rerr) {
		return false
	}
	msg := strings.ToLower(err.Error())
	if strings.HasPrefix(msg, "noperm") {
		return true
	}
	for _, s := range []string{"unknown command", "unsupported command", "not supported", "command disabled"} {
		if strings.HasPrefix(msg, "err") && strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// isNoFunction reports whether err is FCALL's answer for a function the
// server does not have.
func isNoFunction(err error) bool {
	return err != nil && strings.Contains(err.Error(), "Function not found")
}

// errCmd is a reply that failed with err before reaching the server.
func errCmd(ctx context.Context, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}
