// Package etcddriver is the etcd backend of dlock: the same Client, Lease,
// lost-lock signal and fencing tokens as on Redis, on an etcd cluster
// (go.etcd.io/etcd/client/v3). It is a module of its own, so that users of
// the Redis driver never download gRPC and the etcd client.
//
// # Connecting
//
// Open and OpenContext take an endpoint spec (see ParseEndpoints): a
// host:port list, etcd://user:password@host:port,... for etcd's
// authentication, and a query string for TLS (ca_file, cert_file and
// key_file for a cluster that wants client certificates,
// insecure_skip_verify) and for password_file, which keeps the password
// off command lines. With a user the etcd client authenticates before Open
// returns, so that wait is bounded (DefaultRequestTimeout, and
// OpenContext's ctx). Errors never show the password; RedactEndpoints
// masks it for an application's own messages. When no endpoint accepts
// connections, a call fails at once with an error naming the endpoints and
// the cause, as on Redis, instead of waiting for the request timeout; and
// Driver.Close gives up revoking its leases after a second: what it could
// not revoke expires with its lease.
//
// # Keys and exclusion
//
// A lock named N is the etcd key <prefix>k/N. An acquisition is one Txn:
// if the key does not exist (create revision 0), put it with the
// acquisition's value and the Client's lease for that TTL; else read it.
// The value starts with the acquisition's own 128-bit owner id, so two
// acquisitions never share a key's ownership, whether they come from one
// dlock Client or from many (etcd's concurrency.Mutex names its key after
// the session's lease, so two Mutexes on one Session both "hold" it).
//
// # Fencing tokens
//
// The token is the etcd revision at which the acquisition created the key
// (its create revision). etcd's revision is one counter for the whole
// keyspace, advanced by every committed write through Raft and persisted
// before a write is acknowledged, so the token is strictly greater than
// every token issued before for any key — after release, expiry, forced
// release, member restarts (kill -9 included) and leader changes. It goes
// back only if the cluster's data is thrown away or restored from an
// older backup without bumping the revision (etcdutl snapshot restore
// --bump-revision); see docs/etcd.md.
//
// # Release
//
// A release deletes the key only if its value still starts with the
// releasing acquisition's id, atomically in a Txn, so a retried release
// never deletes a newer lock (etcd issue 22082 is the same-session version
// of that bug). It also writes a small marker, kept about ten seconds on a
// lease of its own, by which a retry after a lost reply is recognised and
// answered AlreadyReleased; a release whose marker lease cannot be granted
// fails rather than go without one. The marker lease is granted once per
// five seconds of releases. The same Txn reads the name's queue, from
// which the hand-off to waiters starts. A batch of releases is one Txn of
// nested Txns: one Raft entry, each lock decided on its own.
//
// # Leases and renewal
//
// etcd counts lease TTLs in whole seconds, so Capabilities reports
// TTLUnit = 1s, and MinTTL = 2s, the default server's minimum lease TTL
// (a shorter grant is silently raised to it). A Driver keeps one etcd lease
// per distinct TTL and attaches every lock of that TTL to it: a hundred
// thousand held locks are a handful of leases. Renew reads the batch's keys
// in one read-only Txn (a lock whose key is gone, or belongs to another id,
// is not held), then sends one LeaseKeepAliveOnce per distinct lease. The
// engine counts the validity deadline from before the renewal was sent,
// and the keep-alive is sent after that, so etcd cannot expire the lock
// earlier than the deadline assumes.
//
// An acquisition on an existing lease is one Txn. The lock lasts its TTL
// from the lease's last keep-alive, so an acquisition sends a
// LeaseKeepAliveOnce of the lease, together with its Txn, unless one sent
// at most half a second before it started succeeded (or is under way, and
// then it waits for that one): a steady stream of acquisitions sends one
// keep-alive per half second between them. Capabilities reports that half
// second as ExpiryMargin, which the engine takes off every validity
// deadline, so no holder counts on what the lease may not have; the
// lease's TTL stays the lock's, so a crashed holder's lock is still free a
// TTL after its last keep-alive. The Txn fails with "lease not found" if
// the lease expired, and the driver then grants a new one. When no lease
// of that TTL exists yet, the first acquisition costs a LeaseGrant more.
// An uncontended Lock and Unlock is two Txns.
//
// # Several locks at once
//
// AcquireAll (driver.MultiAcquirer, dlock's LockAll) takes up to MaxAtomic
// locks all or none in one Txn: if every key is absent and no name has a
// waiter or queued holder, put them all; the tokens are that Txn's
// revision.
//
// # Queues
//
// The driver implements driver.Queuer, so dlock's fair lock (WithFIFO),
// RWMutex and Semaphore run on etcd. A waiter is a key under the name's
// queue range, on its Client's lease, ordered by create revision; readers
// and permit holders are keys beside them; a fair lock's or writer's grant
// is the plain lock key itself, so plain and queued acquisitions exclude
// each other and share one token sequence, and Acquire refuses a name
// whose queue range is not empty. Lock queues by default
// (Capabilities.QueueByDefault): an Enqueue's first Txn grants a free name
// (no lock key, an empty queue range) at once, so an uncontended fair
// Lock, RLock or permit costs what a plain Lock does, and on a busy name
// queues the waiter at once. A release hands off in one more Txn. Other
// requests that touch a queued name read it and send one Txn, conditional
// on what they read, that grants the queue heads that fit (each on its
// waiter's lease) and announces each grant on the waiter's inbox key,
// which WatchGrants watches. A conflict is read again. See docs/etcd.md.
//
// # Waiting
//
// Watch follows each key with an etcd watch (all of a Client's watches
// share one gRPC stream), filtered to deletes: a release, a forced release
// and an expiry all delete the key. Watcher.Add returns once etcd has
// confirmed the watch. The watches require a leader: a member cut off from
// the quorum ends them, and the driver wakes the key's waiters (who try
// again) and watches anew from the last revision it saw, so that no release
// in between is missed.
//
// A queued waiter is told of its grant on its inbox. For a holder that
// dies without releasing, the Driver of the queue's head watches the name
// and takes a queue step when a deletion is not followed by a hand-off;
// the Driver of every other waiter watches only the key of the waiter
// ahead of it, and takes the head's part when that key goes. So each
// release and hand-off reaches the next holder's Client and the head's,
// not every waiting Client.
package etcddriver
