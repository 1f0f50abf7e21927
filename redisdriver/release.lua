-- Release many locks, each if still held by its owner.
-- KEYS[2i-1] lock i, KEYS[2i] its last released lock
-- ARGV[2i-1] owner id prefix of lock i, ARGV[2i] the id prefix of an
-- earlier release of it that needs no record, or '' (Settled in
-- driver.ReleaseRequest)
-- A release that leaves the name free publishes it, for plain Lock's
-- waiters, when one has marked the name (note_waiting in lib.lua) or the
-- name has a queue (whose settling may have left it free for them); a
-- release nobody waits for publishes nothing.
-- Returns a string of one digit per lock: RELEASED, ALREADY_RELEASED or
-- NOT_HELD (a string because Redis converts a table reply slowly).
--
-- RENAME frees the lock and keeps its value, with the lock's remaining TTL,
-- under the last-released key, in one call: the value carries the fencing
-- token, which next_token (lib.lua) must still see, and a retry of this
-- release whose first reply was lost finds our id there. (A hand-off to a
-- fair waiter keeps it under the release's own key instead: q_handoff.)
local res = {}
-- (Counted from ARGV: in a Cluster, KEYS goes on with the other keys the
-- call may touch, which the driver names so that the node can check them.)
local n = #ARGV / 2
for i = 1, n do
  local lock, last, idp, settled = KEYS[2 * i - 1], KEYS[2 * i], ARGV[2 * i - 1], ARGV[2 * i]
  -- The queue marker, the last release and the waiting mark come with the
  -- lock in one MGET (queue_lib.lua, keep_release and note_waiting in
  -- lib.lua).
  local v, queued, prev, waited = unpack(redis.call('MGET', lock, lock .. ':q', last, lock .. WAITING_SUFFIX))
  if owns(v, idp) then
    local now, t
    local free = true -- whether the release leaves the name free
    if queued then
      -- Fair waiters: hand the lock to the head in this same step.
      now, t = q_now_ms()
      free = not queue_core().handoff(lock, now, t, v, idp, queued)
    end
    if free then
      -- The last release's record is kept for its retry unless its owner
      -- has had the answer: then no retry can come.
      if settled == '' or not owns(prev, settled) then
        keep_release(lock, last, prev)
      end
      redis.call('RENAME', lock, last)
      if queued then
        -- Settling may grant the name to the queue after all (behind an
        -- expired head, or to readers or permits).
        local Q = queue_lib()
        free = not Q.settle(Q.keys(lock), now, t) and redis.call('EXISTS', lock) == 0
      end
    end
    if free and (waited or queued) then
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
