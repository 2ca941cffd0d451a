//go:build race

package view_test

// The race detector slows the property tests ~10×; they run fewer cases.
const raceEnabled = true
