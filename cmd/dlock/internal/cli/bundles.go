package cli

import "strings"

// isBool reports whether spec is a switch, taking no value.
func (s *flagSpec) isBool() bool {
	b, ok := s.value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// expandBundles splits combined short flags, as getopt does: -nq is -n
// -q, -qw 5 is -q -w 5, and -w5 is -w 5 (a letter that takes a value
// takes the rest of the argument, or else the next argument). An argument
// is split only if it is not a flag itself and its letters are short
// flags. Values of flags are left alone, and so is everything from "--"
// on and, with flagsOnly, from the first argument that is not a flag
// (KEY, then COMMAND's own arguments).
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
		split, needsValue, ok := f.bundle(a)
		if !ok {
			out = append(out, a)
			continue
		}
		out = append(out, split...)
		if needsValue && i+1 < len(args) {
			out = append(out, args[i+1])
			i++
		}
	}
	return out
}

// bundle splits a combined "-nq" into "-n", "-q", and "-nw5" into "-n",
// "-w", "5". needsValue: the last letter takes a value, which is the next
// argument.
func (f *flagSet) bundle(a string) (split []string, needsValue, ok bool) {
	letters := strings.TrimPrefix(a, "-")
	if len(letters) < 2 || strings.HasPrefix(letters, "-") || strings.Contains(letters, "=") || f.fs.Lookup(letters) != nil {
		return nil, false, false
	}
	for i, r := range letters {
		s := f.lookup(string(r))
		if s == nil || !s.hasShort(string(r)) {
			return nil, false, false
		}
		split = append(split, "-"+string(r))
		if !s.isBool() {
			if rest := letters[i+len(string(r)):]; rest != "" {
				return append(split, rest), false, true
			}
			return split, true, true
		}
	}
	return split, false, true
}
