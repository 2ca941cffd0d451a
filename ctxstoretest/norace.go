//go:build !race

package ctxstoretest

const raceEnabled = false
