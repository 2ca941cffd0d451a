// Package benchcmp holds benchmarks that put ctxstore's bbolt engine side
// by side with SQLite (modernc.org/sqlite, pure Go) on the same data, in one
// run: the many-small-sessions axis (file bytes, bulk import, listing,
// opening one session among many). SQLite is a test-only dependency: this
// package has no code outside its tests. Figures and the commands that
// produce them are in docs/performance.md.
package benchcmp
