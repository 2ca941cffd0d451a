//go:build !race

package view_test

const raceEnabled = false
