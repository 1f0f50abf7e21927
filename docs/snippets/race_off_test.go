//go:build !race

package snippets

// raceEnabled: the test runs without the race detector.
const raceEnabled = false
