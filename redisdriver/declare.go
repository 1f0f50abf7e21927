package redisdriver

// Keys a script call names, in a Cluster.
//
// A Cluster node checks the keys a script call names (KEYS) before it runs
// it, and each command the script sends as it runs. While a slot is being
// migrated, the migrating node refuses a command on a key it does not have
// (the key moved, or does not exist yet) and the importing node a command
// on several keys that it does not all have: inside a script that is the
// error "Script attempted to access a non local key", after the script may
// have written part of what it meant to. So in a Cluster every script call
// names every key of the name it may touch (the lock's, :last, the queue
// keys, the waiting mark, the caller's own release record), and one more
// that no script ever writes (guardSuffix): the node then answers TRYAGAIN
// (the keys are split, or the guard is on no node) before the script runs,
// for as long as the slot is being migrated, and the Driver sends the call
// again (migrationRetry) until the migration ends. A script never runs
// while its slot's keys are split, so none fails half-way.
//
// One key cannot be named in advance: the release record that keep_release
// (lib.lua) moves the previous releaser's value to is named after that
// releaser's id, which the script reads from :last. Outside a migration a
// script may touch any key of its slot; during one, the guard keeps the
// script from running at all.
//
// Outside a Cluster nothing is migrated, and the calls name only the keys
// they always did: each argument costs the server time on every call.

// guardSuffix is after the lock key: a key no script writes, named by every
// script call in a Cluster (but renewals of exclusive locks, which touch
// their lock key alone), so that none runs while its slot is being
// migrated.
const guardSuffix = ":unset"

// The suffixes, after the lock key, of the other keys of a name that
// scripts touch (queue_lib.lua, lib.lua).
var nameSuffixes = [...]string{lastSuffix, queueSuffix, ":w", ":e", ":d", waitingSuffix}

// releaseInfix is between the lock key and an id prefix in the name of a
// release record (release_key in lib.lua).
const releaseInfix = ":r:"

// declare returns keys, the keys of a call of s with args, followed, in a
// Cluster, by the other keys the call may touch and the guard. Outside a
// Cluster it returns keys as they are.
func (d *Driver) declare(s *script, keys []string, args []any) []string {
	if d.cluster == nil || len(keys) == 0 {
		return keys
	}
	var locks []string // the lock key of each name of the call
	var own []string   // the release records of the caller's own leases
	switch s {
	case acquireScript, enqueueScript, forceReleaseScript:
		locks = keys[:1]
	case releaseScript, acquireAllScript: // a lock key and its :last, per lock
		for i := 0; i < len(keys); i += 2 {
			locks = append(locks, keys[i])
		}
		if s == releaseScript {
			for i := range locks {
				if idp, ok := args[2*i].(string); ok {
					own = append(own, locks[i]+releaseInfix+idp)
				}
			}
		}
	case queueRenewScript, queueReleaseScript: // a lock key per lease
		locks = keys
		if s == queueReleaseScript {
			for i := range locks {
				if id, ok := args[2*i].(string); ok {
					own = append(own, locks[i]+releaseInfix+idPrefix(id))
				}
			}
		}
	default:
		return keys // renew.lua touches its lock keys alone
	}
	all := make([]string, 0, len(keys)+len(locks)*len(nameSuffixes)+len(own)+1)
	all = append(all, keys...)
	named := make(map[string]bool, cap(all))
	for _, k := range keys {
		named[k] = true
	}
	add := func(k string) {
		if !named[k] {
			named[k] = true
			all = append(all, k)
		}
	}
	for _, l := range locks {
		for _, suffix := range nameSuffixes {
			add(l + suffix)
		}
	}
	for _, k := range own {
		add(k)
	}
	add(locks[0] + guardSuffix) // one slot per call: one guard is enough
	return all
}
