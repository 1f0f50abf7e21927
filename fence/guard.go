package fence

import "context"

// Token is a fencing token as dlock hands it out (Lease.Token): it strictly
// increases with every acquisition of a lock. It is an alias of uint64 so
// that lease.Token() passes as it is.
type Token = uint64

// Guard is a resource that accepts a write only from a token not lower than
// the highest token it has seen for that resource.
//
// Apply calls write if tok is not lower than the highest token seen for
// resource, and makes the check and the write one step: no other Apply for
// the same resource runs between them. When write returns nil, tok becomes
// the highest token seen (if it is higher); when it returns an error, the
// high-water mark stays as it was and Apply returns that error. A lower
// token gets an error matching ErrStaleToken (a *StaleTokenError) and write
// is not called. An equal token is accepted: it is the same holder writing
// again.
//
// Reads that feed a later write should go through Apply too (with a write
// that only reads): registering the token on the read is what stops an old
// holder that read before a new holder from writing after the new holder's
// read.
type Guard interface {
	Apply(ctx context.Context, resource string, tok Token, write func(ctx context.Context) error) error
}
