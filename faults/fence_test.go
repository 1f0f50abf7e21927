package faults

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The fenced register is the resource the lock protects: a counter on its own
// redis-server, which no fault ever touches. Every read and write carries the
// caller's fencing token; the register refuses a token lower than the highest
// it has seen, on reads as well as writes. Registering the token on the read
// matters: with writes alone, an old holder that read before a new holder and
// writes after the new holder's read would still be let through, and one of
// the two increments would be lost.
//
// Each call is appended to a log inside the same script, so the log is the
// register's own order of events, the ground truth the checker works from
// (including calls whose reply a killed worker never saw).
//
// A read lease's read ('q') is accepted when its token is not below the
// highest write-side token and raises the highest read token; a write-side
// call must then carry a token above every read token too (docs/rwlock.md:
// a writer that was paused past its lease must not write after a reader of
// a later epoch has read). Without 'q' calls that second bound is 0.
var fenceScript = redis.NewScript(`
-- KEYS[1] value, KEYS[2] highest token seen, KEYS[3] log, KEYS[4] highest read-lease token
-- ARGV[1] 'r', 'w' or 'q', ARGV[2] token, ARGV[3] acquisition id, ARGV[4] new value
-- Returns {accepted 0/1, value before the call}.
local top = tonumber(redis.call('GET', KEYS[2]) or '0')
local topR = tonumber(redis.call('GET', KEYS[4]) or '0')
local tok = tonumber(ARGV[2])
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local ok = 0
if ARGV[1] == 'q' then
  if tok >= top then
    ok = 1
    if tok > topR then
      redis.call('SET', KEYS[4], ARGV[2])
    end
  end
elseif tok >= top and (topR == 0 or tok > topR) then
  ok = 1
  if tok > top then
    redis.call('SET', KEYS[2], ARGV[2])
  end
  if ARGV[1] == 'w' then
    redis.call('SET', KEYS[1], ARGV[4])
  end
end
redis.call('RPUSH', KEYS[3], table.concat({ARGV[1], ARGV[3], ARGV[2], cur, ARGV[4] or '-', ok}, ' '))
return {ok, cur}
`)

// fenceName is the register every run uses; each run has its own server.
const fenceName = "reg"

// fenceClient calls the fenced register.
type fenceClient struct {
	rdb *redis.Client
}

func (f fenceClient) keys() []string {
	return []string{fenceName + ":value", fenceName + ":top", fenceName + ":log", fenceName + ":top-read"}
}

// read returns the counter if tok is not lower than every token seen.
func (f fenceClient) read(ctx context.Context, acq string, tok uint64) (bool, int64, error) {
	v, err := fenceScript.Run(ctx, f.rdb, f.keys(), "r", tok, acq).Int64Slice()
	if err != nil {
		return false, 0, err
	}
	return v[0] == 1, v[1], nil
}

// write sets the counter to val if tok is not lower than every token seen.
func (f fenceClient) write(ctx context.Context, acq string, tok uint64, val int64) (bool, error) {
	v, err := fenceScript.Run(ctx, f.rdb, f.keys(), "w", tok, acq, val).Int64Slice()
	if err != nil {
		return false, err
	}
	return v[0] == 1, nil
}

// fenceOp is one call as the register logged it.
type fenceOp struct {
	Write bool
	Acq   string
	Tok   uint64
	Cur   int64 // value before the call
	New   int64 // value written (writes only)
	OK    bool
}

// history returns the register's log and final value.
func (f fenceClient) history(ctx context.Context) ([]fenceOp, int64, error) {
	lines, err := f.rdb.LRange(ctx, fenceName+":log", 0, -1).Result()
	if err != nil {
		return nil, 0, err
	}
	ops := make([]fenceOp, 0, len(lines))
	for _, l := range lines {
		op, err := parseFenceOp(l)
		if err != nil {
			return nil, 0, err
		}
		ops = append(ops, op)
	}
	final, err := f.rdb.Get(ctx, fenceName+":value").Int64()
	if err == redis.Nil {
		final, err = 0, nil
	}
	return ops, final, err
}

func parseFenceOp(line string) (fenceOp, error) {
	f := strings.Fields(line)
	if len(f) != 6 {
		return fenceOp{}, fmt.Errorf("fence log entry %q", line)
	}
	tok, err1 := strconv.ParseUint(f[2], 10, 64)
	cur, err2 := strconv.ParseInt(f[3], 10, 64)
	op := fenceOp{Write: f[0] == "w", Acq: f[1], Tok: tok, Cur: cur, OK: f[5] == "1"}
	var err3 error
	if op.Write {
		op.New, err3 = strconv.ParseInt(f[4], 10, 64)
	}
	if err1 != nil || err2 != nil || err3 != nil {
		return fenceOp{}, fmt.Errorf("fence log entry %q", line)
	}
	return op, nil
}
