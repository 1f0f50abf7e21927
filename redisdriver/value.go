package redisdriver

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dlockio/dlock/driver"
)

// A held lock is stored as one string,
//
//	"<id>:<token>:<since ms>:<owner JSON>"
//
// acquire.lua writes the first two fields, since the token is issued
// there; the Go side sends the id prefix and the rest. These helpers are
// the Go side of the format (lib.lua's token_of is the Lua side).

// ownerEncoding caches the JSON of the last owner encoded: a Client sends
// the same owner with every acquisition.
type ownerEncoding struct {
	owner driver.Owner
	json  string
}

func (d *Driver) ownerJSON(o driver.Owner) string {
	if c := d.ownerCache.Load(); c != nil && c.owner == o {
		return c.json
	}
	b, _ := json.Marshal(o) // a struct of strings and an int cannot fail
	d.ownerCache.Store(&ownerEncoding{owner: o, json: string(b)})
	return string(b)
}

// idPrefix is what the scripts compare a stored value's start with.
func idPrefix(id string) string { return id + sep }

// valueRest is the part of a lock value after the token.
func (d *Driver) valueRest(since time.Time, o driver.Owner) string {
	return sep + strconv.FormatInt(since.UnixMilli(), 10) + sep + d.ownerJSON(o)
}

// parseValue decodes a stored lock value into info's Token, Since and
// Owner (Key and TTL are the caller's).
func parseValue(v string, info *driver.LockInfo) error {
	parts := strings.SplitN(v, sep, 4)
	if len(parts) != 4 {
		return fmt.Errorf("malformed lock value %q", v)
	}
	tok, err := parseToken(parts[1])
	if err != nil {
		return fmt.Errorf("lock value %q: %w", v, err)
	}
	ms, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return fmt.Errorf("malformed time in lock value %q: %w", v, err)
	}
	info.Token = tok
	info.Since = time.UnixMilli(ms)
	if err := json.Unmarshal([]byte(parts[3]), &info.Owner); err != nil {
		return fmt.Errorf("malformed owner in lock value %q: %w", v, err)
	}
	return nil
}

// parseToken reads a token as the scripts write it: decimal digits, a
// positive number below maxToken.
func parseToken(s string) (uint64, error) {
	tok, err := strconv.ParseUint(s, 10, 64)
	if err != nil || tok == 0 || tok >= maxToken {
		return 0, fmt.Errorf("malformed token %q", s)
	}
	return tok, nil
}
