package redisdriver

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dlockio/dlock/driver"
)

// A held lock is stored as one string, "<id>:<token>:<since ms>:<owner>",
// written by acquire.lua; owner is driver.Owner as JSON. A released one is
// "~<id>:" (release.lua). These helpers are the Go side of that format.

func ownerJSON(o driver.Owner) string {
	b, _ := json.Marshal(o) // a struct of strings and an int cannot fail
	return string(b)
}

// idPrefix is what the scripts compare a stored value's start with.
func idPrefix(id string) string { return id + ":" }

// released reports whether a stored value is the mark release.lua leaves.
func released(v string) bool { return strings.HasPrefix(v, "~") }

// parseValue decodes a stored lock value into info (Key and TTL are the
// caller's).
func parseValue(v string, info *driver.LockInfo) error {
	parts := strings.SplitN(v, ":", 4)
	if len(parts) != 4 {
		return fmt.Errorf("malformed lock value %q", v)
	}
	tok, err := strconv.ParseUint(parts[1], 10, 64)
	if err != nil {
		return fmt.Errorf("malformed token in lock value %q: %w", v, err)
	}
	ms, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return fmt.Errorf("malformed time in lock value %q: %w", v, err)
	}
	info.Token, info.Since = tok, time.UnixMilli(ms)
	if err := json.Unmarshal([]byte(parts[3]), &info.Owner); err != nil {
		return fmt.Errorf("malformed owner in lock value %q: %w", v, err)
	}
	return nil
}
