package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Flags are declared once, in a command's flag definition (see commands):
// that one declaration gives the long name (--wait), the short alias (-w),
// the environment variable (DLOCK_WAIT), the help line and the completion
// scripts. Adding a flag is adding one such line.
//
// Precedence: a flag on the command line, else its DLOCK_* variable, else
// the default. A bad value is the same usage error wherever it came from,
// naming where it came from (--wait "x" or DLOCK_WAIT="x").

// envPrefix starts every variable that sets a flag.
const envPrefix = "DLOCK_"

// envName is the variable that sets the flag called name.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// flagSpec is one declared flag.
type flagSpec struct {
	name  string // long name, without dashes
	short string // one-letter alias, or ""
	// aliases are more names (flock's spellings): one letter is written
	// with one dash (-e), a longer name with two (--nb). They have no
	// variables of their own.
	aliases []string
	arg     string // what the value is, for help ("D", "N", ...); "" for a switch
	usage   string
	def     string // default shown in help; "" for none
	env     bool   // settable from envName(name)
	value   flag.Value
	given   bool // set from the command line or the environment
	// envValue is the variable's value when the environment set the flag
	// and the command line did not; "" otherwise.
	envValue string
	// ownEnv: the variable is read by Main, not by applyEnv (see
	// globalValue); help shows it all the same.
	ownEnv bool
}

// flagSet is a command's flags: a standard flag.FlagSet in which every
// spec is registered under its long and short names, plus the specs for
// help, environment and completion.
type flagSet struct {
	cmd      string
	fs       *flag.FlagSet
	specs    []*flagSpec
	refusals []refusal // other tools' flags the command explains
	envOff   bool      // the command reads no variables
	badFlag  error     // the first bad value seen, with its flag's name
}

// refusal is a flag of another tool (flock's) that the command does not
// take: instead of "unknown flag", its message says what to write here.
type refusal struct {
	names []string // without dashes; one letter is a short flag
	why   string
}

// refuse declares names (without dashes) as flags the command does not
// take, for the reason why.
func (f *flagSet) refuse(why string, names ...string) {
	f.refusals = append(f.refusals, refusal{names: names, why: why})
}

// refusalOf returns the refusal of the unknown flag name (without dashes)
// and the flag as it is shown in the message: typed, or, in a bundle of
// short flags (-no), the refused letter.
func (f *flagSet) refusalOf(name, typed string) (shown, why string, ok bool) {
	find := func(n string) (string, bool) {
		for _, r := range f.refusals {
			if slices.Contains(r.names, n) {
				return r.why, true
			}
		}
		return "", false
	}
	if why, ok := find(name); ok {
		return typed, why, true
	}
	if len(name) < 2 || strings.HasPrefix(typed, "--") || strings.ContainsAny(name, "-=") {
		return "", "", false // not a bundle of short flags
	}
	for _, r := range name {
		if why, ok := find(string(r)); ok {
			return dashed(string(r)), why, true
		}
		if s := f.lookup(string(r)); s == nil || !s.hasShort(string(r)) {
			return "", "", false
		}
	}
	return "", "", false
}

// dashed is a flag's name as written: -x for one letter, --name otherwise.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// hasShort reports whether letter is one of the spec's one-letter names.
func (s *flagSpec) hasShort(letter string) bool {
	return s.short == letter || len(letter) == 1 && slices.Contains(s.aliases, letter)
}

// helpRef is where a command's usage is: "dlock run --help".
func helpRef(cmd string) string {
	if cmd == "" {
		return "dlock --help"
	}
	return "dlock " + cmd + " --help"
}

func newFlagSet(cmd string) *flagSet {
	fs := flag.NewFlagSet(strings.TrimSpace("dlock "+cmd), flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {} // parse errors become one-line messages instead
	return &flagSet{cmd: cmd, fs: fs}
}

// trackedValue records, on the spec, that a value was given, and on the
// set, the first bad value with the flag's long name.
type trackedValue struct {
	spec *flagSpec
	set  *flagSet
}

func (t trackedValue) String() string {
	if t.spec == nil {
		return ""
	}
	return t.spec.value.String()
}

func (t trackedValue) Set(v string) error {
	if err := t.spec.value.Set(v); err != nil {
		if t.set.badFlag == nil {
			t.set.badFlag = fmt.Errorf("--%s %q: %v", t.spec.name, v, err)
		}
		return err
	}
	t.spec.given, t.spec.envValue = true, ""
	return nil
}

func (t trackedValue) IsBoolFlag() bool {
	b, ok := t.spec.value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// add declares a flag.
func (f *flagSet) add(spec *flagSpec) {
	f.specs = append(f.specs, spec)
	v := trackedValue{spec: spec, set: f}
	f.fs.Var(v, spec.name, spec.usage)
	if spec.short != "" {
		f.fs.Var(v, spec.short, spec.usage)
	}
	for _, a := range spec.aliases {
		f.fs.Var(v, a, spec.usage)
	}
}

// lookup returns the spec called name (long or short), or nil.
func (f *flagSet) lookup(name string) *flagSpec {
	for _, s := range f.specs {
		if s.name == name || (s.short != "" && s.short == name) || slices.Contains(s.aliases, name) {
			return s
		}
	}
	return nil
}

// badValue is the usage error for a value of the flag called name that
// parsed but was refused later (a TTL below the store's minimum), naming
// where it came from as a parse error does: the variable, or the flag.
func (f *flagSet) badValue(name, value, why string) error {
	if s := f.lookup(name); s != nil && s.envValue != "" {
		return usageErrorf("%s=%q: %s (see %s)", envName(s.name), s.envValue, why, helpRef(f.cmd))
	}
	return usageErrorf("--%s %s: %s (see %s)", name, value, why, helpRef(f.cmd))
}

// given reports whether the flag called name was set by the command line
// or the environment.
func (f *flagSet) given(name string) bool {
	s := f.lookup(name)
	return s != nil && s.given
}

// Typed declarations. Each returns where the parsed value will be.

func (f *flagSet) duration(name, short string, def time.Duration, positive bool, usage string) *time.Duration {
	d := def
	f.add(&flagSpec{name: name, short: short, arg: "D", usage: usage, def: def.String(), env: true,
		value: &durationValue{d: &d, positive: positive}})
	return &d
}

// optDuration is a duration without a default: set tells whether one was given.
func (f *flagSet) optDuration(name, short, usage, def string) *optionalDuration {
	o := &optionalDuration{}
	f.add(&flagSpec{name: name, short: short, arg: "D", usage: usage, def: def, env: true, value: o})
	return o
}

func (f *flagSet) boolean(name, short, usage string) *bool {
	b := new(bool)
	f.add(&flagSpec{name: name, short: short, usage: usage, env: true, value: (*boolValue)(b)})
	return b
}

func (f *flagSet) str(name, short, arg, usage, def string) *string {
	s := new(string)
	f.add(&flagSpec{name: name, short: short, arg: arg, usage: usage, def: def, env: true, value: (*stringValue)(s)})
	return s
}

func (f *flagSet) integer(name, short string, def, lo, hi int, usage string) *int {
	n := def
	f.add(&flagSpec{name: name, short: short, arg: "N", usage: usage, def: strconv.Itoa(def), env: true,
		value: &intValue{n: &n, lo: lo, hi: hi}})
	return &n
}

// noEnv makes the last declared flag command-line only: for flags that
// name the action itself (unlock --force, run -c) rather than a setting,
// which a variable left in the environment must not supply.
func (f *flagSet) noEnv() { f.specs[len(f.specs)-1].env = false }

// applyEnv sets every flag that has a variable from it (unless the
// command reads none); parsing the command line afterwards lets a flag
// win over its variable. A bad value is a usage error naming the
// variable.
func (f *flagSet) applyEnv(getenv func(string) string) error {
	for _, s := range f.specs {
		if !s.env || f.envOff || getenv == nil {
			continue
		}
		v := getenv(envName(s.name))
		if v == "" {
			continue
		}
		if err := s.value.Set(v); err != nil {
			return usageErrorf("%s=%q: %v (see %s)", envName(s.name), v, err, helpRef(f.cmd))
		}
		s.given, s.envValue = true, v
	}
	return nil
}

// parseArgs parses command-line flags only; parse errors become usage
// errors worded the same way for every flag.
func (f *flagSet) parseArgs(args []string) error {
	f.badFlag = nil
	err := f.fs.Parse(f.expandBundles(args, true))
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return err
	case f.badFlag != nil:
		return usageErrorf("%v (see %s)", f.badFlag, helpRef(f.cmd))
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		typed := asTyped(args, name)
		msg = "unknown flag " + typed
		if shown, why, ok := f.refusalOf(strings.TrimLeft(name, "-"), typed); ok {
			msg = shown + ": " + why
		}
	} else if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		if s := f.lookup(name); s != nil {
			name = s.name
		}
		msg = "--" + name + " needs a value"
	}
	return usageErrorf("%s (see %s)", msg, helpRef(f.cmd))
}

// asTyped is the flag the flag package reports as name ("-bogus", with one
// dash whatever was typed) as the command line spelled it: "--bogus".
func asTyped(args []string, name string) string {
	bare := strings.TrimLeft(name, "-")
	for _, a := range args {
		if a == "--" {
			break
		}
		flagName, _, _ := strings.Cut(a, "=")
		if strings.HasPrefix(flagName, "-") && strings.TrimLeft(flagName, "-") == bare {
			return flagName
		}
	}
	return name
}

// takesValue reports whether arg (as written, "-w" or "--wait") is a flag
// whose value is the next argument.
func (f *flagSet) takesValue(arg string) bool {
	if len(arg) < 2 || arg[0] != '-' || strings.Contains(arg, "=") {
		return false
	}
	fl := f.fs.Lookup(strings.TrimPrefix(strings.TrimPrefix(arg, "-"), "-"))
	if fl == nil {
		return false
	}
	b, ok := fl.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}

// writeHelp prints the flags, one per line with its variable and default.
func (f *flagSet) writeHelp(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, s := range f.specs {
		names := "    --" + s.name
		if s.short != "" {
			names = "-" + s.short + ", --" + s.name
		}
		for _, a := range s.aliases {
			names += ", " + dashed(a)
		}
		if s.arg != "" {
			names += " " + s.arg
		}
		var notes []string
		if s.def != "" {
			notes = append(notes, "default "+s.def)
		}
		if (s.env || s.ownEnv) && !f.envOff {
			notes = append(notes, "$"+envName(s.name))
		}
		extra := ""
		if len(notes) > 0 {
			extra = " (" + strings.Join(notes, "; ") + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s%s\n", names, s.usage, extra)
	}
	_ = tw.Flush()
}

// Value types. Their errors say what is wrong with the value; the caller
// adds which flag or variable it was.

// parseDuration takes a Go duration (1m30s, 500ms) or, as flock(1) does,
// plain seconds, fractions allowed (10, 0.5).
func parseDuration(v string) (time.Duration, error) {
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if math.IsNaN(secs) || math.IsInf(secs, 0) || math.Abs(secs) > math.MaxInt64/float64(time.Second) {
			return 0, errors.New("not a usable number of seconds")
		}
		return time.Duration(secs * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, errors.New("not a duration (want seconds, e.g. 1.5, or a Go duration, e.g. 500ms, 2m)")
	}
	return d, nil
}

type durationValue struct {
	d        *time.Duration
	positive bool // zero is refused too
}

func (v *durationValue) String() string {
	if v.d == nil {
		return ""
	}
	return v.d.String()
}

func (v *durationValue) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	if err := checkSign(d, v.positive); err != nil {
		return err
	}
	*v.d = d
	return nil
}

func checkSign(d time.Duration, positive bool) error {
	switch {
	case positive && d <= 0:
		return errors.New("must be positive")
	case d < 0:
		return errors.New("must not be negative")
	}
	return nil
}

// optionalDuration is a non-negative duration flag without a default
// value; set records whether it was given.
type optionalDuration struct {
	d   time.Duration
	set bool
}

func (o *optionalDuration) String() string {
	if o == nil || !o.set {
		return ""
	}
	return o.d.String()
}

func (o *optionalDuration) Set(v string) error {
	d, err := parseDuration(v)
	if err != nil {
		return err
	}
	if err := checkSign(d, false); err != nil {
		return err
	}
	o.d, o.set = d, true
	return nil
}

type boolValue bool

func (b *boolValue) String() string {
	if b == nil {
		return ""
	}
	return strconv.FormatBool(bool(*b))
}

func (b *boolValue) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("not a boolean (want 1, 0, true or false)")
	}
	*b = boolValue(v)
	return nil
}

func (b *boolValue) IsBoolFlag() bool { return true }

type stringValue string

func (s *stringValue) String() string {
	if s == nil {
		return ""
	}
	return string(*s)
}

func (s *stringValue) Set(v string) error { *s = stringValue(v); return nil }

type intValue struct {
	n      *int
	lo, hi int
}

func (v *intValue) String() string {
	if v.n == nil {
		return ""
	}
	return strconv.Itoa(*v.n)
}

func (v *intValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("not an integer")
	}
	if n < v.lo || n > v.hi {
		return fmt.Errorf("must be %d to %d", v.lo, v.hi)
	}
	*v.n = n
	return nil
}
