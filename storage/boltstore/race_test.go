//go:build race

package boltstore

// raceEnabled skips heap assertions: the race detector inflates the heap.
const raceEnabled = true
