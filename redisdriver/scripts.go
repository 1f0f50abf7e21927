package redisdriver

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed acquire.lua
	acquireLua string
	//go:embed release.lua
	releaseLua string
	//go:embed renew.lua
	renewLua string
	//go:embed force_release.lua
	forceReleaseLua string

	// Scripts run by EVALSHA, falling back to EVAL once per server that has
	// not cached them yet. Renewal always sends the body (see Renew).
	acquireScript      = redis.NewScript(acquireLua)
	releaseScript      = redis.NewScript(releaseLua)
	forceReleaseScript = redis.NewScript(forceReleaseLua)
)
