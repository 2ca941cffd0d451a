//go:build race

package store

// raceEnabled skips heap assertions: the race detector inflates the heap.
const raceEnabled = true
