-- The fencing check, prepended to every script. KEYS[1] is the fence key
-- (the resource's high-water mark), ARGV[1] the caller's token.
--
-- Tokens are uint64 in decimal without leading zeros and are compared as
-- text (a shorter number is smaller): Lua numbers are doubles, which would
-- round tokens above 2^53 and let a stale one through.
local function below(a, b)
  if #a ~= #b then
    return #a < #b
  end
  return a < b
end

local tok = ARGV[1]
local top = redis.call('GET', KEYS[1])
if top and below(tok, top) then
  return {0, top}
end

-- Called after the write: raising the mark last means a write that fails
-- (a wrong type, say) raises nothing, since a failed script stops there.
local function advance()
  if not top or below(top, tok) then
    redis.call('SET', KEYS[1], tok)
  end
end
