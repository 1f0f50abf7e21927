package dlock_test

import (
	"regexp"
	"testing"

	"github.com/dlockio/dlock"
)

// semver is a semantic version without the tag's "v": MAJOR.MINOR.PATCH,
// an optional pre-release and optional build metadata.
var semver = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

// The version changes with every release (scripts/release writes it), so
// the test checks its form, not its value.
func TestVersionIsSemantic(t *testing.T) {
	if !semver.MatchString(dlock.Version) {
		t.Errorf("Version %q is not a semantic version without a leading v", dlock.Version)
	}
}
