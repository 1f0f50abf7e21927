// Package redisdriver is the Redis backend of dlock, built on go-redis v9.
// It accepts any redis.UniversalClient: a plain client, a Sentinel failover
// client, or a Cluster client. Open (or ParseURL and New) makes the client
// from a URL.
//
// Data layout, for a lock named NAME and the default prefix "dlock:":
//
//	dlock:{NAME}            "<id>:<token>:<since ms>:<owner JSON>" while held, expiring with the lock
//	dlock:{NAME}:last       the value of the last lock released without a hand-off, for the TTL it had left
//	dlock:{NAME}:r:<id>:    an earlier release's value, for its retry, for the TTL it had left (none once its Client had the answer)
//	dlock:{NAME}:n          "1" while a plain Lock waits for NAME: about the holder's TTL left plus one TTL
//	dlock:{NAME}:released   pub/sub channel that wakes waiters (not a key), published only while :n or :q exists
//	dlock:{NAME}:unset      never written: in a Cluster every script call names it (see below)
//
// Queued leases (driver.Queuer: the fair lock's waiters, readers, permits)
// add, while a name has any (and until the next release or expiry of the
// lock its last waiter was granted; see queue_lib.lua):
//
//	dlock:{NAME}:w          list: waiter ids by arrival
//	dlock:{NAME}:e          zset: expiry (server ms) of readers, permit holders and release records; '#' at +inf
//	dlock:{NAME}:d          hash: their records and the waiters', and counters
//	dlock:{NAME}:q          the expiry of the queue keys; :e and :d exist while it does, :w while there are waiters
//	dlock:inbox:<inbox>     pub/sub channel of one Client's grants (not a key)
//
// Nothing else is stored, and nothing outlives the leases it describes by
// more than a quarter of their TTL: a name nobody has held for 1.25 TTL
// costs no memory. The {NAME}
// hash tag puts every key of a name in one Cluster slot, so every
// operation on a name is one script call on one node. Several locks are
// taken in one script call (acquire_all.lua, driver.MultiAcquirer) on one
// server, or in a Cluster when their slot is the same: names that start
// with the same hash tag, "{order:42}:items" and "{order:42}:payment".
//
// Fencing tokens are a hybrid logical clock: the larger of the server's
// TIME in microseconds and the token recorded under ":last" plus one (on
// a hand-off to a fair waiter, the releasing holder's token plus one; see
// next_token in lib.lua for why they keep increasing across restarts from older
// snapshots and failovers, and what that assumes of server clocks). The
// ":last" key also lets a retried release recognise that it succeeded.
//
// The Lua (the *.lua files) runs as scripts: EVALSHA, and EVAL where a
// server answers NOSCRIPT. A script is found by the SHA1 of its own code,
// so no other user of the server can make the Driver run other code.
//
// WithFunctions runs the same code as one function library instead (Redis
// 7 and later; cheaper for the server, docs/benchmarks.md): FCALL, and
// FUNCTION LOAD at the Driver's first call and where a server answers that
// it lacks the library (a restart without persistence, FUNCTION FLUSH; in
// Cluster each master is loaded when a call on one of its keys needs it).
// Functions are found by name, and anyone allowed FUNCTION LOAD can
// replace them: use it only where no untrusted user may (docs/security.md).
// Its name, dlock_<hash of the code>, differs between versions of the
// driver, so versions sharing a server never run each other's code; each
// leaves its library there until FUNCTION DELETE. A library found already
// loaded is used only if its code is the Driver's. A server that refuses
// functions (an unknown command before Redis 7, an ACL without FCALL or
// FUNCTION, a proxy), or holds other code under the name, gets scripts
// after one or two refused calls. A refusal that passes (memory full, a
// flush or a failover racing the load) sends only the call at hand as a
// script. The release and renewal functions carry the allow-oom flag, so
// they run when memory is full; the others are refused whole then, as
// every function is when writes are stopped (MISCONF, too few replicas, a
// read-only replica), and the driver sends such a call as a script, which
// answers as it always did (a held name is busy; taking a free one fails
// at its first write). Calls that find the library missing together load
// it once.
//
// # Cluster failover and slot migration
//
// go-redis routes each Cluster slot by the layout it last loaded, and
// loads it again on MOVED and ASK, and otherwise once a minute: the slots
// of a master that died stay routed to it for up to a minute after its
// replica took over, and every call on them fails. The Driver reloads the
// layout itself when a call fails in a way that says it may be stale (a
// refused, reset or closed connection, MOVED, CLUSTERDOWN, READONLY): one
// reload at a time, at most five a second, while such failures go on and
// for 20 s after the last unless a reload finds other masters first. A
// call that failed so is sent again, once, when the reload moved its
// slot, so a renewal or release retried within the TTL succeeds on the
// promoted replica (docs/reliability.md has what a failover costs).
//
// The reload is the go-redis client's own: once a dlock call has triggered
// it, every command on that client, a plain GET too, goes to the new
// master. A command of the application's own that fails on the dead
// master does not trigger it: go-redis reloads by itself only on MOVED or
// ASK (which a dead master never answers) and once a minute, so on a
// client that no dlock call is using at the time, such commands fail until
// then (for a client of its own, ClusterOptions.ClusterStateReloadInterval,
// or a ReloadState call after such a failure, shortens that).
//
// Releases and grants are announced on pub/sub, which drops what is
// published while a Client's connection is down (a dead master may have
// held it). Once the connection is back and every channel confirmed again,
// the Driver wakes every waiter it was subscribed for, plain and queued,
// and each asks the store, which has the answer.
//
// While a slot is being migrated, a node refuses a call whose keys are
// not all on it (TRYAGAIN), or sends it to the importing node (ASK), before
// the call runs. In a Cluster every script call names every key of its
// names that it may touch, and a key no script writes (declare.go), so
// that the node refuses it for as long as the slot's keys are split: no
// script runs half-way and then meets a key that has moved ("Script
// attempted to access a non local key"). go-redis gives up after about
// 50 ms; the Driver tries such a call again, 10 ms apart doubling to
// 200 ms, within the caller's ctx and for at most 5 s, so a Lock, TryLock,
// release or renewal is done once the migration ends. (Renewals of
// exclusive locks touch their lock keys alone, and run wherever those
// are.)
//
// # go-redis's own log lines
//
// go-redis logs some failures itself, through one logger for the whole
// process, which writes to stderr unless the application replaced it with
// redis.SetLogger. Against a server that refuses connections every failed
// dial prints a line, several for each failed call (go-redis retries),
// such as
//
//	redis: 2026/12/01 10:43:10 pool.go:770: redis: connection pool: failed to dial after 1 attempts: dial tcp 127.0.0.1:6379: connect: connection refused
//
// and a Sentinel or Cluster client also logs its failovers and topology
// changes. The dlock Client reports a failure once: as the call's error
// (dlock.ErrBackend) and to its Observer; a failure in the background (a
// renewal, a release) goes to its logger (dlock.WithLogger). go-redis v9 has no
// logger per client, so neither Open nor ParseURL can route these lines to
// the Client's logger, and this package does not touch the process-wide
// one: it belongs to every go-redis client of the program, not to dlock. An
// application that wants the lines elsewhere, or not at all, sets that
// logger itself, once, before making clients: redis.SetLogger takes any
// value with a method Printf(ctx context.Context, format string, v ...any)
// (one that writes nothing silences go-redis; the dlock command does that,
// since it reports a failure once, in its exit message).
package redisdriver
