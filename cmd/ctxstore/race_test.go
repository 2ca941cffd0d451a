//go:build race

package main

// raceEnabled shrinks the largest test inputs: the race detector makes the
// store's encoding ten times slower.
const raceEnabled = true
