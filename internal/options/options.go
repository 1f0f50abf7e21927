// Package options applies the functional options of the constructors of
// this module (dlock.New, redisdriver.New, once.New, redisonce.New,
// election.New), so that all treat a nil option alike.
package options

import (
	"fmt"

	"github.com/dlockio/dlock/driver"
)

// Apply calls every option of opts on target, in order. A nil option is an
// error matching driver.ErrInvalid (dlock.ErrInvalidArgument); the first
// error an option returns is returned as it is.
func Apply[T any, O ~func(T) error](target T, opts []O) error {
	for _, o := range opts {
		if o == nil {
			return fmt.Errorf("%w: nil option", driver.ErrInvalid)
		}
		if err := o(target); err != nil {
			return err
		}
	}
	return nil
}
