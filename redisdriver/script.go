package redisdriver

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lib.lua
	libLua string
	//go:embed acquire.lua
	acquireLua string
	//go:embed release.lua
	releaseLua string
	//go:embed renew.lua
	renewLua string
	//go:embed force_release.lua
	forceReleaseLua string
	//go:embed queue_lib.lua
	queueLibLua string
	//go:embed enqueue.lua
	enqueueLua string
	//go:embed queue_renew.lua
	queueRenewLua string
	//go:embed queue_release.lua
	queueReleaseLua string
)

// Codes the scripts answer with; luaConstants hands them to the Lua side.
const (
	// release.lua, per lock
	replyNotHeld         = 0
	replyReleased        = 1
	replyAlreadyReleased = 2

	// renew.lua, per lock
	replyLost     = 0
	replyExtended = 1

	// ttlUnknown is what PTTL answers for a key without expiry; acquire.lua
	// answers it too when the caller did not ask for the holder's TTL.
	ttlUnknown = -1
	// ttlGone is what PTTL answers for a key that does not exist.
	ttlGone = -2

	// replyQueued is enqueue.lua's base of a queued request's reply:
	// replyQueued minus the retry ms (ttlGone at least).
	replyQueued = -10

	// maxToken is 2^53: the integers below it are exact in a Lua number.
	maxToken = 1 << 53
)

// luaConstants replaces the __NAME__ placeholders in the Lua sources.
var luaConstants = map[string]string{
	"SEP":              sep,
	"CHANNEL_SUFFIX":   channelSuffix,
	"WAITING_SUFFIX":   waitingSuffix,
	"MAX_TOKEN":        strconv.FormatInt(maxToken, 10),
	"TTL_UNKNOWN":      strconv.Itoa(ttlUnknown),
	"RELEASED":         strconv.Itoa(replyReleased),
	"ALREADY_RELEASED": strconv.Itoa(replyAlreadyReleased),
	"NOT_HELD":         strconv.Itoa(replyNotHeld),
	"EXTENDED":         strconv.Itoa(replyExtended),
	"LOST":             strconv.Itoa(replyLost),
	"INBOX_INFIX":      inboxInfix,
	"QUEUED":           strconv.Itoa(replyQueued),
}

var placeholder = regexp.MustCompile(`__([A-Z_]+)__`)

// The scripts. Each is lib.lua followed by its own body, so the ownership
// check and token parsing exist once; those that can change who holds a
// name also get queue_lib.lua, so granting to the queue exists once. The
// same bodies make up the function library (library.go).
var (
	acquireScript      = newScript("acquire", queueLibLua, acquireLua)
	releaseScript      = newScript("release", queueLibLua, releaseLua)
	renewScript        = newScript("renew", "", renewLua)
	forceReleaseScript = newScript("force_release", queueLibLua, forceReleaseLua)
	enqueueScript      = newScript("enqueue", queueLibLua, enqueueLua)
	queueRenewScript   = newScript("queue_renew", queueLibLua, queueRenewLua)
	queueReleaseScript = newScript("queue_release", queueLibLua, queueReleaseLua)
)

// script is a Lua script with its SHA1, run as EVALSHA, and EVAL with the
// body only when the server has not cached it (NOSCRIPT: first use,
// restart, failover, SCRIPT FLUSH): run does that for one call; runCalls
// for calls sent in one pipeline. Where the server has functions, the
// Driver runs the script's function in the library instead (library.go);
// this is the fallback.
type script struct {
	name string
	src  string // lib.lua, the prelude and the body
	sha  string
	body string // the script's own part, as the library wraps it
	fn   string // its function in the library
}

// newScript puts lib.lua and prelude (queue_lib.lua or nothing) before body
// and substitutes luaConstants. A placeholder without a constant is a
// programming error, caught when the package loads.
func newScript(name, prelude, body string) *script {
	src := substitute(name, withoutUnused(libLua+prelude, body)+body)
	sum := sha1.Sum([]byte(src))
	return &script{name: name, src: src, sha: hex.EncodeToString(sum[:]), body: substitute(name, body)}
}

// withoutUnused returns the Lua helpers of lib, less the top-level local
// functions body never calls, directly or through the helpers it calls. A
// script runs its whole chunk on every call, so each helper it defines
// costs the server a closure (and garbage to collect) per call, used or
// not (docs/benchmarks.md). A top-level function is a block from
// "local function NAME(" at the start of a line to the next line "end".
func withoutUnused(lib, body string) string {
	type block struct {
		name, text string
	}
	var blocks []block // the functions, and the text between them (no name)
	lines := strings.SplitAfter(lib, "\n")
	for i := 0; i < len(lines); i++ {
		rest, ok := strings.CutPrefix(lines[i], "local function ")
		if !ok {
			blocks = append(blocks, block{text: lines[i]})
			continue
		}
		name, _, _ := strings.Cut(rest, "(")
		start := i
		for i < len(lines)-1 && strings.TrimRight(lines[i], "\n") != "end" {
			i++
		}
		blocks = append(blocks, block{name: name, text: strings.Join(lines[start:i+1], "")})
	}
	used := map[string]bool{}
	var mark func(text string)
	mark = func(text string) {
		for _, b := range blocks {
			if b.name != "" && !used[b.name] && callsName(text, b.name) {
				used[b.name] = true
				mark(b.text)
			}
		}
	}
	mark(body)
	var out strings.Builder
	for _, b := range blocks {
		if b.name == "" || used[b.name] {
			out.WriteString(b.text)
		}
	}
	return out.String()
}

// callsName reports whether Lua text names the function name: name not
// preceded or followed by a character of an identifier.
func callsName(text, name string) bool {
	isIdent := func(c byte) bool {
		return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	for i := 0; ; {
		j := strings.Index(text[i:], name)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(name)
		if (j == 0 || !isIdent(text[j-1])) && (end == len(text) || !isIdent(text[end])) {
			return true
		}
		i = end
	}
}

// substitute replaces the placeholders of Lua source src (of the script
// name) with luaConstants.
func substitute(name, src string) string {
	return placeholder.ReplaceAllStringFunc(src, func(m string) string {
		v, ok := luaConstants[strings.Trim(m, "_")]
		if !ok {
			panic(fmt.Sprintf("redisdriver: %s.lua: no Go constant for %s", name, m))
		}
		return v
	})
}

// run runs s on c and returns its reply.
func (s *script) run(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	cmd := c.EvalSha(ctx, s.sha, keys, args...)
	if isNoScript(cmd.Err()) {
		cmd = c.Eval(ctx, s.src, keys, args...)
	}
	return cmd
}

// call is one script call to send in a pipeline.
type call struct {
	s     *script
	keys  []string
	args  []any
	reply *redis.Cmd // set by runCalls
}

// runCalls sends calls in pipeline p as EVALSHA; those answered NOSCRIPT go
// again, in a second pipeline, as EVAL. It returns the first error of a
// call's reply, or else of the pipeline. Replies are left in the calls.
func runCalls(ctx context.Context, p redis.Pipeliner, calls []*call) error {
	send := func(batch []*call, body bool) {
		for _, cl := range batch {
			if body {
				cl.reply = p.Eval(ctx, cl.s.src, cl.keys, cl.args...)
			} else {
				cl.reply = p.EvalSha(ctx, cl.s.sha, cl.keys, cl.args...)
			}
		}
	}
	send(calls, false)
	_, err := p.Exec(ctx)
	var again []*call
	for _, cl := range calls {
		if isNoScript(cl.reply.Err()) {
			again = append(again, cl)
		}
	}
	if len(again) > 0 {
		send(again, true)
		_, err = p.Exec(ctx)
	}
	for _, cl := range calls {
		if e := cl.reply.Err(); e != nil {
			return e
		}
	}
	return err
}

func isNoScript(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") }
