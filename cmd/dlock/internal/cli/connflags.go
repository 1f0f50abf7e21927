package cli

import (
	"errors"
	"flag"
	"net/url"
	"strconv"
	"strings"
)

// Credentials and TLS reach the store through its address: the flags
// below append options to the chosen store's spec (password_file=FILE,
// ca_file=FILE, ...), which every store's parser reads by the same names
// (redisdriver.ParseURL, etcddriver.ParseEndpoints). So a password never
// has to be on the command line, where ps shows it, nor in a variable,
// which COMMAND inherits: only the name of a file that holds it.

// Options of a store's spec that the flags below add.
const (
	paramPasswordFile = "password_file"
	paramCAFile       = "ca_file"
	paramCertFile     = "cert_file"
	paramKeyFile      = "key_file"
	paramInsecure     = "insecure_skip_verify"
)

// passwordFileFlag is the flag of a store's password file: for --redis,
// --redis-password-file (and DLOCK_REDIS_PASSWORD_FILE).
func passwordFileFlag(storeFlag string) string { return storeFlag + "-password-file" }

// globalValue is the value of a flag that is taken before the command
// name as well as after it: a store's flag and those that add to its
// spec. Main reads its variable once (see store), so that a flag given
// before the command name is not overridden by the variable.
type globalValue interface {
	flag.Value
	global()
}

func (st *store) global() {}

// setting is a string flag of that kind: the command line's value, else
// its variable's.
type setting struct {
	name  string // the flag's long name
	value string // from the command line
	set   bool   // given on the command line
	env   string // the variable's value, "" when unset
}

func (v *setting) global() {}

func (v *setting) String() string {
	if v == nil {
		return ""
	}
	return v.value
}

func (v *setting) Set(s string) error {
	v.value, v.set = s, true
	return nil
}

// get is the value in effect: the command line's, else the variable's.
func (v *setting) get() string {
	if v.set {
		return v.value
	}
	return v.env
}

// source names where the value in effect came from, for messages.
func (v *setting) source() string {
	if v.set {
		return "--" + v.name
	}
	return envName(v.name)
}

// boolSetting is a switch of that kind.
type boolSetting struct {
	setting
}

func (b *boolSetting) IsBoolFlag() bool { return true }

func (b *boolSetting) Set(s string) error {
	if _, err := strconv.ParseBool(s); err != nil {
		return errors.New("not a boolean (want 1, 0, true or false)")
	}
	return b.setting.Set(s)
}

// on is the switch's state; a variable that is not a boolean is a usage
// error.
func (b *boolSetting) on() (bool, error) {
	v := b.get()
	if v == "" {
		return false, nil
	}
	on, err := strconv.ParseBool(v)
	if err != nil {
		return false, usageErrorf("%s=%q: not a boolean (want 1, 0, true or false) (see dlock --help)", envName(b.name), v)
	}
	return on, nil
}

// tlsFlags are the TLS flags, for whichever store is chosen.
type tlsFlags struct {
	ca, cert, key setting
	insecure      boolSetting
}

func newTLSFlags(getenv func(string) string) *tlsFlags {
	t := &tlsFlags{
		ca: setting{name: "tls-ca"}, cert: setting{name: "tls-cert"}, key: setting{name: "tls-key"},
		insecure: boolSetting{setting{name: "tls-insecure-skip-verify"}},
	}
	if getenv != nil {
		for _, v := range []*setting{&t.ca, &t.cert, &t.key, &t.insecure.setting} {
			v.env = getenv(envName(v.name))
		}
	}
	return t
}

// fileOption is a flag naming a file and the option of the spec it adds.
type fileOption struct {
	v     *setting
	param string
}

// files are the TLS flags that name files.
func (t *tlsFlags) files() []fileOption {
	return []fileOption{{&t.ca, paramCAFile}, {&t.cert, paramCertFile}, {&t.key, paramKeyFile}}
}

// globalFlagSpecs declares, in help order, the flags every store command
// takes, also before the command name: each store's, each store's
// password file, then the TLS flags.
func (s *invocation) globalFlagSpecs() []*flagSpec {
	var out []*flagSpec
	for _, st := range s.stores {
		out = append(out, st.flagSpec())
	}
	for _, st := range s.stores {
		out = append(out, &flagSpec{name: st.password.name, arg: "FILE", ownEnv: true, value: &st.password,
			usage: "read the " + storeName(st) + " password from FILE (one trailing newline dropped); it replaces a password in the " + st.backend.Flag + " address"})
	}
	t := s.tls
	out = append(out,
		&flagSpec{name: t.ca.name, arg: "FILE", ownEnv: true, value: &t.ca,
			usage: "verify the store's TLS certificate with the CA certificates in FILE (PEM) instead of the system's"},
		&flagSpec{name: t.cert.name, arg: "FILE", ownEnv: true, value: &t.cert,
			usage: "client certificate (PEM) for a store that requires one; with --tls-key"},
		&flagSpec{name: t.key.name, arg: "FILE", ownEnv: true, value: &t.key,
			usage: "the client certificate's private key (PEM); with --tls-cert"},
		&flagSpec{name: t.insecure.name, ownEnv: true, value: &t.insecure,
			usage: "INSECURE: do not verify the store's TLS certificate, so anyone on the network path can pose as the store; also needed for insecure_skip_verify in an address"},
	)
	return out
}

// storeName is how help names a store: Redis, else its flag.
func storeName(st *store) string {
	if st.backend.Flag == redisFlagName {
		return "Redis"
	}
	return st.backend.Flag
}

// specFor is st's spec with the options the password-file and TLS flags
// add. The command line's own mistakes are usage errors: another store's
// password file, a flag that repeats an option the address has, and
// insecure_skip_verify in the address without --tls-insecure-skip-verify,
// so that turning verification off is never left to a variable holding a
// URL.
//
// A spec that lists several addresses (a quorum of Redis masters) gets
// the options on each.
func (s *invocation) specFor(st *store) (string, error) {
	for _, other := range s.stores {
		if other.password.set && other.backend.Flag != st.backend.Flag {
			return "", usageErrorf("--%s, but the store is --%s (see dlock --help)", other.password.name, st.backend.Flag)
		}
	}
	list := specList(st.spec())
	for i, spec := range list {
		var err error
		if list[i], err = s.withOptions(st, spec); err != nil {
			return "", err
		}
	}
	return strings.Join(list, " "), nil
}

// withOptions is one address of st's spec with the options of the
// password-file and TLS flags added (see specFor).
func (s *invocation) withOptions(st *store, spec string) (string, error) {
	has := queryOptions(spec)
	insecure, err := s.tls.insecure.on()
	if err != nil {
		return "", err
	}
	if v, ok := has[paramInsecure]; ok && !insecure && v != "false" && v != "0" {
		return "", usageErrorf("%s in the %s address turns certificate verification off: give --%s too (see dlock --help)",
			paramInsecure, st.backend.Flag, s.tls.insecure.name)
	}
	var add []string
	for _, a := range append([]fileOption{{&st.password, paramPasswordFile}}, s.tls.files()...) {
		file := a.v.get()
		if file == "" {
			continue
		}
		if _, dup := has[a.param]; dup {
			return "", usageErrorf("%s and %s= in the %s address are one setting: give one (see dlock --help)", a.v.source(), a.param, st.backend.Flag)
		}
		add = append(add, a.param+"="+url.QueryEscape(file))
	}
	if _, ok := has[paramInsecure]; insecure && !ok {
		add = append(add, paramInsecure+"=true")
	}
	if len(add) == 0 {
		return spec, nil
	}
	sep := "?"
	if strings.Contains(spec, "?") {
		sep = "&"
	}
	return spec + sep + strings.Join(add, "&"), nil
}

// queryOptions are the options in spec's query (after its first '?', up
// to a '#'), by name, with their last values; names are taken loosely, a
// bad escape as it is, since only the store's parser judges the spec.
func queryOptions(spec string) map[string]string {
	out := map[string]string{}
	_, query, ok := strings.Cut(spec, "?")
	if !ok {
		return out
	}
	query, _, _ = strings.Cut(query, "#")
	for kv := range strings.SplitSeq(query, "&") {
		k, v, _ := strings.Cut(kv, "=")
		if name, err := url.QueryUnescape(k); err == nil {
			k = name
		}
		if value, err := url.QueryUnescape(v); err == nil {
			v = value
		}
		if k != "" {
			out[k] = v
		}
	}
	return out
}

// storeVariables are the variables that choose a store or reach it: its
// address (with a password, at times), its password file, the TLS files.
// COMMAND gets none of them: they are dlock's, and a nested dlock given
// no store of its own must not reach this one with half of its settings.
func (s *invocation) storeVariables() []string {
	var names []string
	for _, st := range s.stores {
		names = append(names, envName(st.backend.Flag), envName(st.password.name))
	}
	for _, f := range s.tls.files() {
		names = append(names, envName(f.v.name))
	}
	return append(names, envName(s.tls.insecure.name))
}

// withoutVariables is environ (NAME=value entries) without the variables
// called names.
func withoutVariables(environ, names []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, n := range names {
			drop = drop || name == n
		}
		if !drop {
			out = append(out, kv)
		}
	}
	return out
}
