package boltstore

import "github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"

// LogPath is the write-ahead log of the store file at path (PATH-wal): the
// appends acknowledged but not yet applied to the file. A Store opened on
// path uses it; anything that copies, moves or replaces the file behind the
// Store's back must take it along (see Shrink and Salvage).
//
// A symlink is followed: the log is beside the file it points to, so
// processes naming the file directly or through symlinks share one log. Hard
// links cannot be followed: each name of a hard-linked file would get a log
// of its own, so Open refuses a file with more than one name. Give a
// database one name (symlinks to it are fine).
func LogPath(path string) string { return wal.LogPath(path) }
