package fence

import (
	"errors"
	"fmt"
)

// ErrStaleToken is matched (errors.Is) by every rejection of a write whose
// fencing token is lower than the highest token the resource has seen. The
// error value returned is a *StaleTokenError, which says which resource,
// which token and which high-water mark.
var ErrStaleToken = errors.New("fence: stale fencing token")

// StaleTokenError is the error a guard returns when it rejects a token. It
// matches ErrStaleToken.
type StaleTokenError struct {
	// Resource is the name the write was guarded under.
	Resource string
	// Token is the rejected token.
	Token Token
	// Highest is the highest token the resource had seen, greater than Token.
	Highest Token
}

// Stale returns the error a guard reports when it rejects tok because it has
// seen highest for resource. Custom guards use it so that their callers can
// match ErrStaleToken.
func Stale(resource string, tok, highest Token) error {
	return &StaleTokenError{Resource: resource, Token: tok, Highest: highest}
}

// Error reports the resource, the rejected token and the high-water mark.
func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("fence: stale fencing token %d for %q: it has seen %d", e.Token, e.Resource, e.Highest)
}

// Unwrap returns ErrStaleToken, so errors.Is(err, ErrStaleToken) holds.
func (e *StaleTokenError) Unwrap() error { return ErrStaleToken }
