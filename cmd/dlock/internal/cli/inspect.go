package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/redisdriver"
)

// inspectTimeout is the default of --timeout: how long status, list and
// unlock wait for the store before reporting it unreachable (69).
const inspectTimeout = 5 * time.Second

const statusUsage = `Usage: dlock status [--json] [--timeout D] [--watch[=D]] KEY

Shows who holds the lock KEY: the holder's own fencing token (the
DLOCK_TOKEN its command was given; on Redis the holder's token is also the
newest one issued for KEY, since a token is issued only to an acquisition),
its host, pid and meta text, how long it has been held and how long its TTL
has left. Waiters of a plain run are not shown: the store does not record
them. A KEY with readers (run --shared), permits (run --permits) or queued
waiters is shown as its holders and its waiters in queue order instead
(--json: see below).
Exit status 0 when held, 1 when free, 69 when the store does not answer
within --timeout.
` + jsonHelp + queueJSONHelp + watchHelp

const listUsage = `Usage: dlock list [--json] [--timeout D] [PREFIX]

Lists every held lock whose name starts with PREFIX (all when omitted),
under a header line, then the read-write locks and semaphores in use (see
below), or prints "no locks held" when there is neither (with --json: []).
Exit status 0, also when there are none; 69 when the store does not answer
within --timeout.
` + jsonHelp + listQueuesHelp

const jsonHelp = `
--json prints one object per lock (list: an array of them, [] when none):
  key          lock name
  held         true when held (status of a free lock: {"key": ..., "held": false})
  token        the holder's own fencing token, its DLOCK_TOKEN (integer, below 2^53)
  host, pid    the holder's host name and process id
  meta         the holder's free text ("" when none)
  since        acquisition time, RFC 3339 in UTC, by the holder's clock
  held_ms      milliseconds since acquisition
  ttl_ms       milliseconds left before the lock expires unless renewed
`

const unlockUsage = `Usage: dlock unlock --force [--json] [--timeout D] KEY

Breaks the lock KEY whoever holds it and prints the broken holder's fencing
token: a resource that rejects tokens up to it is safe from the broken
holder, and every later acquisition gets a higher one. The holder finds out
at its next renewal (within a third of its TTL): its lease ends as lost, and
a 'dlock run' holding it terminates its command and exits 76.
Exit status 1 when the lock was free. Readers (run --shared) and permit
holders (run --permits) cannot be broken: with only those, it says so and
exits 1; they end when their processes do, or within one TTL of dying.

--json prints {"key": ..., "broken": true, "token": N}, or
{"key": ..., "broken": false} for a free lock.
`

// lockJSON is the stable JSON form of a lock; see jsonHelp.
type lockJSON struct {
	Key    string `json:"key"`
	Held   bool   `json:"held"`
	Token  uint64 `json:"token"`
	Host   string `json:"host"`
	PID    int    `json:"pid"`
	Meta   string `json:"meta"`
	Since  string `json:"since"`
	HeldMS int64  `json:"held_ms"`
	TTLMS  int64  `json:"ttl_ms"`
}

// freeJSON is a free lock: only key and held, so no field pretends to be
// a holder's.
type freeJSON struct {
	Key  string `json:"key"`
	Held bool   `json:"held"`
}

func toJSON(info dlock.LockInfo, now time.Time) lockJSON {
	return lockJSON{
		Key: info.Key, Held: true, Token: info.Token,
		Host: info.Owner.Host, PID: info.Owner.PID, Meta: info.Owner.Meta,
		Since:  info.Since.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
		HeldMS: max(now.Sub(info.Since), 0).Milliseconds(),
		TTLMS:  info.TTL.Milliseconds(),
	}
}

// keyArg returns the command's one KEY argument.
func keyArg(f *flagSet, cmd string) (string, error) {
	fs := f.fs
	if fs.NArg() != 1 {
		return "", usageErrorf("want exactly one KEY, got %d arguments (see dlock %s --help)", fs.NArg(), cmd)
	}
	return fs.Arg(0), nil
}

// checkKey rejects, before any round trip, a name no lock can have on c's
// store.
func checkKey(c *dlock.Client, key string) error {
	if err := c.CheckKey(key); err != nil {
		return &exitError{code: ExitUsage, err: fmt.Errorf("invalid KEY: %s", keyRefusal(err))}
	}
	return nil
}

// keyRefusal is why a key was refused, without the prefixes the library
// and the driver each put on it ("invalid argument: key: ... invalid
// argument: key ..."): "empty", or the driver's `"}" starts with '}'`.
func keyRefusal(err error) string {
	why := strings.TrimPrefix(err.Error(), dlock.ErrInvalidKey.Error()+": ")
	why = strings.TrimPrefix(why, dlock.ErrInvalidArgument.Error()+": ")
	return strings.TrimPrefix(why, "key ")
}

// withClient runs f with a Client on the invocation's store and a context
// bounded by timeout. Errors from opening the store (a bad URL) come back
// as they are; f's store failures match dlock.ErrBackend, including when
// the store did not answer within timeout. A database the server does not
// have is a bad URL (64), not an unreachable store.
func (s *invocation) withClient(ctx context.Context, timeout time.Duration, f func(context.Context, *dlock.Client) error) error {
	c, err := s.openClient()
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	return s.bounded(ctx, c, timeout, f)
}

// bounded runs f on c with a context bounded by timeout, reporting a store
// that did not answer in time, and a database the server does not have,
// as withClient does.
func (s *invocation) bounded(ctx context.Context, c *dlock.Client, timeout time.Duration, f func(context.Context, *dlock.Client) error) error {
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := f(tctx, c)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) && tctx.Err() != nil {
		// Our own bound ran out, not the caller's: the store hangs.
		return noAnswer(timeout)
	}
	return s.badDatabase(err)
}

// badDatabase words the server's refusal of the URL's database number as
// a usage error naming the URL once; other errors pass through. The
// Redis driver reports it as an invalid argument (64) already, inside the
// operation's own message.
func (s *invocation) badDatabase(err error) error {
	if err == nil || !strings.Contains(err.Error(), "DB index is out of range") {
		return err
	}
	if st, serr := s.chosenStore(); serr == nil && st.backend.Flag == redisFlagName {
		return usageErrorf("redis URL %q: the server has no such database (ERR DB index is out of range)",
			redisdriver.RedactURL(st.spec()))
	}
	return err
}

// operatorFlags are the flags status, list and unlock share.
type operatorFlags struct {
	json    *bool
	timeout *time.Duration
}

func declareOperatorFlags(f *flagSet, jsonUsage string) operatorFlags {
	return operatorFlags{
		json:    f.boolean("json", "", jsonUsage),
		timeout: f.duration("timeout", "", inspectTimeout, true, "how long to wait for the store to answer before reporting it unreachable (69)"),
	}
}

func defineStatus(f *flagSet, _ Options) runFunc {
	o := declareOperatorFlags(f, "print JSON (fields: see above)")
	watch := declareWatch(f)
	return func(ctx context.Context, s *invocation, args []string) error {
		if err := s.parse(args); err != nil {
			return err
		}
		key, err := watchKeyArg(s.flags, watch, args)
		if err != nil {
			return err
		}
		if watch.on {
			return watchStatus(ctx, s, o, watch.every, key)
		}
		return statusCommand(ctx, s, o, key)
	}
}

func defineList(f *flagSet, _ Options) runFunc {
	o := declareOperatorFlags(f, "print a JSON array (fields: see above)")
	return func(ctx context.Context, s *invocation, args []string) error { return listCommand(ctx, s, o, args) }
}

func defineUnlock(f *flagSet, _ Options) runFunc {
	force := f.boolean("force", "", "required: confirms breaking a lock that someone else holds")
	f.noEnv()
	o := declareOperatorFlags(f, "print JSON (see above)")
	return func(ctx context.Context, s *invocation, args []string) error {
		return unlockCommand(ctx, s, o, force, args)
	}
}

func statusCommand(ctx context.Context, s *invocation, o operatorFlags, key string) error {
	var st lockStatus
	err := s.withClient(ctx, *o.timeout, func(ctx context.Context, c *dlock.Client) (err error) {
		st, err = lookStatus(ctx, c, key)
		return err
	})
	if err != nil {
		return err
	}
	var out func(any) error // text
	if *o.json {
		out = func(v any) error { return writeJSON(s.env.Stdout, v) }
	}
	return s.writeStatus(st, out)
}

// lockStatus is one look at a lock: its holder, or its queue when it has
// readers, permits or waiters.
type lockStatus struct {
	key    string
	info   dlock.LockInfo
	held   bool
	queue  dlock.QueueInfo
	queued bool
}

func lookStatus(ctx context.Context, c *dlock.Client, key string) (st lockStatus, err error) {
	st.key = key
	if err := checkKey(c, key); err != nil {
		return st, err
	}
	// The queue first: reading it grants what expiries made grantable
	// (Redis has no expiry hook), and the plain read then sees that grant.
	// In the other order a holder that expired with a waiter queued read
	// as free, and the queue read then handed the lock on unseen.
	if st.queue, st.queued, err = inspectQueue(ctx, c, key); err != nil {
		return st, err
	}
	st.info, st.held, err = c.Inspect(ctx, key)
	return st, err
}

// writeStatus prints st as text, or through jsonOut when it is set, and
// returns the not-held error (status 1) for a free lock.
func (s *invocation) writeStatus(st lockStatus, jsonOut func(any) error) error {
	if st.queued {
		// Readers, permits or waiters: shared.go's form. In JSON an
		// exclusive holder with waiters keeps the plain form's fields too,
		// as in list --json, so that .token does not vanish when someone
		// queues.
		if st.held && jsonOut != nil {
			qj := toQueueJSON(st.queue)
			return jsonOut(lockQueueJSON{lockJSON: toJSON(st.info, time.Now()), Holders: qj.Holders, Waiters: qj.Waiters})
		}
		return s.queueStatus(st.queue, jsonOut)
	}
	key, info, held := st.key, st.info, st.held
	now := time.Now()
	if jsonOut != nil {
		var v any = freeJSON{Key: key}
		if held {
			v = toJSON(info, now)
		}
		if err := jsonOut(v); err != nil {
			return err
		}
	} else if held {
		j := toJSON(info, now)
		tw := tabwriter.NewWriter(s.env.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "key:\t%s\n", shown(key))
		fmt.Fprintf(tw, "token:\t%d (the holder's own, its DLOCK_TOKEN)\n", info.Token)
		fmt.Fprintf(tw, "holder:\t%s pid %d\n", shown(info.Owner.Host), info.Owner.PID)
		fmt.Fprintf(tw, "meta:\t%s\n", shown(info.Owner.Meta))
		fmt.Fprintf(tw, "since:\t%s (held %s)\n", j.Since, roundDur(time.Duration(j.HeldMS)*time.Millisecond))
		fmt.Fprintf(tw, "ttl left:\t%s\n", roundDur(info.TTL))
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if !held {
		return &exitError{code: ExitNotHeld, err: fmt.Errorf("lock %q is not held", key)}
	}
	return nil
}

func unlockCommand(ctx context.Context, s *invocation, o operatorFlags, force *bool, args []string) error {
	if err := s.parse(args); err != nil {
		return err
	}
	key, err := keyArg(s.flags, "unlock")
	if err != nil {
		return err
	}
	if !*force {
		return usageErrorf("refusing to break a lock without --force")
	}
	var token uint64
	var held bool
	var shares int // readers and permit holders of a name with no exclusive holder
	err = s.withClient(ctx, *o.timeout, func(ctx context.Context, c *dlock.Client) (err error) {
		if err := checkKey(c, key); err != nil {
			return err
		}
		if token, held, err = c.ForceRelease(ctx, key); err != nil || held {
			return err
		}
		q, _, err := inspectQueue(ctx, c, key)
		for _, h := range q.Holders {
			if h.Mode != driver.ModeExclusive {
				shares++
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	if *o.json {
		v := unlockJSON{Key: key, Broken: held}
		if held {
			v.Token = &token
		}
		if err := writeJSON(s.env.Stdout, v); err != nil {
			return err
		}
	} else if held {
		if _, err := fmt.Fprintln(s.env.Stdout, token); err != nil {
			return err
		}
	}
	switch {
	case shares > 0:
		return &exitError{code: ExitNotHeld, err: fmt.Errorf("lock %q has no exclusive holder to break (%s; unlock --force breaks exclusive locks only)",
			key, countOf(shares, "reader or permit holder"))}
	case !held:
		return &exitError{code: ExitNotHeld, err: fmt.Errorf("lock %q is not held", key)}
	}
	return nil
}

// unlockJSON is unlock --json's answer; token only when a lock was broken.
type unlockJSON struct {
	Key    string  `json:"key"`
	Broken bool    `json:"broken"`
	Token  *uint64 `json:"token,omitempty"`
}

// holderSummary describes the current holder for a "not acquired"
// message; empty when it cannot be had quickly.
func holderSummary(ctx context.Context, c *dlock.Client, key string) string {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	info, held, err := c.Inspect(ctx, key)
	if err != nil || !held {
		return ""
	}
	return describeHolder(info)
}

func describeHolder(info dlock.LockInfo) string {
	return fmt.Sprintf(" (holder: %s pid %d, token %d, ttl left %s)",
		shown(info.Owner.Host), info.Owner.PID, info.Token, roundDur(info.TTL))
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return errors.Join(errors.New("writing JSON"), err)
	}
	return nil
}

func roundDur(d time.Duration) time.Duration {
	if d > time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}
