package cli

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// shown is s as text output prints a value that comes from the store (a
// key, a host, an id, a meta text): as it is when it is all printable,
// else quoted as a Go string literal, so that another holder's newline
// cannot forge a row and its escape sequences never reach the terminal.
// A value that starts with a quote is quoted too, so that it cannot pass
// for a quoted one. JSON output escapes on its own and does not use it.
func shown(s string) string {
	if strings.HasPrefix(s, `"`) || !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if !strconv.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}
