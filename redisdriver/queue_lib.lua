-- The queue of a name: prepended (after lib.lua) to every script that can
-- change who holds a name, so that granting is written once.
--
-- Keys of name N, all with the hash tag {N}, so one Cluster slot:
--   P{N}      the exclusive holder: the plain lock's key and value
--   P{N}:last the last released exclusive lock (tokens, retries)
--   P{N}:w    LIST of waiter ids in arrival order (the store's own order)
--   P{N}:e    ZSET of the expiry in server ms of every shared and permit
--             holder and of release records ("r:<id>"), and '#' at +inf
--   P{N}:d    HASH of records by id, and counters:
--             waiter  "W<mode>" SEP "<expiry ms>" SEP "<limit>" SEP "<inbox>" SEP "<since>" SEP "<owner>"
--             holder  "H<mode>" SEP "<token>" SEP "<since>" SEP "<owner>"
--             release record ""
--             '#h' the number of holders, '#m' their mode
--             '#l' the permit limit of the name: the limit of the permit
--                  request last granted or queued; a permit request with
--                  another is refused while '#h' counts permit holders or
--                  '#pw' is not 0 (q_limit), and sets it otherwise
--             '#pw' the number of permit waiters' records ("W3...") in :d
--   P{N}:q    the keys' expiry in server ms (see q_extend); it exists
--             while the others do: Acquire and Release read it with the
--             lock key in one MGET, so the plain lock pays no extra call
--             for the queue, and the queue's scripts learn the expiry
-- A waiter's expiry is in its record, not in :e: the hand-off reads the
-- record anyway, and a waiter that joins or is granted then writes one
-- structure less. A waiter whose place expired is out of the queue at once
-- (never granted, and q_live for its own requests); its entry goes when it
-- reaches the head or the tail (q_settle) or when its Client comes back
-- (q_live). Every waiter record ("W...", live or expired) has exactly one
-- entry in :w, so no id is ever queued twice: a waiter that leaves out of
-- turn deep in a long queue, too far from both ends for q_unlist, leaves
-- its record there, expired (expiry 0 if it gave its place up), until its
-- entry reaches an end; a waiter that comes back to such a record has its
-- old entry again (enqueue.lua). An entry without a record (not written by
-- these scripts) is swept like an expired place.
-- The queue keys are derived from the lock key inside the scripts: they
-- share its hash tag, hence its slot, which is all Cluster requires of the
-- keys a script touches. They expire after every lease they hold (see
-- q_extend) and are deleted by the first script that finds no lease left.
--
-- No script call walks a whole queue: the server runs one script at a
-- time, so a call that visited every entry of a long queue (a crashed
-- fleet of waiters, or a flood of them) would stall every other client of
-- the server. Settling visits at most SETTLE_BUDGET entries per call and
-- leaves the rest to the next call (see q_settle for why the rest is
-- still settled soon), and a waiter leaving out of turn is looked for at
-- most UNLIST_SCAN entries from either end of :w (q_unlist).
--
-- Every redis.call costs Redis up to a microsecond besides the command, and
-- so does much of what a script does besides: each function and table it
-- makes (run as a script, not as the function library, it makes its
-- functions anew on every call, and a function costs the more the more
-- outer locals it uses) and each string it builds. So the two steps of a
-- contended fair lock, a waiter joining a held name (q_join) and a release
-- handing the name to a live exclusive head (q_handoff), are short, take
-- the lock key's name and build only the key names they use; they and
-- what they need are in queue_core(), and the rest of the queue in
-- queue_lib(): a script makes either only when it calls it, so a call on a
-- name without a queue pays for neither.

local MODE_EXCL, MODE_SHARED, MODE_PERMIT = '1', '2', '3'


-- q_now_ms is the server clock in whole milliseconds, rounded down, so an
-- expiry computed from it is at most 1 ms early (ExpiryMargin covers it),
-- and the TIME reply itself.
local function q_now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), t
end

-- queue_core returns the queue's functions that the contended common
-- cases need (a waiter joining a held name, a release handing it to the
-- head) and queue_lib's functions build on. Scripts run their whole chunk
-- on every call, so each function defined at the top costs every call a
-- closure, queued name or not (docs/benchmarks.md): defined in here, they
-- cost only the calls that use them. They are made once per chunk run
-- (core keeps them), so a script call that needs them twice (a release
-- that tries the hand-off, then settles) makes them once, and the function
-- library, whose chunk runs once at load, once for good.
local core
local function queue_core()
  if core then
    return core
  end
  -- q_extend makes the queue keys of lock outlive a lease that expires at
  -- exp (ms) and returns their expiry. x is their current expiry, the value
  -- of :q (false when the queue does not exist), or nil to read it.
  -- Extending them to exactly the latest lease's expiry would cost four calls
  -- on every join and renewal; they are extended by a quarter of the lease's
  -- TTL beyond it instead, so that most calls find them already long enough.
  -- So the keys never vanish under a live lease, and outlive the last by at
  -- most 1.25 TTL. A new queue's :e and :d get a member each that stays until
  -- the queue is deleted ('#' and '#h'), so that Redis never deletes them
  -- when they empty and a later write re-creates them without an expiry. :w
  -- does empty; q_join and q_handoff give it its expiry when they re-create
  -- it. Callers extend before they write.
  local function q_extend(lock, exp, ttl, x)
    if x == nil then
      x = redis.call('GET', lock .. ':q')
    end
    local cur = tonumber(x or '0')
    if exp <= cur then
      return cur
    end
    local e, d = lock .. ':e', lock .. ':d'
    if cur == 0 then
      redis.call('ZADD', e, '+inf', '#')
      redis.call('HSETNX', d, '#h', 0)
    end
    x = exp + math.floor(ttl / 4)
    redis.call('PEXPIREAT', lock .. ':w', x)
    redis.call('PEXPIREAT', e, x)
    redis.call('PEXPIREAT', d, x)
    redis.call('SET', lock .. ':q', x, 'PXAT', x)
    return x
  end

  -- q_join queues waiter id, whose place expires at exp, behind the others,
  -- and returns true; x is as for q_extend. rec is the waiter's record. If
  -- id has a record already (a retry, or a waiter that was granted), it
  -- changes nothing and returns false. max is the most waiters the request
  -- accepts ahead of it and itself, as digits, or '' for no cap: with more
  -- (expired places not swept yet count too) it undoes the join and returns
  -- nil. RPUSH answers the length, so the cap costs no call of its own.
  local function q_join(lock, id, rec, exp, ttl, x, max)
    x = q_extend(lock, exp, ttl, x)
    local d = lock .. ':d'
    if redis.call('HSETNX', d, id, rec) == 0 then
      return false
    end
    local w = lock .. ':w'
    local n = redis.call('RPUSH', w, id)
    if n == 1 then
      redis.call('PEXPIREAT', w, x) -- it was empty, so it is new
    elseif max ~= '' and n > tonumber(max) then
      redis.call('RPOP', w)
      redis.call('HDEL', d, id)
      return nil
    end
    return true
  end

  -- q_waiter splits a waiter's record into its mode, expiry (a number),
  -- limit, inbox and the rest of a lock value (SEP "<since>" SEP "<owner>").
  local function q_waiter(rec)
    local a = string.find(rec, SEP, 1, true)
    local b = string.find(rec, SEP, a + 1, true)
    local c = string.find(rec, SEP, b + 1, true)
    local e = string.find(rec, SEP, c + 1, true)
    return string.sub(rec, 2, a - 1), tonumber(string.sub(rec, a + 1, b - 1)), string.sub(rec, b + 1, c - 1),
      string.sub(rec, c + 1, e - 1), string.sub(rec, e)
  end

  -- q_announce publishes a grant of lock's name on the waiter's inbox
  -- channel: "<id>" SEP "<token>" SEP "<name>".
  local function q_announce(lock, inbox, id, tok)
    local open = string.find(lock, '{', 1, true)
    redis.call('PUBLISH', string.sub(lock, 1, open - 1) .. '__INBOX_INFIX__' .. inbox,
      id .. SEP .. tok .. SEP .. string.sub(lock, open + 1, -2))
  end

  -- q_grant makes waiter id, just taken off the queue, the exclusive holder
  -- of lock until exp, the expiry of its place, tells it, and returns its
  -- token. inbox and owner (SEP "<owner>") are from its record, t is TIME's
  -- reply; last is the value the token must exceed (see next_token in
  -- lib.lua), read from key lastkey. The grant keeps the place's expiry:
  -- the waiter computed its validity deadline from the send time of the
  -- request (enqueue or renewal) that set that expiry, so the lease cannot
  -- expire here before the deadline the waiter then believes in. Its since
  -- is now: a lease handed off from the queue was acquired when it was
  -- granted, not when its waiter joined (by the store's clock, the only one
  -- a script has).
  local function q_grant(lock, id, inbox, owner, exp, t, last, lastkey)
    local tok, us = next_token(t, last, lastkey)
    -- now in ms, from TIME's digits (a number Lua would format).
    redis.call('SET', lock, id .. SEP .. tok .. SEP .. t[1] .. string.sub(us, 1, 3) .. owner, 'PXAT', exp)
    redis.call('HDEL', lock .. ':d', id)
    q_announce(lock, inbox, id, tok)
    return tok
  end

  -- q_handoff hands lock, whose exclusive holder is releasing it (value v,
  -- id prefix idp; still on the key), to the head of its queue, when that
  -- head is a live exclusive waiter: the fair lock's hand-off, in a few
  -- calls. With an exclusive holder there is no shared or permit holder, so
  -- the head fits. x is the value of :q. It returns false, having changed
  -- nothing, in every other case (an empty queue, an expired head, another
  -- mode), which q_settle decides after a plain release.
  local function q_handoff(lock, now, t, v, idp, x)
    local w = lock .. ':w'
    local head = redis.call('LPOP', w)
    if not head then
      return false
    end
    local rec = redis.call('HGET', lock .. ':d', head)
    -- q_waiter's fields, only those needed, and the expiry as its digits
    -- too, which SET takes as they are (a number it would format).
    local a, b, c, e, f, exp
    if rec and string.byte(rec, 2) == 49 then -- MODE_EXCL
      a = string.find(rec, SEP, 1, true)
      b = string.find(rec, SEP, a + 1, true)
      exp = string.sub(rec, a + 1, b - 1)
    end
    if not exp or tonumber(exp) <= now then
      if redis.call('LPUSH', w, head) == 1 then
        redis.call('PEXPIREAT', w, x)
      end
      return false
    end
    -- The releaser's value goes to its release record (released_by finds a
    -- retry there) rather than to :last: the token that next_token must
    -- exceed from now on is the new holder's, on the lock key, and it
    -- exceeds v's. So one RENAME, instead of two (keep_release's and the
    -- lock's).
    c = string.find(rec, SEP, b + 1, true)
    e = string.find(rec, SEP, c + 1, true)
    f = string.find(rec, SEP, e + 1, true)
    redis.call('RENAME', lock, release_key(lock, idp))
    q_grant(lock, head, string.sub(rec, c + 1, e - 1), string.sub(rec, f), exp, t, v, lock)
    return true
  end

  core = { extend = q_extend, join = q_join, waiter = q_waiter, announce = q_announce, grant = q_grant, handoff = q_handoff }
  return core
end

-- queue_lib returns the rest of the queue. Its functions take K, the key
-- names of a name (keys). One call of a script makes one queue_lib, whose
-- settling budget its names share (q_settle).
local function queue_lib()
  local C = queue_core()
  local q_extend, q_waiter, q_grant, q_announce = C.extend, C.waiter, C.grant, C.announce

  -- (The queue's constants are locals of queue_lib rather than of the
  -- chunk: each outer local a function uses is an upvalue to capture when
  -- the chunk defines it, on every call of every script.)
  -- SETTLE_BUDGET is how many entries one script call may visit while it
  -- settles names (q_settle): each entry of :w or :e it reads counts one,
  -- each grant GRANT_COST (a grant makes about eight calls). Measured on
  -- Redis 7.0, a call that spends it all on expired places takes about
  -- 1.2 ms (docs/fair-lock.md, "Long queues"): the pause an unrelated client
  -- can see, where walking 200,000 of them took 1.2 s. Every name a
  -- call settles may spend SETTLE_FLOOR even when the call's budget is gone,
  -- so that a name that needs little (a release granting its next waiter) is
  -- served in the same batch as a name that needs much.
  local SETTLE_BUDGET, SETTLE_FLOOR, GRANT_COST = 500, 16, 8
  -- UNLIST_SCAN is how far from either end of :w a waiter leaving out of
  -- turn is looked for (q_unlist); one deeper stays until it reaches an end.
  local UNLIST_SCAN = 1000
  -- SWEEP_BATCH caps the entries of :w read in one LRANGE while settling.
  local SWEEP_BATCH = 256

  local function q_keys(lock)
    return { lock = lock, last = lock .. ':last', w = lock .. ':w', e = lock .. ':e', d = lock .. ':d', q = lock .. ':q' }
  end

  -- What is left of this call's SETTLE_BUDGET.
  local budget = SETTLE_BUDGET

  -- q_expired reports whether waiter record rec's place expired before now.
  local function q_expired(rec, now)
    local a = string.find(rec, SEP, 1, true)
    local b = string.find(rec, SEP, a + 1, true)
    return tonumber(string.sub(rec, a + 1, b - 1)) <= now
  end

  -- q_moved is waiter record rec with its expiry set to exp.
  local function q_moved(rec, exp)
    local a = string.find(rec, SEP, 1, true)
    local b = string.find(rec, SEP, a + 1, true)
    return string.sub(rec, 1, a) .. exp .. string.sub(rec, b)
  end

  -- q_unlist removes id's entry from :w if it is within UNLIST_SCAN
  -- entries of either end, and reports whether it did: LREM alone would
  -- scan the whole list for an entry near the tail of a long queue. Each
  -- LPOS compares at most UNLIST_SCAN entries, and LREM stops at the
  -- entry LPOS found, from the same end.
  local function q_unlist(K, id)
    if redis.call('LPOS', K.w, id, 'MAXLEN', UNLIST_SCAN) then
      redis.call('LREM', K.w, 1, id)
      return true
    end
    if redis.call('LPOS', K.w, id, 'RANK', -1, 'MAXLEN', UNLIST_SCAN) then
      redis.call('LREM', K.w, -1, id)
      return true
    end
    return false
  end

  -- q_unqueue removes waiter id, whose record is rec, from the queue: its
  -- entry and its record. An entry too deep in a long queue for q_unlist
  -- stays, and so does its record, as expired (a live place's is
  -- rewritten with expiry 0): out of the queue as well, swept when it
  -- reaches an end. It reports whether the record stays.
  local function q_unqueue(K, id, rec, now)
    if not q_unlist(K, id) then
      if not q_expired(rec, now) then
        redis.call('HSET', K.d, id, q_moved(rec, 0))
      end
      return true
    end
    redis.call('HDEL', K.d, id)
    if string.byte(rec, 2) == 51 then -- MODE_PERMIT
      redis.call('HINCRBY', K.d, '#pw', -1)
    end
    return false
  end

  -- q_live returns rec, the record of id (false if none), unless it is
  -- the record of a waiter whose place expired before now: such a waiter
  -- is out of the queue wherever it stands (q_settle drops it only when it
  -- reaches an end), so its place goes (q_unqueue), and q_live returns
  -- false, and true second when its record stayed (a place deep in a long
  -- queue: enqueue.lua then gives it back to its waiter where it is, so
  -- that no id is ever queued twice). Every script that reads a record
  -- outside q_settle asks q_live.
  local function q_live(K, id, rec, now)
    if rec and string.byte(rec, 1) == 87 and q_expired(rec, now) then -- 87: 'W'
      return false, q_unqueue(K, id, rec, now)
    end
    return rec, false
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

  -- q_limit returns the name's permit limit ('#l') when a permit request
  -- with limit (digits) must be refused for it: while permits are held or
  -- permit waiters wait, the name keeps the limit they came with, so that
  -- no caller admits more holders than the others allow. Otherwise false:
  -- the request's limit becomes the name's when it is granted or queued.
  local function q_limit(K, limit)
    local f = redis.call('HMGET', K.d, '#l', '#h', '#m', '#pw')
    if f[1] and f[1] ~= limit and
        ((f[3] == MODE_PERMIT and tonumber(f[2] or '0') > 0) or tonumber(f[4] or '0') > 0) then
      return f[1]
    end
    return false
  end

  -- q_hold makes id a shared or permit holder until exp (ttl from now).
  -- x is as for q_extend; limit, for a permit, becomes the name's.
  local function q_hold(K, id, mode, tok, rest, exp, ttl, x, limit)
    q_extend(K.lock, exp, ttl, x)
    if mode == MODE_PERMIT then
      redis.call('HSET', K.d, id, 'H' .. mode .. SEP .. tok .. rest, '#m', mode, '#l', limit)
    else
      redis.call('HSET', K.d, id, 'H' .. mode .. SEP .. tok .. rest, '#m', mode)
    end
    redis.call('HINCRBY', K.d, '#h', 1)
    redis.call('ZADD', K.e, exp, id)
  end

  -- q_prune drops up to left expired holders and release records, oldest
  -- first, and returns what is left of left.
  local function q_prune(K, now, left)
    local gone = redis.call('ZRANGEBYSCORE', K.e, '-inf', now, 'LIMIT', 0, left)
    local n = #gone
    if n == 0 then
      return left
    end
    local recs = redis.call('HMGET', K.d, unpack(gone))
    local held = 0
    for i = 1, n do
      if recs[i] and string.byte(recs[i], 1) == 72 then -- 'H'
        held = held + 1
      end
    end
    if held > 0 then
      redis.call('HINCRBY', K.d, '#h', -held)
    end
    redis.call('HDEL', K.d, unpack(gone))
    redis.call('ZREM', K.e, unpack(gone))
    if n == left then
      K.more = true
    end
    return left - n
  end

  -- q_drop removes the run of entries at one end of :w (the head if
  -- head, else the tail) that are not live waiters, given ids, the entries
  -- at that end in list order, and recs, their records, and returns how
  -- many it removed. A waiter's record goes with its entry.
  local function q_drop(K, ids, recs, now, head)
    local n, first, last, step = 0, 1, #ids, 1
    if not head then
      first, last, step = #ids, 1, -1
    end
    local drop, permits = {}, 0
    for i = first, last, step do
      local rec = recs[i]
      local w = rec and string.byte(rec, 1) == 87 -- 'W'
      -- A live waiter's record stops the run. q_expired, cheaper (parsing
      -- is most of a dead entry's cost): a waiter record's mode is one
      -- digit, so its expiry starts at the fourth byte.
      if w and tonumber(string.sub(rec, 4, string.find(rec, SEP, 4, true) - 1)) > now then
        break
      end
      n = n + 1
      if w then
        drop[#drop + 1] = ids[i]
        if string.byte(rec, 2) == 51 then -- MODE_PERMIT
          permits = permits + 1
        end
      end
    end
    if n == 0 then
      return 0
    end
    -- (LPOP and RPOP with a count rather than LTRIM: the commands the
    -- scripts need stay few, for the ACL of docs/security.md.)
    if head then
      redis.call('LPOP', K.w, n)
    else
      redis.call('RPOP', K.w, n)
    end
    if #drop > 0 then
      redis.call('HDEL', K.d, unpack(drop))
    end
    if permits > 0 then
      redis.call('HINCRBY', K.d, '#pw', -permits)
    end
    return n
  end

  -- q_admit makes waiter head (record rec, just taken off the queue) a
  -- holder: exclusive with q_grant, else shared or a permit.
  local function q_admit(K, head, rec, now, t)
    local mode, exp, _, inbox, rest = q_waiter(rec)
    if mode == MODE_EXCL then
      q_grant(K.lock, head, inbox, string.sub(rest, (string.find(rest, SEP, 2, true))), exp, t,
        redis.call('GET', K.last), K.last)
      return
    end
    -- since is now, as in q_grant.
    local tok = epoch_token(K.last, t)
    local owner = string.find(rest, SEP, 2, true)
    redis.call('HSET', K.d, head, 'H' .. mode .. SEP .. tok .. SEP .. now .. string.sub(rest, owner), '#m', mode)
    redis.call('HINCRBY', K.d, '#h', 1)
    if mode == MODE_PERMIT then
      redis.call('HINCRBY', K.d, '#pw', -1)
    end
    redis.call('ZADD', K.e, exp, head)
    q_announce(K.lock, inbox, head, tok)
  end

  -- q_head drops the entries at the head that are not live waiters and
  -- grants, in arrival order, to the live ones that now fit; the first
  -- that does not fit stops the grants behind it. It reads :w in batches,
  -- one entry at first (the common case: a live head) and twice as many
  -- after each batch of dead ones, and returns what is left of left.
  local function q_head(K, now, t, left)
    local size = 1
    while left > 0 do
      local ids = redis.call('LRANGE', K.w, 0, size - 1)
      if #ids == 0 then
        return left
      end
      local recs = redis.call('HMGET', K.d, unpack(ids))
      left = left - #ids
      local n = q_drop(K, ids, recs, now, true)
      if n < #ids then
        -- ids[n + 1] is a live waiter, now the head.
        local mode, _, limit = q_waiter(recs[n + 1])
        if not q_fits(K, mode, limit) then
          return math.max(left, 0)
        end
        redis.call('LPOP', K.w)
        q_admit(K, ids[n + 1], recs[n + 1], now, t)
        left, size = left - GRANT_COST, 1
      elseif #ids < size then
        return math.max(left, 0) -- the queue is empty now
      else
        size = math.min(size * 2, SWEEP_BATCH)
      end
    end
    K.more = true
    return 0
  end

  -- q_tail drops the entries at the tail that are not live waiters, as
  -- q_head does at the head, and returns what is left of left: a waiter
  -- that died soon after joining (a process that crashes and comes back,
  -- over and over, behind a long hold) is not kept until it would reach
  -- the head. One that died between live waiters is, unless its own
  -- Client comes back (q_live); it is never granted.
  local function q_tail(K, now, left)
    local size = 1
    while left > 0 do
      local ids = redis.call('LRANGE', K.w, -size, -1)
      if #ids == 0 then
        return left
      end
      local recs = redis.call('HMGET', K.d, unpack(ids))
      left = left - #ids
      local n = q_drop(K, ids, recs, now, false)
      if n < #ids or #ids < size then
        return math.max(left, 0)
      end
      size = math.min(size * 2, SWEEP_BATCH)
    end
    K.more = true
    return 0
  end

  -- q_settle drops expired queued leases and grants, in arrival order, to
  -- the waiters at the head that now fit (q_head). It returns whether the
  -- name has queued leases left. Every script that may grant calls it
  -- first (or q_handoff, which decides only what needs no settling):
  -- Redis has no expiry hook, so an expiry grants at the next call that
  -- touches the name (a waiter's renewal, or its poke at RetryAfter).
  --
  -- It visits at most what is left of the call's budget, or SETTLE_FLOOR,
  -- and sets K.more when it stopped for that rather than at a live head
  -- that does not fit and a live tail: the rest waits for the next call.
  -- The next call does come: while K.more, every queued or refused
  -- request is told to try again at once (q_retry_after answers 0), so a
  -- live waiter behind D entries that are not live waiters, after the
  -- holder left, is granted by its own requests: its renewals (every TTL/3)
  -- and its poke (at most one holder TTL after its last Enqueue), and then
  -- pokes one after another, each visiting SETTLE_BUDGET entries more:
  -- at most ceil(D / SETTLE_BUDGET) + 1 calls that touch the name.
  -- Meanwhile the name stays busy (it answers true), so no plain Acquire
  -- takes it ahead of a waiter that has yet to be reached.
  local function q_settle(K, now, t)
    K.more = false
    if redis.call('EXISTS', K.d) == 0 then
      return false
    end
    local start = math.max(budget, SETTLE_FLOOR)
    local left = q_prune(K, now, start)
    if left > 0 then
      left = q_head(K, now, t, left)
    end
    if left > 0 then
      left = q_tail(K, now, left)
    else
      K.more = true
    end
    budget = math.max(budget - (start - left), 0)
    -- '#' is always in :e; with nothing else there, no holder is left.
    if redis.call('ZCARD', K.e) <= 1 and redis.call('EXISTS', K.w) == 0 then
      redis.call('DEL', K.w, K.e, K.d, K.q)
      return false
    end
    -- Pruning and granting never make a lease expire later, so the keys'
    -- expiry still covers every lease left.
    -- Release records alone ("r:<id>") do not make the name busy.
    return tonumber(redis.call('HGET', K.d, '#h') or '0') > 0 or redis.call('EXISTS', K.w) == 1
  end

  -- q_retry_after is the time until the first holder expires, for a queued
  -- or refused request; TTL_UNKNOWN when only waiters stand ahead (their
  -- grants are announced); 0 when settling the name stopped for the
  -- budget (q_settle): the request's next call goes on with it.
  local function q_retry_after(K, now)
    if K.more then
      return 0
    end
    local first = false
    local pt = redis.call('PTTL', K.lock)
    if pt >= 0 then
      first = pt
    end
    local hs = {}
    if tonumber(redis.call('HGET', K.d, '#h') or '0') > 0 then
      -- The first member may be a release record: then this is early,
      -- which costs a poke, never a missed grant. (A holder's expiry is
      -- finite, so it comes before '#'.)
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
    keys = q_keys, live = q_live, unqueue = q_unqueue, moved = q_moved, settle = q_settle, fits = q_fits,
    limit = q_limit, hold = q_hold, epoch_token = epoch_token, retry_after = q_retry_after, core = C,
  }
end
