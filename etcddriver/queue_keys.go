package etcddriver

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dlockio/dlock/driver"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Key spaces of the queue, after the prefix. A name is written with its
// length first ("<len>/<name>/"), because names may contain any byte:
// without the length, the range of name "a" would hold the keys of "a/b".
const (
	queueSpace  = "q/" // a name's waiters (".../w/<id>") and shared/permit holders (".../h/<id>")
	qmarkSpace  = "m/" // release markers of queued leases, one per id
	inboxSpace  = "i/" // grant announcements, one per granted id
	waiterPart  = "w/"
	holderPart  = "h/"
	maxAttempts = 32 // optimistic rounds of one queue step before giving up
)

func lenPrefixed(s string) string { return strconv.Itoa(len(s)) + "/" + s + "/" }

// queueName is the name at the start of rest, "<len>/<name>/...": the
// inverse of lenPrefixed.
func queueName(rest string) (string, error) {
	slash := strings.IndexByte(rest, '/')
	if slash < 0 {
		return "", errors.New("no length")
	}
	n, err := strconv.Atoi(rest[:slash])
	if err != nil || n < 0 || slash+1+n > len(rest) {
		return "", fmt.Errorf("bad length %q", rest[:slash])
	}
	return rest[slash+1 : slash+1+n], nil
}

// queuePrefix holds every waiter and queued holder of name: one range, so
// that Acquire refuses a name with any of them in one compare.
func (d *Driver) queuePrefix(name string) string   { return d.prefix + queueSpace + lenPrefixed(name) }
func (d *Driver) waiterPrefix(name string) string  { return d.queuePrefix(name) + waiterPart }
func (d *Driver) holderPrefix(name string) string  { return d.queuePrefix(name) + holderPart }
func (d *Driver) waiterKey(name, id string) string { return d.waiterPrefix(name) + id }
func (d *Driver) holderKey(name, id string) string { return d.holderPrefix(name) + id }
func (d *Driver) qmarkKey(name, id string) string  { return d.qmarkPrefix(name) + id }

// qmarkPrefix holds the release markers of name's queued leases.
func (d *Driver) qmarkPrefix(name string) string  { return d.prefix + qmarkSpace + lenPrefixed(name) }
func (d *Driver) inboxPrefix(inbox string) string { return d.prefix + inboxSpace + lenPrefixed(inbox) }

// queueEmptyCmp is the Txn condition "name has no waiter and no queued
// holder": over a range, etcd compares every key in it, and an empty range
// compares as one absent key (create revision 0).
func (d *Driver) queueEmptyCmp(name string) clientv3.Cmp {
	p := d.queuePrefix(name)
	return clientv3.Compare(clientv3.CreateRevision(p), "=", 0).WithRange(clientv3.GetPrefixRangeEnd(p))
}

// queueValue is the JSON value of a waiter or queued-holder key. The id is
// in the key; the create revision of the key is a waiter's arrival (the
// store's order) and a holder's token.
type queueValue struct {
	ID    string        `json:"id"`
	Mode  driver.Mode   `json:"mode"`
	Limit int           `json:"limit,omitempty"`
	Inbox string        `json:"inbox,omitempty"`
	TTL   time.Duration `json:"ttl"`
	Since time.Time     `json:"since"`
	Owner driver.Owner  `json:"owner"`
}

// holderCmp is the Txn condition "the holder key is id's, of mode m":
// encode writes the id first and the mode second, so such a value starts
// with `{"id":<id>,"mode":<m>,` (the id as encoding/json writes it), and
// the values starting with that prefix p are exactly those in (p, p'),
// where p' is p with its final comma replaced by the next byte, '-'.
func holderCmp(key, id string, m driver.Mode) []clientv3.Cmp {
	idJSON, _ := json.Marshal(id) // a string always encodes
	p := `{"id":` + string(idJSON) + `,"mode":` + strconv.Itoa(int(m)) + `,`
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.Value(key), ">", p),
		clientv3.Compare(clientv3.Value(key), "<", p[:len(p)-1]+"-"),
	}
}

func (v queueValue) encode() (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("%w: owner %+v: %v", driver.ErrInvalid, v.Owner, err)
	}
	return string(b), nil
}

func decodeQueueValue(b []byte) (queueValue, error) {
	var v queueValue
	if err := json.Unmarshal(b, &v); err != nil {
		return queueValue{}, fmt.Errorf("%w: %q: %v", errBadValue, b, err)
	}
	return v, nil
}

// announcement is the value of an inbox key; the token is the key's
// revision, the revision of the Txn that granted.
type announcement struct {
	Key string `json:"key"`
	ID  string `json:"id"`
}

// checkQueueRequest rejects what the engine never sends.
func checkQueueRequest(req driver.QueueRequest) (int64, error) {
	if req.Key == "" {
		return 0, fmt.Errorf("%w: empty key", driver.ErrInvalid)
	}
	if err := checkID(req.ID); err != nil {
		return 0, err
	}
	switch req.Mode {
	case driver.ModeExclusive, driver.ModeShared:
	case driver.ModePermit:
		if req.Limit < 1 {
			return 0, fmt.Errorf("%w: permit limit %d, want at least 1", driver.ErrInvalid, req.Limit)
		}
	default:
		return 0, fmt.Errorf("%w: mode %v", driver.ErrInvalid, req.Mode)
	}
	if req.Wait && req.Inbox == "" {
		return 0, fmt.Errorf("%w: a waiting request needs an inbox", driver.ErrInvalid)
	}
	if req.MaxWaiters < 0 {
		return 0, fmt.Errorf("%w: most waiters %d", driver.ErrInvalid, req.MaxWaiters)
	}
	return ttlSeconds(req.TTL)
}

func isLeaseNotFound(err error) bool { return errors.Is(err, rpctypes.ErrLeaseNotFound) }
