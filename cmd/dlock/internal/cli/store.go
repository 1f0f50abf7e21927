package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/redisdriver"
)

// The built-in store: Redis, the default when no store is given.
const (
	redisFlagName   = "redis"
	defaultRedisURL = "redis://127.0.0.1:6379/0"
)

// redisBackend is the store every build of dlock has.
var redisBackend = Backend{Flag: redisFlagName, Arg: "URL",
	Usage: "Redis URL; several (the flag repeated, or URLs separated by spaces) for a quorum of independent masters (see dlock --help)",
	Open:  openRedis}

// openRedis opens the Redis store at spec: one URL, or several separated
// by spaces (repeated --redis flags, or a DLOCK_REDIS list) for a quorum of
// independent masters (redisdriver.OpenQuorum). A URL never holds a space
// that is not escaped, so the list is unambiguous. The same URL twice would
// give one server two votes: a usage error.
func openRedis(spec string, opts ...dlock.Option) (*dlock.Client, error) {
	urls := specList(spec)
	if len(urls) == 1 {
		return redisdriver.Open(urls[0], opts...)
	}
	seen := make(map[string]bool, len(urls))
	for _, u := range urls {
		if seen[u] {
			return nil, fmt.Errorf("%w: redis URL %q given twice: each master of a quorum has one vote",
				dlock.ErrInvalidArgument, redisdriver.RedactURL(u))
		}
		seen[u] = true
	}
	return redisdriver.OpenQuorum(urls, opts...)
}

// specList splits a store's spec into its addresses: one, or several
// separated by spaces.
func specList(spec string) []string {
	if list := strings.Fields(spec); len(list) > 0 {
		return list
	}
	return []string{spec}
}

// store is one store's flag: its value from the command line (before or
// after the command name) and from its variable, read once by Main.
type store struct {
	backend  Backend
	value    string  // from the command line
	set      bool    // value was given on the command line
	env      string  // the variable's value, "" when unset
	password setting // --FLAG-password-file (connflags.go)
}

func (st *store) String() string {
	if st == nil {
		return ""
	}
	return st.value
}

// Set takes the flag's value; a repeated flag adds its value to the
// earlier ones, separated by a space (a quorum of Redis masters: see
// openRedis; a store that takes one address reports the list as a bad
// address).
func (st *store) Set(v string) error {
	if st.set {
		v = st.value + " " + v
	}
	st.value, st.set = v, true
	return nil
}

// spec is the store's address: the command line's, else the variable's.
func (st *store) spec() string {
	if st.set {
		return st.value
	}
	return st.env
}

// flagSpec declares st's flag. Its variable is read by Main, not by the
// flag set, so that the command line's choice of store wins over every
// variable (see chosenStore).
func (st *store) flagSpec() *flagSpec {
	def := "$" + envName(st.backend.Flag)
	if st.backend.Flag == redisFlagName {
		def += ", else " + defaultRedisURL
	}
	return &flagSpec{name: st.backend.Flag, arg: st.backend.Arg, usage: st.backend.Usage, def: def, value: st}
}

// newStores makes the stores of an invocation: Redis, then opts' backends.
func newStores(backends []Backend, getenv func(string) string) []*store {
	all := append([]Backend{redisBackend}, backends...)
	out := make([]*store, len(all))
	for i, b := range all {
		out[i] = &store{backend: b, password: setting{name: passwordFileFlag(b.Flag)}}
		if getenv != nil {
			out[i].env = getenv(envName(b.Flag))
			out[i].password.env = getenv(envName(out[i].password.name))
		}
	}
	return out
}

// redis is the built-in store's flag.
func (s *invocation) redis() *store { return s.stores[0] }

// chosenStore is the store a command uses: the one given on the command
// line, else the one whose variable is set, else Redis at its default
// URL. Two on the command line, or two variables and none on the command
// line, are a usage error: a lock in one store does not exclude a holder
// in the other.
func (s *invocation) chosenStore() (*store, error) {
	var flags, vars []*store
	for _, st := range s.stores {
		if st.set {
			flags = append(flags, st)
		}
		if st.env != "" {
			vars = append(vars, st)
		}
	}
	names := func(sts []*store, form func(string) string) string {
		var n []string
		for _, st := range sts {
			n = append(n, form(st.backend.Flag))
		}
		return strings.Join(n, " and ")
	}
	switch {
	case len(flags) == 1:
		return flags[0], nil
	case len(flags) > 1:
		return nil, usageErrorf("%s are exclusive: one store per command (see dlock --help)",
			names(flags, func(f string) string { return "--" + f }))
	case len(vars) == 1:
		return vars[0], nil
	case len(vars) > 1:
		all, but := "all", "all but one"
		if len(vars) == 2 {
			all, but = "both", "one"
		}
		return nil, usageErrorf("%s are %s set: unset %s, or choose with %s (see dlock --help)",
			names(vars, envName), all, but, names(vars, func(f string) string { return "--" + f }))
	}
	r := s.redis()
	return &store{backend: r.backend, value: defaultRedisURL, set: true, password: r.password}, nil
}

// openClient returns a Client on the chosen store; closing it closes its
// connections. Its errors are usage errors (a bad URL, endpoint or
// option), but for a store that could not be reached: etcd with a user
// authenticates as it opens, and that failure matches ErrBackend.
func (s *invocation) openClient(opts ...dlock.Option) (*dlock.Client, error) {
	st, err := s.chosenStore()
	if err != nil {
		return nil, err
	}
	spec, err := s.specFor(st)
	if err != nil {
		return nil, err
	}
	c, err := st.backend.Open(spec, opts...)
	switch {
	case errors.Is(err, dlock.ErrBackend):
		return nil, err // exitCode: ExitUnavailable
	case err != nil:
		return nil, &exitError{code: ExitUsage, err: err}
	}
	return c, nil
}

// storeHelp is the main help's part on stores other than Redis.
func (s *invocation) storeHelp() string {
	if len(s.stores) == 1 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nOther stores, on run, status, list and unlock (or before the command name):\n")
	var flags []string
	for _, st := range s.stores {
		flags = append(flags, "--"+st.backend.Flag)
		if st.backend.Flag == redisFlagName {
			continue
		}
		fmt.Fprintf(&b, "  --%s %s   %s ($%s)\n", st.backend.Flag, st.backend.Arg, st.backend.Usage, envName(st.backend.Flag))
		fmt.Fprintf(&b, "  --%s FILE   its password, from FILE ($%s)\n", st.password.name, envName(st.password.name))
	}
	fmt.Fprintf(&b, "One store per command: %s are exclusive. A store given on the command\n", strings.Join(flags, ", "))
	b.WriteString("line wins over every variable; two variables set and no flag is a usage\nerror. Without either, Redis at its default URL.\n")
	return b.String()
}
