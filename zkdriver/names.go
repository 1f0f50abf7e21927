package zkdriver

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dlockio/dlock/driver"
)

// seqDigits is the width of the counter ZooKeeper appends to a sequential
// node's name.
const seqDigits = 10

// kindExclusive starts the node name of a plain or fair lock's holder or
// waiter; the other queue modes have letters of their own.
const kindExclusive = "x"

// nameNode is the znode of lock name key: the prefix, then the name
// escaped as one path segment (every '/', control character, '%' and
// non-ASCII byte as %XX; "." and ".." as %2E, which ZooKeeper refuses as
// segments).
func (d *Driver) nameNode(key string) string {
	return d.prefix + "/" + escapeName(key)
}

func escapeName(key string) string {
	s := url.PathEscape(key)
	if s == "." || s == ".." {
		s = strings.ReplaceAll(s, ".", "%2E")
	}
	return s
}

func unescapeName(seg string) (string, bool) {
	k, err := url.PathUnescape(seg)
	return k, err == nil
}

// child is one node under a name node: a holder or a waiter.
type child struct {
	name string // the node's own name, without its parent
	kind string // kindExclusive, ...
	id   string // the acquisition's owner id
	seq  int64  // ZooKeeper's sequence number: arrival order
}

// childPrefix is the name, before ZooKeeper's counter, of the node of
// acquisition id of the given kind: the id in the name is how a client
// finds its own node again after a create whose reply it lost.
func childPrefix(kind, id string) string { return kind + "-" + id + "-" }

// parseChild reads a child's name; ok is false for names dlock did not
// write.
func parseChild(name string) (child, bool) {
	if len(name) < seqDigits+4 {
		return child{}, false
	}
	seq, err := strconv.ParseInt(name[len(name)-seqDigits:], 10, 64)
	if err != nil {
		return child{}, false
	}
	kind, rest, ok := strings.Cut(name[:len(name)-seqDigits], "-")
	if !ok || !strings.HasSuffix(rest, "-") || len(rest) < 2 {
		return child{}, false
	}
	return child{name: name, kind: kind, id: rest[:len(rest)-1], seq: seq}, true
}

// sortedChildren parses names and sorts them in arrival order.
func sortedChildren(names []string) []child {
	cs := make([]child, 0, len(names))
	for _, n := range names {
		if c, ok := parseChild(n); ok {
			cs = append(cs, c)
		}
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].seq < cs[j].seq })
	return cs
}

// nodeData is what a holder's or waiter's node holds. TTL is the lease's
// time to live counted from the node's last modification (its mtime, the
// ZooKeeper leader's clock): a node not modified for TTL is expired, and
// any client may delete it (version-checked, so that a renewal in between
// wins).
type nodeData struct {
	TTLms int64  `json:"ttl"`
	Since int64  `json:"since"` // acquisition time, Unix ns, by the holder's clock
	Host  string `json:"host,omitempty"`
	PID   int    `json:"pid,omitempty"`
	Meta  string `json:"meta,omitempty"`
}

func newData(ttl time.Duration, since time.Time, o driver.Owner) nodeData {
	return nodeData{TTLms: ttl.Milliseconds(), Since: since.UnixNano(), Host: o.Host, PID: o.PID, Meta: o.Meta}
}

func (nd nodeData) encode() []byte {
	b, _ := json.Marshal(nd)
	return b
}

func decodeData(b []byte) (nodeData, error) {
	var nd nodeData
	if err := json.Unmarshal(b, &nd); err != nil {
		return nd, fmt.Errorf("zkdriver: unreadable node data: %w", err)
	}
	return nd, nil
}

func (nd nodeData) owner() driver.Owner {
	return driver.Owner{Host: nd.Host, PID: nd.PID, Meta: nd.Meta}
}
