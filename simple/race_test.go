//go:build race

package simple_test

const raceEnabled = true
