package etcddriver

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dlockio/dlock/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A lock's value is "<owner id> <ttl ms> <since unix ms> <owner JSON>". It
// is written once, by the acquisition, and never changed while the lock is
// held (renewal refreshes the lease, not the key), except when a renewal
// asks for another TTL.
type lockValue struct {
	id    string
	ttl   time.Duration
	since time.Time
	owner driver.Owner
}

var errBadValue = errors.New("malformed lock value")

func (v lockValue) encode() (string, error) {
	owner, err := json.Marshal(v.owner)
	if err != nil {
		return "", fmt.Errorf("%w: owner %+v: %v", driver.ErrInvalid, v.owner, err)
	}
	return v.id + sep + strconv.FormatInt(v.ttl.Milliseconds(), 10) + sep +
		strconv.FormatInt(v.since.UnixMilli(), 10) + sep + string(owner), nil
}

func decodeValue(b []byte) (lockValue, error) {
	parts := strings.SplitN(string(b), sep, 4)
	if len(parts) != 4 {
		return lockValue{}, fmt.Errorf("%w: %q", errBadValue, b)
	}
	ttl, err1 := strconv.ParseInt(parts[1], 10, 64)
	since, err2 := strconv.ParseInt(parts[2], 10, 64)
	var owner driver.Owner
	err3 := json.Unmarshal([]byte(parts[3]), &owner)
	if err := errors.Join(err1, err2, err3); err != nil {
		return lockValue{}, fmt.Errorf("%w: %q: %v", errBadValue, b, err)
	}
	return lockValue{id: parts[0], ttl: time.Duration(ttl) * time.Millisecond,
		since: time.UnixMilli(since), owner: owner}, nil
}

// ownedBy reports whether a stored value belongs to id.
func ownedBy(value []byte, id string) bool {
	return strings.HasPrefix(string(value), id+sep)
}

// ownedCmp is the Txn condition "key's value belongs to id": values
// starting with id+" " are exactly those in [id+" ", id+"!") (see
// checkID). A missing key fails it, as etcd fails every value comparison
// of a key that does not exist.
func ownedCmp(key, id string) []clientv3.Cmp {
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.Value(key), ">", id),
		clientv3.Compare(clientv3.Value(key), "<", id+"!"),
	}
}
