// Package redisfence makes Redis the fenced resource: SET, GET, HSET,
// INCRBY and DEL that succeed only if the caller's fencing token is not
// lower than the highest token seen for the key, each one Lua script, so
// the check, the write and the raising of the mark are one atomic step.
// A lower token gets a *fence.StaleTokenError (matching fence.ErrStaleToken)
// and changes nothing; an equal token is accepted (the same holder writing
// again).
//
// # Key layout
//
// The high-water mark of data key K is a string key holding the highest
// token in decimal, in the same Cluster slot as K (FenceKey computes it):
//
//	order:42             → dlock:fence{order:42}        (no hash tag: K becomes the tag)
//	user:{7}:profile     → dlock:fence:user:{7}:profile (K's own tag {7} is kept)
//
// The two forms cannot collide: one continues "dlock:fence" with '{', the
// other with ':'. A key without a hash tag that contains '}' cannot be
// placed so and is refused (dlock.ErrInvalidKey), as is a data key that
// begins with "dlock:fence", the marks' namespace: it could be another
// key's mark.
//
// The mark has no expiry, and Del keeps it: a stale holder must not be able
// to bring deleted data back. It costs one small key per fenced data key;
// delete it (with FenceKey) only once no holder of an old token can still
// be running.
//
// Only writes made through this package are fenced: a plain SET on K
// bypasses the mark.
package redisfence
