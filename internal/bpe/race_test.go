//go:build race

package bpe

// raceEnabled makes the slow oracle comparisons sample under the race
// detector, which slows the oracle library tenfold.
const raceEnabled = true
