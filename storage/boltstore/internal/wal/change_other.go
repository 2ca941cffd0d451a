//go:build !linux

package wal

import "syscall"

// Change is what a stat says about a file's last change; on this system,
// nothing is taken from it.
type Change struct{}

// ChangeOf says that no change stat is taken on this system: callers read
// the file itself.
func ChangeOf(*syscall.Stat_t) (Change, bool) { return Change{}, false }
