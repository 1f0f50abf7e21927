-- Prepended to every script (see script.go). Upper-case names in double
-- underscores are replaced, before a script is first loaded, by the Go
-- constants of the same meaning (luaConstants), so the two sides cannot
-- drift apart.
--
-- A lock value is "<id>" SEP "<token>" SEP "<since ms>" SEP "<owner JSON>".
-- IDs never contain SEP (the driver refuses them), so "<id>" SEP is an
-- unambiguous prefix and the token is the second field.
local SEP = '__SEP__'
local MAX_TOKEN = __MAX_TOKEN__
local CHANNEL_SUFFIX = '__CHANNEL_SUFFIX__'

-- owns reports whether lock value v (false for a missing key) belongs to
-- the owner whose id prefix ("<id>" SEP) is idp. Every ownership check of
-- every script is this one.
local function owns(v, idp)
  return v ~= false and string.sub(v, 1, #idp) == idp
end

-- owned reads key and reports whether it holds a lock value of the owner
-- with id prefix idp.
local function owned(key, idp)
  return owns(redis.call('GET', key), idp)
end

-- token_of returns the fencing token in lock value v, read from key (named
-- in the error), as its digits and as a number. Tokens are microsecond
-- counts, exact in a Lua number (a double) below MAX_TOKEN = 2^53, which
-- the clock reaches in the year 2255; anything else is not a value this
-- driver wrote, and acquiring past it could break the order of tokens, so
-- it is an error rather than a guess.
local function token_of(v, key)
  local a = string.find(v, SEP, 1, true)
  local b = a and string.find(v, SEP, a + 1, true)
  local s = b and string.sub(v, a + 1, b - 1)
  local n = s and string.match(s, '^%d+$') and #s <= 16 and tonumber(s)
  if not n or n >= MAX_TOKEN then
    error('dlock: malformed lock value in ' .. key)
  end
  return s, n
end
