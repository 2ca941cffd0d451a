//go:build race

package ctxstoretest

// raceEnabled: under the race detector the suite views fewer and smaller
// histories (the plain run covers them) and keeps its concurrency tests
// whole, which is what the detector is for.
const raceEnabled = true
