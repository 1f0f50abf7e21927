// Package zkdriver is the ZooKeeper backend of dlock: the same Client,
// Lease, lost-lock signal and fencing tokens as on Redis and etcd, on a
// ZooKeeper ensemble (github.com/go-zookeeper/zk). It is a module of its
// own, so that users of the other drivers never download the ZooKeeper
// client.
//
// # Connecting
//
// Open and OpenContext take a server list, host:port,host2:port (see
// ParseServers), connect, and wait for a session. A Driver has one
// session, shared by every lease of its Client; New makes a Driver on a
// connection the application made.
//
// # Nodes
//
// A lock named N is the container node <prefix>/<N escaped>, and each
// acquisition is an ephemeral sequential node under it whose name carries
// the acquisition's 128-bit owner id: x-<id>-<counter>. The lowest live
// node holds the lock; an acquisition creates its node, then reads the
// name's children and its own node's stat together (two requests in
// flight, one round trip), and deletes its node if another is ahead. A
// create whose reply was lost with the connection is followed by a look
// for the id among the children, so it never leaves a second node.
//
// # Fencing tokens
//
// The token is the creation zxid of the acquisition's node. ZooKeeper's
// zxid orders every committed write of the ensemble: an epoch (raised by
// every leader election) in the high 32 bits and a counter in the low 32,
// logged by a quorum before a write is acknowledged. So a token is
// strictly greater than every token issued before, for any name, across
// restarts, kill -9 and leader changes; see docs/zookeeper.md.
//
// # Leases, sessions and expiry
//
// A node lasts at most its session: ZooKeeper deletes every ephemeral node
// of a session it expires. A lease also has dlock's TTL, written in its
// node: a node not modified for its TTL (by the leader's clock: its
// mtime against the finder's own node's, moved on by the finder's clock
// since that write was answered, so never ahead of the leader) is
// expired, and whoever finds it deletes it, checked against the version
// it read so that a renewal in between wins. Renew rewrites the nodes of
// a batch in one multi request. The TTL may not exceed MaxTTL, two thirds
// of the session timeout, so that dlock's validity deadline, counted from
// the send time of the last answered renewal, always comes before the
// servers can expire the session. A session expiry ends every lease of
// the Client at once: their nodes are gone, and each lease's deadline has
// passed before it.
//
// # Queues
//
// The Driver implements driver.Queuer and driver.QueueLister, so dlock's
// fair lock (Lock's default: Capabilities.QueueByDefault, an uncontended
// queued acquisition costing what a plain one does), RWMutex and Semaphore
// run on ZooKeeper. A node's kind is in its name (x exclusive, r shared,
// p<limit> permit), and the grant rule is strict arrival order: an
// exclusive node when no live node is ahead, a shared one when only shared
// nodes are, a permit when fewer than its limit of live permits and
// nothing else are. The Driver of a waiter watches only the node that
// blocks it (a permit waiter: the name's children), judges again when that
// node goes or its TTL runs out, and announces the grant on the waiter's
// inbox. An exclusive grant's time is noted in the name's node.
//
// # Waiting
//
// Watch follows a name with one ZooKeeper watch on its first node (the
// holder), so a release, a forced release, an expiry or the end of the
// holder's session wakes the name's waiters, and other waiters coming and
// going do not.
package zkdriver
