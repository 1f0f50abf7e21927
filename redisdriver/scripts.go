package redisdriver

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed acquire.lua
	acquireLua string
	//go:embed seed.lua
	seedLua string
	//go:embed seed_counter.lua
	seedCounterLua string
	//go:embed release.lua
	releaseLua string
	//go:embed renew.lua
	renewLua string
	//go:embed force_release.lua
	forceReleaseLua string

	// Scripts run by EVALSHA, falling back to EVAL once per server that has
	// not cached them yet. Renewal always sends the body (see Renew).
	acquireScript      = redis.NewScript(seedCounterLua + acquireLua)
	seedScript         = redis.NewScript(seedCounterLua + seedLua)
	releaseScript      = redis.NewScript(releaseLua)
	forceReleaseScript = redis.NewScript(forceReleaseLua)
)

// unseeded mirrors UNSEEDED in seed_counter.lua: a fencing counter below it
// has not been seeded from the server clock.
const unseeded = 1 << 40
