package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
)

// listQueuesHelp is the part of list --help about read-write locks and
// semaphores.
const listQueuesHelp = `
Read-write locks and semaphores with readers, permits or waiters (run
--shared, run --permits, queued waiters) follow under a QUEUED header: one
line per holder with its mode (exclusive, shared or permit), lease id,
token (a reader's write epoch; "-" for a permit, whose token means
nothing), host, pid, TTL left, the name's number of waiters and the meta
text; a name with waiters only has one line with mode "-". A name held
exclusively that has waiters shows in both tables.

With --json, such a name's object also has the holders and waiters arrays
of status --json (see dlock status --help); when the name has no plain
holder (readers, permits, or only waiters) its object is only
{key, held, holders, waiters}, held being true when it has some holder.
`

func listCommand(ctx context.Context, s *invocation, o operatorFlags, args []string) error {
	asJSON := o.json
	if err := s.parse(args); err != nil {
		return err
	}
	fs := s.flags.fs
	if fs.NArg() > 1 {
		return usageErrorf("want at most one PREFIX, got %d arguments (see dlock list --help)", fs.NArg())
	}
	var infos []dlock.LockInfo
	var queues []dlock.QueueInfo
	err := s.withClient(ctx, *o.timeout, func(ctx context.Context, c *dlock.Client) (err error) {
		// The queues first, as in lookStatus: reading them makes the
		// grants that expiries allow, which List then sees.
		if queues, err = listQueues(ctx, c, fs.Arg(0)); err != nil {
			return err
		}
		infos, err = c.List(ctx, fs.Arg(0))
		return err
	})
	if err != nil {
		return err
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Key < infos[j].Key })
	now := time.Now()
	if *asJSON {
		return writeJSON(s.env.Stdout, listJSON(infos, queues, now))
	}
	out := make([]lockJSON, len(infos))
	for i, info := range infos {
		out[i] = toJSON(info, now)
	}
	if len(out) == 0 && len(queues) == 0 {
		msg := "no locks held"
		if p := fs.Arg(0); p != "" {
			msg += fmt.Sprintf(" with a name starting with %q", p)
		}
		_, err := fmt.Fprintln(s.env.Stdout, msg)
		return err
	}
	if len(out) > 0 {
		tw := tabwriter.NewWriter(s.env.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tTOKEN\tHOST\tPID\tHELD\tTTL\tMETA")
		for _, j := range out {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\t%s\n", shown(j.Key), j.Token, shown(j.Host), j.PID,
				roundDur(time.Duration(j.HeldMS)*time.Millisecond), roundDur(time.Duration(j.TTLMS)*time.Millisecond), shown(j.Meta))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(queues) == 0 {
		return nil
	}
	if len(out) > 0 {
		if _, err := fmt.Fprintln(s.env.Stdout); err != nil {
			return err
		}
	}
	return writeQueueList(s.env.Stdout, queues)
}

// listQueues returns the names under prefix with readers, permits or
// waiters, sorted by name; none when the store keeps no queues.
func listQueues(ctx context.Context, c *dlock.Client, prefix string) ([]dlock.QueueInfo, error) {
	qs, err := c.ListQueues(ctx, prefix)
	if errors.Is(err, dlock.ErrUnsupported) {
		return nil, nil
	}
	return qs, err
}

// lockQueueJSON is a plain holder's list --json object with its name's
// queue: an exclusive holder with waiters.
type lockQueueJSON struct {
	lockJSON
	Holders []queueHolderJSON `json:"holders"`
	Waiters []queueWaiterJSON `json:"waiters"`
}

// listJSON merges the plain locks and the queued names into list --json's
// array, sorted by name: existing lock objects keep their fields and gain
// the queue's, queued names without a plain holder are status's queue form.
func listJSON(infos []dlock.LockInfo, queues []dlock.QueueInfo, now time.Time) []any {
	byKey := make(map[string]dlock.QueueInfo, len(queues))
	for _, q := range queues {
		byKey[q.Key] = q
	}
	out := make([]any, 0, len(infos)+len(queues))
	keys := make([]string, 0, len(infos)+len(queues))
	for _, info := range infos {
		j := toJSON(info, now)
		q, ok := byKey[info.Key]
		if !ok {
			out = append(out, j)
		} else {
			delete(byKey, info.Key)
			qj := toQueueJSON(q)
			out = append(out, lockQueueJSON{lockJSON: j, Holders: qj.Holders, Waiters: qj.Waiters})
		}
		keys = append(keys, info.Key)
	}
	for _, q := range queues {
		if _, ok := byKey[q.Key]; ok {
			out = append(out, toQueueJSON(q))
			keys = append(keys, q.Key)
		}
	}
	sort.Sort(byKeys{keys, out})
	return out
}

// byKeys sorts list --json's objects by their names.
type byKeys struct {
	keys []string
	out  []any
}

func (b byKeys) Len() int           { return len(b.keys) }
func (b byKeys) Less(i, j int) bool { return b.keys[i] < b.keys[j] }
func (b byKeys) Swap(i, j int) {
	b.keys[i], b.keys[j] = b.keys[j], b.keys[i]
	b.out[i], b.out[j] = b.out[j], b.out[i]
}

// writeQueueList prints the queued names' table, one line per holder.
func writeQueueList(w io.Writer, queues []dlock.QueueInfo) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUED\tMODE\tID\tTOKEN\tHOST\tPID\tTTL\tWAITERS\tMETA")
	for _, q := range queues {
		if len(q.Holders) == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t-\t%d\t\n", shown(q.Key), len(q.Waiters))
		}
		for _, h := range q.Holders {
			tok := fmt.Sprint(h.Token)
			if h.Mode == driver.ModePermit {
				tok = "-" // a permit's token means nothing
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%d\t%s\n", shown(q.Key), modeName(h.Mode), shown(h.ID), tok,
				shown(h.Owner.Host), h.Owner.PID, roundDur(h.TTL), len(q.Waiters), shown(h.Owner.Meta))
		}
	}
	return tw.Flush()
}
