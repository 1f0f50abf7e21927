//go:build race

package snippets

// raceEnabled: the test runs under the race detector, so go list builds
// the export data with -race too, as the test's own build did.
const raceEnabled = true
