package cli

import "strings"

// isBool reports whether spec is a switch, taking no value.
func (s *flagSpec) isBool() bool {
	b, ok := s.value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// expandBundles splits combined short flags, as getopt does: -nq is -n
// -q, and -qw 5 is -q -w 5 (only the last letter may take a value, the
// next argument). An argument is split only if it is not a flag itself
// and every letter is a short flag. Values of flags are left alone, and so
// is everything from "--" on and, with flagsOnly, from the first argument
// that is not a flag (KEY, then COMMAND's own arguments).
func (f *flagSet) expandBundles(args []string, flagsOnly bool) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(out, args[i:]...)
		case f.takesValue(a):
			out = append(out, a)
			if i+1 < len(args) {
				out = append(out, args[i+1])
				i++
			}
			continue
		case !strings.HasPrefix(a, "-") || a == "-":
			if flagsOnly {
				return append(out, args[i:]...)
			}
			out = append(out, a)
			continue
		}
		split, ok := f.bundle(a)
		if !ok {
			out = append(out, a)
			continue
		}
		out = append(out, split...)
		if f.takesValue(split[len(split)-1]) && i+1 < len(args) {
			out = append(out, args[i+1])
			i++
		}
	}
	return out
}

// bundle splits a combined "-nq" into "-n", "-q".
func (f *flagSet) bundle(a string) ([]string, bool) {
	letters := strings.TrimPrefix(a, "-")
	if len(letters) < 2 || strings.HasPrefix(letters, "-") || strings.Contains(letters, "=") || f.fs.Lookup(letters) != nil {
		return nil, false
	}
	var out []string
	for i, r := range letters {
		s := f.lookup(string(r))
		if s == nil || s.short != string(r) || (i < len(letters)-1 && !s.isBool()) {
			return nil, false
		}
		out = append(out, "-"+string(r))
	}
	return out, true
}
