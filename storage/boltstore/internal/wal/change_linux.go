package wal

import "syscall"

// Change is what a stat says about a file's last change: its size and its
// change time, which every write moves on and nobody can set back.
type Change struct {
	Size  int64
	Ctime syscall.Timespec
}

// ChangeOf returns the change stat st says, and whether the system gives
// one (Linux does).
func ChangeOf(st *syscall.Stat_t) (Change, bool) {
	return Change{Size: st.Size, Ctime: st.Ctim}, true
}
