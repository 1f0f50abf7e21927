// Package snippets holds the test that compiles every Go block of the
// repository's Markdown (README.md and docs/*.md), so that the examples in
// the documentation cannot drift from the API. The rules a block follows
// are at the top of snippets_test.go; the names a fragment may use without
// declaring them are in preamble.go.
//
// It is a module of its own because the blocks use packages of every
// module of the repository.
package snippets
