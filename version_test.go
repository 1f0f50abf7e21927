package dlock_test

import (
	"fmt"

	"github.com/dlockio/dlock"
)

// The module's version, as the dlock command reports it.
func ExampleVersion() {
	fmt.Println("dlock", dlock.Version)
	// Output: dlock 0.1.0
}
