package engine

import (
	"hash/maphash"
	"sync/atomic"
)

// settledSlots is how many names settledReleases remembers at once.
const settledSlots = 256

// settledReleases remembers, for the names this engine released last, the
// id of the lease whose release it had the answer to. A retry of that
// release can no longer come (the engine sends one only while it has no
// answer, and the store client's own retries ended with the call), so the
// next release of the name tells the driver it need not keep proof of it
// (driver.ReleaseRequest.Settled): the Redis driver then saves a write and
// a key per cycle of a name a Client locks again and again.
//
// One slot per hash of a name, overwritten by any other name of the same
// hash: memory stays bounded however many names the engine sees, and a
// forgotten name costs only the saving.
type settledReleases struct {
	seed  maphash.Seed
	slots [settledSlots]atomic.Pointer[settledRelease]
}

type settledRelease struct{ key, id string }

func (s *settledReleases) slot(key string) *atomic.Pointer[settledRelease] {
	return &s.slots[maphash.String(s.seed, key)%settledSlots]
}

// of returns the id of the last lease of key whose release was answered,
// or "".
func (s *settledReleases) of(key string) string {
	if r := s.slot(key).Load(); r != nil && r.key == key {
		return r.id
	}
	return ""
}

// settle records that the release of lease id of key was answered.
func (s *settledReleases) settle(key, id string) {
	s.slot(key).Store(&settledRelease{key: key, id: id})
}
