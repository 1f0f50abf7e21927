-- The queue of a name: prepended (after lib.lua) to every script that can
-- change who holds a name, so that granting is written once.
--
-- Keys of name N, all with the hash tag {N}, so one Cluster slot:
--   P{N}      the exclusive holder: the plain lock's key and value
--   P{N}:last the last released exclusive lock (tokens, retries)
--   P{N}:w    ZSET of waiter ids, scored by arrival (the store's sequence)
--   P{N}:e    ZSET of every queued lease's expiry in server ms: waiters,
--             shared and permit holders, and release records ("r:<id>")
--   P{N}:d    HASH of their data, same members, plus counters:
--             waiter  "W<mode>" SEP "<limit>" SEP "<inbox>" SEP "<since>" SEP "<owner>"
--             holder  "H<mode>" SEP "<token>" SEP "<since>" SEP "<owner>"
--             '#s' the last arrival number, '#h' the number of holders,
--             '#m' their mode
--   P{N}:q    a string that exists while the others do: Acquire and
--             Release read it with the lock key in one MGET, so the plain
--             lock pays no extra call for the queue
-- The queue keys are derived from the lock key inside the scripts: they
-- share its hash tag, hence its slot, which is all Cluster requires of the
-- keys a script touches. They are given the latest expiry in P{N}:e
-- whenever a lease is added or extended, and deleted when it empties, so
-- they outlive their last lease by at most one TTL.
--
-- Everything is defined inside queue_lib(), which a script calls only when
-- it needs the queue: defining a dozen functions costs Redis about a
-- microsecond per script call, which the plain lock's scripts (acquire,
-- release) do not pay on a name without a queue.
local function queue_lib()
  local MODE_EXCL, MODE_SHARED, MODE_PERMIT = '1', '2', '3'

  local function q_keys(lock)
    return { lock = lock, last = lock .. ':last', w = lock .. ':w', e = lock .. ':e', d = lock .. ':d', q = lock .. ':q' }
  end

  -- now_ms is the server clock in whole milliseconds, rounded down, so an
  -- expiry computed from it is at most 1 ms early (ExpiryMargin covers it).
  local function now_ms()
    local t = redis.call('TIME')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), t
  end

  -- epoch_token is a shared or permit holder's token: at least every
  -- exclusive token issued for the name before (the last released one is on
  -- record; any older or expired one is below TIME minus a millisecond, see
  -- next_token in lib.lua) and below every one issued later (those are above the
  -- record and at least TIME).
  local function epoch_token(lastkey, t)
    local tok = tonumber(t[1]) * 1000000 + tonumber(t[2]) - 1
    local last = redis.call('GET', lastkey)
    if last then
      local _, prev = token_of(last, lastkey)
      if prev > tok then
        tok = prev
      end
    end
    return string.format('%.0f', tok)
  end

  -- q_fits reports whether a request of mode (limit permits) is compatible
  -- with the holders.
  local function q_fits(K, mode, limit)
    if redis.call('EXISTS', K.lock) == 1 then
      return false
    end
    local hm = redis.call('HMGET', K.d, '#h', '#m')
    local n = tonumber(hm[1] or '0')
    if n == 0 then
      return true
    end
    if mode == MODE_EXCL or hm[2] ~= mode then
      return false
    end
    return mode == MODE_SHARED or n < tonumber(limit)
  end

  -- q_hold makes id a shared or permit holder until exp.
  local function q_hold(K, id, mode, tok, rest, exp)
    redis.call('HSET', K.d, id, 'H' .. mode .. SEP .. tok .. rest, '#m', mode)
    redis.call('HINCRBY', K.d, '#h', 1)
    redis.call('ZADD', K.e, exp, id)
  end

  -- q_grant_exclusive makes id the exclusive holder until exp (absolute ms).
  local function q_grant_exclusive(K, id, rest, exp, t)
    local tok = next_token(t, redis.call('GET', K.last), K.last)
    redis.call('SET', K.lock, id .. SEP .. tok .. rest, 'PXAT', exp)
    return tok
  end

  -- q_announce publishes a grant on the waiter's inbox channel:
  -- "<id>" SEP "<token>" SEP "<name>".
  local function q_announce(K, inbox, id, tok)
    local open = string.find(K.lock, '{', 1, true)
    local prefix = string.sub(K.lock, 1, open - 1)
    local name = string.sub(K.lock, open + 1, -2)
    redis.call('PUBLISH', prefix .. '__INBOX_INFIX__' .. inbox, id .. SEP .. tok .. SEP .. name)
  end

  -- q_touch gives the queue keys the latest expiry of their leases, or
  -- deletes them when none is left. Exactly that expiry: Redis keeps a key
  -- through the millisecond of its expiry, and q_settle drops a lease at
  -- it, so the keys never vanish under a live lease nor outlive the last.
  local function q_touch(K)
    local top = redis.call('ZRANGE', K.e, -1, -1, 'WITHSCORES')
    if #top == 0 then
      redis.call('DEL', K.w, K.e, K.d, K.q)
      return
    end
    local at = top[2]
    redis.call('PEXPIREAT', K.w, at)
    redis.call('PEXPIREAT', K.e, at)
    redis.call('PEXPIREAT', K.d, at)
    redis.call('SET', K.q, '1', 'PXAT', at)
  end

  -- q_settle drops expired queued leases and grants, in arrival order, to
  -- the waiters at the head that now fit; the first that does not fit stops
  -- the grants behind it. It returns whether the name has queued leases
  -- left. Every script that looks at a name's queue calls it first: Redis
  -- has no expiry hook, so an expiry grants at the next call that touches
  -- the name (a waiter's renewal, or its poke at RetryAfter).
  local function q_settle(K, now, t)
    if redis.call('EXISTS', K.d) == 0 then
      return false
    end
    local gone = redis.call('ZRANGEBYSCORE', K.e, '-inf', now)
    for _, m in ipairs(gone) do
      local v = redis.call('HGET', K.d, m)
      if v and string.sub(v, 1, 1) == 'H' then
        redis.call('HINCRBY', K.d, '#h', -1)
      elseif v and string.sub(v, 1, 1) == 'W' then
        redis.call('ZREM', K.w, m)
      end
      redis.call('HDEL', K.d, m)
    end
    if #gone > 0 then
      redis.call('ZREMRANGEBYSCORE', K.e, '-inf', now)
    end
    while true do
      local head = redis.call('ZRANGE', K.w, 0, 0)[1]
      if not head then
        break
      end
      local rec = redis.call('HGET', K.d, head)
      local a = string.find(rec, SEP, 1, true)
      local b = string.find(rec, SEP, a + 1, true)
      local c = string.find(rec, SEP, b + 1, true)
      local mode = string.sub(rec, 2, a - 1)
      local limit = string.sub(rec, a + 1, b - 1)
      if not q_fits(K, mode, limit) then
        break
      end
      local inbox = string.sub(rec, b + 1, c - 1)
      local rest = string.sub(rec, c)
      -- The grant keeps the waiter place's expiry: the waiter computed its
      -- validity deadline from the send time of the request (enqueue or
      -- renewal) that set that expiry, so the lease cannot expire here
      -- before the deadline the waiter then believes in.
      local exp = redis.call('ZSCORE', K.e, head)
      redis.call('ZREM', K.w, head)
      local tok
      if mode == MODE_EXCL then
        tok = q_grant_exclusive(K, head, rest, exp, t)
        redis.call('HDEL', K.d, head)
        redis.call('ZREM', K.e, head)
      else
        tok = epoch_token(K.last, t)
        redis.call('HSET', K.d, head, 'H' .. mode .. SEP .. tok .. rest, '#m', mode)
        redis.call('HINCRBY', K.d, '#h', 1)
      end
      q_announce(K, inbox, head, tok)
    end
    if redis.call('ZCARD', K.e) == 0 then
      redis.call('DEL', K.w, K.e, K.d, K.q)
      return false
    end
    -- No q_touch: pruning and granting never make a lease expire later,
    -- so the keys' expiry (the latest lease's when last extended) still
    -- covers every lease left; at worst they outlive them by a TTL.
    -- Release records alone ("r:<id>") do not make the name busy.
    return tonumber(redis.call('HGET', K.d, '#h') or '0') > 0 or redis.call('ZCARD', K.w) > 0
  end

  -- q_retry_after is the time until the first holder expires, for the head
  -- of the queue (or a refused request); TTL_UNKNOWN when only waiters
  -- stand ahead (their grants are announced).
  local function q_retry_after(K, now)
    local first = false
    local pt = redis.call('PTTL', K.lock)
    if pt >= 0 then
      first = pt
    end
    local hs = {}
    if tonumber(redis.call('HGET', K.d, '#h') or '0') > 0 then
      -- The first member may be a waiter or a release record: then this is
      -- early, which costs a poke, never a missed grant.
      hs = redis.call('ZRANGE', K.e, 0, 0, 'WITHSCORES')
    end
    if #hs > 0 then
      local left = tonumber(hs[2]) - now
      if not first or left < first then
        first = left
      end
    end
    if not first then
      return __TTL_UNKNOWN__
    end
    return math.max(first, 0)
  end

  return {
    keys = q_keys, now_ms = now_ms, settle = q_settle, fits = q_fits, hold = q_hold,
    grant_exclusive = q_grant_exclusive, epoch_token = epoch_token, touch = q_touch,
    retry_after = q_retry_after, EXCL = MODE_EXCL,
  }
end
