package redisdriver

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dlockio/dlock/driver"
)

// A held lock is stored as one string, "<id>:<since ms>:<owner>", where
// owner is driver.Owner as JSON; the fencing token lives in the counter key
// (see Acquire for why it cannot be part of the value). These helpers are
// the Go side of that format.

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
func idPrefix(id string) string { return id + ":" }

// parseValue decodes a stored lock value into info (Key, Token and TTL are
// the caller's).
func parseValue(v string, info *driver.LockInfo) error {
	parts := strings.SplitN(v, ":", 3)
	if len(parts) != 3 {
		return fmt.Errorf("malformed lock value %q", v)
	}
	ms, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return fmt.Errorf("malformed time in lock value %q: %w", v, err)
	}
	info.Since = time.UnixMilli(ms)
	if err := json.Unmarshal([]byte(parts[2]), &info.Owner); err != nil {
		return fmt.Errorf("malformed owner in lock value %q: %w", v, err)
	}
	return nil
}
