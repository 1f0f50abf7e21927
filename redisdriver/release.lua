-- Release many locks, each if still held by its owner.
-- KEYS[2i-1] lock i, KEYS[2i] its last released lock
-- ARGV[i] owner id prefix of lock i
-- A release that leaves the name free publishes it, for plain Lock's
-- waiters. (On one server it used to go out as a plain command after the
-- script, in the same pipeline: after every release, so after a hand-off
-- too, where it wakes nobody.)
-- Returns a string of one digit per lock: RELEASED, ALREADY_RELEASED or
-- NOT_HELD (a string because Redis converts a table reply slowly).
--
-- RENAME frees the lock and keeps its value, with the lock's remaining TTL,
-- under the last-released key, in one call: the value carries the fencing
-- token, which next_token (lib.lua) must still see, and a retry of this
-- release whose first reply was lost finds our id there. (A hand-off to a
-- fair waiter keeps it under the release's own key instead: q_handoff.)
local res = {}
local n = #KEYS / 2
for i = 1, n do
  local lock, last, idp = KEYS[2 * i - 1], KEYS[2 * i], ARGV[i]
  -- The queue marker and the last release come with the lock in one MGET
  -- (queue_lib.lua, keep_release in lib.lua).
  local v, queued, prev = unpack(redis.call('MGET', lock, lock .. ':q', last))
  if owns(v, idp) then
    local now, t
    local free = true -- whether the release leaves the name free
    if queued then
      -- Fair waiters: hand the lock to the head in this same step.
      now, t = q_now_ms()
      free = not q_handoff(lock, now, t, v, idp, queued)
    end
    if free then
      keep_release(lock, last, prev)
      redis.call('RENAME', lock, last)
      if queued then
        -- Settling may grant the name to the queue after all (behind an
        -- expired head, or to readers or permits).
        local Q = queue_lib()
        free = not Q.settle(Q.keys(lock), now, t) and redis.call('EXISTS', lock) == 0
      end
    end
    if free then
      redis.call('PUBLISH', lock .. CHANNEL_SUFFIX, '') -- for plain Lock's waiters
    end
    res[i] = '__RELEASED__'
  elseif released_by(lock, prev, idp) then
    res[i] = '__ALREADY_RELEASED__'
  else
    res[i] = '__NOT_HELD__'
  end
end
if n == 1 then
  return res[1] -- the common case, without a table.concat
end
return table.concat(res)
